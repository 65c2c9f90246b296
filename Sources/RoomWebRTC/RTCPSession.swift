/// The RTCP side of one audio stream, without I/O: what we sent (for our SR), what we receive
/// from each remote source (RFC 3550 A.1 sequence validation, A.3 loss, A.8 jitter), what the
/// peer's reports say about our stream (round-trip time, fraction lost), and when the next
/// report is due. The caller (`WebRTCMediaTransport`) gives it every RTP packet sent and
/// received with the time, the verified RTCP it receives, and sends what `writeReport` writes.
///
/// Times are the caller's monotonic clock in nanoseconds. NTP time (for SR timestamps and
/// LSR/DLSR) is that clock moved to the wall clock read once at `init`: a wall clock stepped
/// during a call (NTP sync on a board that just booted) would otherwise show as a round trip of
/// minutes or a negative one, since RTT is our NTP now minus our own echoed SR time.
///
/// Per-packet calls do not allocate; a new remote source costs one array append (at most
/// `maximumSources`, then new SSRCs are not tracked).
public struct RTCPSession: Sendable {
    /// The stream's RTP clock (Opus: 48 kHz whatever the sampling rate, RFC 7587).
    public let clockRate: UInt32
    public private(set) var localSSRC: UInt32
    public private(set) var cname: [UInt8]

    /// What the peer's latest report block about our stream said.
    public private(set) var remoteReport: RTCPReportBlock?
    /// Round trip from the peer's latest report that echoed one of our SRs (RFC 3550 §6.4.1:
    /// arrival − LSR − DLSR), in milliseconds. Nil until a report echoes an SR.
    public private(set) var roundTripMs: Double?
    /// When the next report is due (monotonic ns); nil before `start`.
    public private(set) var nextReportAt: UInt64?
    /// Remote sources tracked, in order of first packet.
    public private(set) var sources: [SourceStatistics] = []

    public static let maximumSources = 8

    private let ntpAtZero: UInt64
    // What we sent.
    private var packetsSent: UInt32 = 0
    private var octetsSent: UInt32 = 0
    private var lastSentTimestamp: UInt32 = 0
    private var lastSentAt: UInt64 = 0
    private var sentSinceReport = false

    /// - Parameters:
    ///   - wallClockNTP: the wall clock as an NTP timestamp (32.32 since 1900) at monotonic
    ///     time `monotonicNow`.
    public init(localSSRC: UInt32, cname: String, clockRate: UInt32 = 48000, wallClockNTP: UInt64, monotonicNow: UInt64) {
        self.localSSRC = localSSRC
        self.cname = Array(cname.utf8.prefix(255))
        self.clockRate = clockRate
        ntpAtZero = wallClockNTP &- Self.ntpDuration(nanoseconds: monotonicNow)
    }

    /// The NTP timestamp (32.32) at monotonic time `now`.
    public func ntp(at now: UInt64) -> UInt64 { ntpAtZero &+ Self.ntpDuration(nanoseconds: now) }

    static func ntpDuration(nanoseconds: UInt64) -> UInt64 {
        // seconds << 32 | fraction, without overflowing for any uptime.
        (nanoseconds / 1_000_000_000) << 32 | ((nanoseconds % 1_000_000_000) << 32) / 1_000_000_000
    }

    /// NTP time (32.32) as seconds since 1970, for the caller's wall clock.
    public static func ntp(unixSeconds: Double) -> UInt64 {
        let s = unixSeconds + 2_208_988_800
        let whole = s.rounded(.down)
        return UInt64(whole) << 32 | UInt64((s - whole) * 4_294_967_296)
    }

    /// The SSRC and CNAME to report under (the SDP's `a=ssrc` and `cname`).
    public mutating func setLocal(ssrc: UInt32, cname: String) {
        if ssrc != localSSRC { resetSender() }
        localSSRC = ssrc
        self.cname = Array(cname.utf8.prefix(255))
    }

    private mutating func resetSender() {
        packetsSent = 0
        octetsSent = 0
        sentSinceReport = false
        remoteReport = nil
        roundTripMs = nil
    }

    // MARK: RTP in and out

    /// An RTP packet we sent at `now` (monotonic ns). A packet under another SSRC than the
    /// one reported makes that SSRC ours (the SR must describe the stream the peer receives).
    public mutating func sent(rtp packet: UnsafeRawBufferPointer, at now: UInt64) {
        guard let header = RTPHeaderView(packet) else { return }
        if header.ssrc != localSSRC {
            resetSender()
            localSSRC = header.ssrc
        }
        packetsSent &+= 1
        octetsSent &+= UInt32(truncatingIfNeeded: header.payloadLength)
        lastSentTimestamp = header.timestamp
        lastSentAt = now
        sentSinceReport = true
    }

    /// An RTP packet received (verified, decrypted) at `now`.
    public mutating func received(rtp packet: UnsafeRawBufferPointer, at now: UInt64) {
        guard let header = RTPHeaderView(packet) else { return }
        let arrival = UInt32(truncatingIfNeeded: (now / 1_000) &* UInt64(clockRate) / 1_000_000)
        if let i = sourceIndex(header.ssrc) {
            sources[i].update(sequence: header.sequence, timestamp: header.timestamp, arrival: arrival)
        } else if sources.count < Self.maximumSources {
            var s = SourceStatistics(ssrc: header.ssrc, sequence: header.sequence)
            s.update(sequence: header.sequence, timestamp: header.timestamp, arrival: arrival)
            sources.append(s)
        }
    }

    /// A plain loop: `firstIndex(where:)` with a capturing closure allocated its context per
    /// call in debug builds (measured with the allocation probe).
    private func sourceIndex(_ ssrc: UInt32) -> Int? {
        for i in sources.indices where sources[i].ssrc == ssrc { return i }
        return nil
    }

    // MARK: RTCP in

    /// What a verified compound packet from the peer said that we use: its SRs (for the LSR and
    /// DLSR of our next report about it), its report blocks about our stream (round trip,
    /// fraction lost), its BYE (the source is forgotten).
    public mutating func receive(rtcp bytes: UnsafeRawBufferPointer, at now: UInt64) throws(RTCPError) {
        try RTCPReader.read(bytes) { item in
            switch item {
            case .senderReport(let ssrc, let info):
                if let i = sourceIndex(ssrc) {
                    sources[i].lastSenderReport = info.compactNTP
                    sources[i].lastSenderReportArrival = now
                }
            case .reportBlock(_, let block) where block.ssrc == localSSRC:
                remoteReport = block
                if block.lastSenderReport != 0 {
                    let arrival = UInt32(truncatingIfNeeded: ntp(at: now) >> 16)
                    let rtt = Int32(bitPattern: arrival &- block.lastSenderReport &- block.delaySinceLastSenderReport)
                    // A few units below zero is rounding (DLSR and our clock in 1/65536 s);
                    // more is a report that does not fit our clock: no round trip from it.
                    if rtt >= -66 { roundTripMs = Double(max(rtt, 0)) * 1000 / 65536 }
                }
            case .goodbye(let ssrc):
                sources.removeAll { $0.ssrc == ssrc }
            default:
                break
            }
        }
    }

    /// The peer's fraction lost of our stream (0...1), from its latest report.
    public var remoteFractionLost: Double? { remoteReport.map { Double($0.fractionLost) / 256 } }

    // MARK: RTCP out

    /// Starts the schedule at `now`: the first report soon (50-150 ms: the peer gets our SR,
    /// and so a round trip, early in the call), then every `interval(random:)`.
    /// - Parameter random: uniform in 0..<1 (the caller's generator; fixed in tests).
    public mutating func start(at now: UInt64, random: Double) {
        nextReportAt = now + UInt64((0.05 + 0.1 * random) * 1e9)
    }

    /// The report interval, simplified from RFC 3550 §6.3 for two parties and one audio stream:
    /// 1 s × [0.5, 1.5). A compound SR + one block + SDES is ~80 bytes (~130 on the wire with
    /// SRTCP, UDP and IPv4): ~1 kb/s, 3 % of a 32 kb/s Opus stream — inside RFC 3550's 5 %
    /// RTCP share, and frequent enough for loss and RTT to follow the call. The randomization
    /// keeps the two sides from reporting in lock-step (§6.3.1's reason).
    public static func interval(random: Double) -> UInt64 { UInt64((0.5 + random) * 1e9) }

    public func reportDue(at now: UInt64) -> Bool { nextReportAt.map { now >= $0 } ?? false }

    /// Writes the compound report due at `now` into `buffer`, returning its length (0 when the
    /// buffer is too small): SR when we sent RTP since the previous report, else RR; a block per
    /// source heard since then; SDES CNAME; and BYE when `leaving`. Schedules the next one.
    ///
    /// With an SR the blocks go in an RR right after it (RFC 3550 §6.1 lets RR packets follow
    /// the first report), not in the SR itself: Janus (1.1.2, `janus_rtcp_incoming_rr`) reads
    /// report blocks from RR packets only, so blocks inside an SR leave it without our loss,
    /// jitter and round trip (measured: `JanusRTCPLiveTests`, docs/webrtc.md). Browsers read
    /// blocks from either.
    public mutating func writeReport(into buffer: UnsafeMutableRawBufferPointer, at now: UInt64, random: Double,
                                     leaving: Bool = false) -> Int {
        nextReportAt = now + Self.interval(random: random)
        var w = RTCPWriter(buffer)
        if sentSinceReport {
            guard w.beginReport(ssrc: localSSRC, senderInfo: senderInfo(at: now)) else { return 0 }
        }
        var open = !sentSinceReport   // an RR is needed anyway when we did not send
        if open { guard w.beginReport(ssrc: localSSRC, senderInfo: nil) else { return 0 } }
        for i in sources.indices where sources[i].heardSinceReport {
            guard let block = sources[i].reportBlock(at: now) else { continue }
            if !open {
                guard w.beginReport(ssrc: localSSRC, senderInfo: nil) else { break }
                open = true
            }
            guard w.addBlock(block) else { break }
        }
        guard w.sourceDescription(ssrc: localSSRC, cname: cname) else { return 0 }
        if leaving { guard w.goodbye(ssrc: localSSRC) else { return 0 } }
        sentSinceReport = false
        return w.length
    }

    /// The SR's sender information at `now`: the RTP timestamp is the last sent packet's moved
    /// on by the time since it went out, so NTP and RTP time name the same instant (what a
    /// receiver's lip sync and our peer's clock-drift estimate rely on).
    func senderInfo(at now: UInt64) -> RTCPSenderInfo {
        let elapsed = now >= lastSentAt ? now - lastSentAt : 0
        let ticks = UInt32(truncatingIfNeeded: (elapsed / 1_000) &* UInt64(clockRate) / 1_000_000)
        return RTCPSenderInfo(ntpTimestamp: ntp(at: now), rtpTimestamp: lastSentTimestamp &+ ticks,
                              packetCount: packetsSent, octetCount: octetsSent)
    }
}

/// One remote source's reception statistics (RFC 3550 appendix A.1, A.3, A.8).
public struct SourceStatistics: Sendable, Equatable {
    public let ssrc: UInt32
    /// Packets counted as received (after the source was validated).
    public private(set) var received: UInt32 = 0
    /// Wraps of the sequence number, times 65536.
    private var cycles: UInt32 = 0
    private var maxSequence: UInt16
    private var baseSequence: UInt32 = 0
    private var badSequence: UInt32 = Self.sequenceModulus + 1
    /// Packets still needed in sequence before the source counts (A.1's probation).
    private var probation = Self.minimumSequential
    private var expectedPrior: UInt32 = 0
    private var receivedPrior: UInt32 = 0
    private var transit: Int32?
    /// Interarrival jitter × 16 (A.8's fixed point), RTP timestamp units.
    private var jitterQ4: UInt32 = 0
    /// The last SR from this source: its compact NTP time, and when it arrived (monotonic ns).
    var lastSenderReport: UInt32 = 0
    var lastSenderReportArrival: UInt64?
    /// A packet arrived since our previous report (only those sources get a block, RFC 3550 §6.4).
    private(set) var heardSinceReport = false

    static let sequenceModulus: UInt32 = 1 << 16
    static let maximumDropout: UInt32 = 3000
    static let maximumMisorder: UInt32 = 100
    static let minimumSequential = 2

    init(ssrc: UInt32, sequence: UInt16) {
        self.ssrc = ssrc
        maxSequence = sequence &- 1
    }

    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32 { jitterQ4 >> 4 }
    /// Highest sequence number received, extended with its wraps.
    public var extendedHighestSequence: UInt32 { cycles &+ UInt32(maxSequence) }
    /// Expected minus received since the source was validated (negative with duplicates).
    public var cumulativeLost: Int64 {
        Int64(extendedHighestSequence) - Int64(baseSequence) + 1 - Int64(received)
    }

    private mutating func restart(at sequence: UInt16) {
        baseSequence = UInt32(sequence)
        maxSequence = sequence
        badSequence = Self.sequenceModulus + 1
        cycles = 0
        received = 0
        receivedPrior = 0
        expectedPrior = 0
    }

    /// A.1's update_seq, then A.8's jitter for packets that count. `arrival` is the arrival time
    /// in RTP timestamp units (wrapping like the timestamps).
    mutating func update(sequence: UInt16, timestamp: UInt32, arrival: UInt32) {
        heardSinceReport = true
        let delta = UInt32(sequence &- maxSequence)
        if probation > 0 {
            if sequence == maxSequence &+ 1 {
                probation -= 1
                maxSequence = sequence
                if probation == 0 {
                    restart(at: sequence)
                    count(timestamp: timestamp, arrival: arrival)
                }
            } else {
                probation = Self.minimumSequential - 1
                maxSequence = sequence
            }
            return
        } else if delta < Self.maximumDropout {
            if sequence < maxSequence { cycles &+= Self.sequenceModulus }   // wrapped
            maxSequence = sequence
        } else if delta <= Self.sequenceModulus - Self.maximumMisorder {
            // A large jump: a restarted sender if the next packet follows it, else a stray.
            guard UInt32(sequence) == badSequence else {
                badSequence = (UInt32(sequence) + 1) & (Self.sequenceModulus - 1)
                return
            }
            restart(at: sequence)
            transit = nil
        }
        // else: a duplicate or a late packet, counted (as A.1 does).
        count(timestamp: timestamp, arrival: arrival)
    }

    private mutating func count(timestamp: UInt32, arrival: UInt32) {
        received &+= 1
        let t = Int32(bitPattern: arrival &- timestamp)
        if let previous = transit {
            let d = t &- previous
            let magnitude = d == .min ? UInt32(1) << 31 : UInt32(abs(d))
            // J += (|D| - J) / 16, in fixed point ×16 (A.8).
            jitterQ4 = jitterQ4 &+ magnitude &- ((jitterQ4 &+ 8) >> 4)
        }
        transit = t
    }

    /// The block for our next report (A.3), or nil while the source is on probation. Moves the
    /// interval counters on.
    mutating func reportBlock(at now: UInt64) -> RTCPReportBlock? {
        heardSinceReport = false
        guard probation == 0 else { return nil }
        let extended = extendedHighestSequence
        let expected = extended &- baseSequence &+ 1
        let expectedInterval = expected &- expectedPrior
        expectedPrior = expected
        let receivedInterval = received &- receivedPrior
        receivedPrior = received
        let lostInterval = Int64(expectedInterval) - Int64(receivedInterval)
        let fraction: UInt8 = expectedInterval == 0 || lostInterval <= 0
            ? 0 : UInt8(min(255, (lostInterval << 8) / Int64(expectedInterval)))
        var dlsr: UInt32 = 0
        if let arrival = lastSenderReportArrival, now >= arrival {
            dlsr = UInt32(truncatingIfNeeded: min((now - arrival) * 65536 / 1_000_000_000, UInt64(UInt32.max)))
        }
        return RTCPReportBlock(ssrc: ssrc, fractionLost: fraction,
                               cumulativeLost: Int32(min(max(cumulativeLost, -0x80_0000), 0x7F_FFFF)),
                               extendedHighestSequence: extended, jitter: jitter,
                               lastSenderReport: lastSenderReport, delaySinceLastSenderReport: dlsr)
    }
}

/// The fields of an RTP header RTCP needs, read in place (RFC 3550 §5.1).
struct RTPHeaderView {
    let sequence: UInt16
    let timestamp: UInt32
    let ssrc: UInt32
    /// Bytes after the header (CSRCs and extension) and before the padding.
    let payloadLength: Int

    init?(_ p: UnsafeRawBufferPointer) {
        guard p.count >= 12, p[0] >> 6 == 2 else { return nil }
        var header = 12 + 4 * Int(p[0] & 0x0F)
        if p[0] & 0x10 != 0 {
            guard p.count >= header + 4 else { return nil }
            header += 4 + 4 * (Int(p[header + 2]) << 8 | Int(p[header + 3]))
        }
        var padding = 0
        if p[0] & 0x20 != 0 { padding = Int(p[p.count - 1]) }
        guard header + padding <= p.count else { return nil }
        sequence = UInt16(p[2]) << 8 | UInt16(p[3])
        timestamp = p.loadBigEndianUInt32(at: 4)
        ssrc = p.loadBigEndianUInt32(at: 8)
        payloadLength = p.count - header - padding
    }
}
