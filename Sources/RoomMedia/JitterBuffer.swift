/// A per-stream adaptive jitter buffer for one incoming Opus RTP stream.
///
/// It lives on the audio thread. Everything is allocated at init; `insert` and `nextFrame`
/// never allocate, lock or log. The network thread never touches it: it pushes received
/// datagrams (with their arrival time) into an SPSC ring, and the audio thread, once per
/// period, drains the ring into `insert(...)` and then calls `nextFrame(nowSamples:)` until it
/// has a period's worth of samples.
///
/// Time is counted in RTP clock ticks (samples at 48 kHz). `arrivalSamples` and
/// `nowSamples` must come from the same receiver clock (e.g. CLOCK_MONOTONIC scaled to
/// 48 kHz); it need not be synchronised with the sender's.
///
/// The buffer works in timestamps, not in frames: each packet lasts what it says (the caller
/// passes the Opus packet's duration; without it the buffer infers it from the timestamp steps
/// between consecutive packets), packets are kept by sequence number and played in sequence
/// order at the time their timestamp is due. Any Opus frame size (2.5 … 120 ms) plays, and a
/// sender may change it mid-stream. Every decision says how many samples it covers; the
/// caller asks again when it has played them.
///
/// How it decides (docs/jitter-buffer.md has the full story):
/// - Each packet's *relative delay* is `arrival - (timestamp - firstTimestamp)`. Over a
///   sliding window (the last 2 s of packets) the smallest relative delay is the fastest path
///   through the network; the target delay is the 95th percentile of (delay - smallest) taken
///   from a fixed 1 ms histogram, plus a margin of half a playout step, clamped to
///   minimum...maximum. It rises at once (also when late packets show it was too short twice
///   within the window) and falls at most 20 ms per second.
/// - A backlog is not jitter: a packet later than the maximum delay (an outage), and the
///   packets that drain right behind a late or outage packet (arriving at more than 4× real
///   time: a stall of the network, the server or our receive thread), do not enter the delay
///   window; they play if they are still in time and are counted as `backlog`.
/// - A packet with timestamp `t` is due at `t + smallest + target`. Each `nextFrame` compares
///   the playout point with that schedule: more than half a step early → insert concealment
///   (stretch); at least one packet late → drop (skip: missing audio or silence at once, a
///   packet with audio after the excess has lasted `skipHoldMs` — `silenceWaitMs` when the
///   excess is under two packets, waiting for a pause to drop silence instead; more than
///   `jumpThresholdMs` behind → jump back to the schedule at once). A backlog is shed within
///   a second whatever the talker does.
/// - Missing audio whose deadline has come is classified with sequence numbers: as many
///   packets missing as the gap holds → loss → `.decodeFEC` from the next packet for the
///   stretch right before it, `.conceal` for the rest; no packet missing → the sender sent
///   nothing (DTX) → `.silence`. With nothing buffered the two cannot be told apart yet:
///   conceal for `concealBeforeSilenceMs`, then silence.
///
/// Why `@unchecked Sendable`: the buffer is owned by one thread at a time (built on the
/// control thread, handed to the audio thread once, through a synchronising hand-off, and
/// used only there). It holds raw storage the compiler cannot check; it is not safe to
/// call from two threads at once.
public final class JitterBuffer: @unchecked Sendable {
    /// A packet handed out for decoding; `payload` points into the buffer's storage.
    public struct Packet {
        public let sequenceNumber: UInt16
        public let timestamp: UInt32
        /// How long the packet plays, in RTP clock ticks (what the caller said when inserting
        /// it, else inferred from the stream's timestamps).
        public let durationSamples: Int
        public let payload: UnsafeRawBufferPointer
    }

    private struct Slot {
        var sequence: Int64     // unwrapped sequence number; `empty` when free
        var relative: Int64     // unwrapped timestamp - first timestamp
        var duration: Int64
        var told: Bool          // duration given by the caller (else inferred)
        var timestamp: UInt32
        var length: Int
        static let empty = Int64.min
    }

    private enum Missing { case loss, fec, dtx }

    public let configuration: JitterBufferConfiguration
    /// Samples assumed for a packet whose duration is not known yet (480 at 10 ms).
    public let frameSamples: Int64
    /// Number of packet slots.
    public let capacity: Int

    private let samplesPerMs: Int64
    /// 2.5 ms, the smallest Opus frame; 120 ms, the largest packet.
    private let granule: Int64
    private let longestPacket: Int64
    private let tolerance: Int64
    private let step: Int64
    private let margin: Double
    private let minimumTarget: Double
    private let maximumTarget: Double
    private let shrinkPerSample: Double
    private let skipHold: Int64
    private let silenceWait: Int64
    private let lossMemory: Int64
    private let concealLimit: Int64
    private let jumpThreshold: Double
    private let horizon: Int64
    private let windowSpan: Int64
    private let maxPayload: Int
    private let windowCapacity: Int
    private let histogramBins: Int
    private static let bitmapWords = 16                 // 1024 sequence numbers
    private static let bitmapSpan: Int64 = 1024
    private static let gapSlots = 8
    private static let none = Int64.min

    // Storage, allocated once.
    private let slots: UnsafeMutablePointer<Slot>
    private let payloads: UnsafeMutableRawPointer
    private let output: UnsafeMutableRawPointer          // copy of the packet handed out
    private let windowDelay: UnsafeMutablePointer<Int64>
    private let windowTime: UnsafeMutablePointer<Int64>
    private let windowLength: UnsafeMutablePointer<Int64>  // packet durations, for the target's terms
    private let histogram: UnsafeMutablePointer<Int32>
    private let bitmap: UnsafeMutablePointer<UInt64>
    private let gaps: UnsafeMutablePointer<Int64>       // recent timestamp steps of consecutive packets

    // Stream numbering.
    private var anchored = false
    private var seqUnwrap = RTPSequenceUnwrapper()
    private var tsUnwrap = RTPTimestampUnwrapper()
    private var firstTimestamp: Int64 = 0
    private var baseSequence: Int64 = 0
    private var highestSequence: Int64 = 0
    private var bitmapTop: Int64 = 0
    private var arrivedCount = 0                // unique packets in [base, highest], in time or late
    private var lostBefore = 0                  // lost count folded in at resets

    // Arrival pattern (backlog detection, duration inference).
    private var newestArrival: Int64 = JitterBuffer.none
    private var newestRelative: Int64 = 0
    private var chainOpen = false               // the newest packet was late or backlog
    private var lastLateArrival: Int64 = JitterBuffer.none
    private var gapCount = 0
    private var gapNext = 0
    private var inferredDuration: Int64

    // Buffer contents.
    private var buffered = 0

    // Playout.
    private var started = false
    private var playPosition: Int64 = 0         // relative timestamp of the next sample to play
    private var lastPlayedSequence: Int64 = 0
    private var lastDuration: Int64
    private var emptySamples: Int64 = 0         // played (or dropped) with nothing buffered
    private var excessSince: Int64 = JitterBuffer.none
    private var lossUntil: Int64 = JitterBuffer.none  // receiver time until which losses are recent
    private var outOfRangeRun = 0
    private var lastNow: Int64 = JitterBuffer.none

    // Delay estimation.
    private var windowHead = 0
    private var windowCount = 0
    private var windowNewest: Int64 = 0
    private var smallestDelay: Int64 = 0
    private var measuredTarget: Double = 0     // percentile + margin (or a late packet's need), unclamped
    private var shortestPacket: Int64 = 0      // shortest and longest packet in the window
    private var longestInWindow: Int64 = 0
    private var rawTarget: Double              // the same, clamped
    private var target: Double
    private var jitter16: Int64 = 0             // RFC 3550 estimate, scaled by 16
    private var lastTransit: Int64?
    // What the last recorded delay changed, to take it back when it turns out to head a backlog.
    private var undoValid = false
    private var undoTarget: Double = 0
    private var undoLateArrival: Int64 = JitterBuffer.none

    public private(set) var statistics = JitterBufferStatistics()

    public init(configuration: JitterBufferConfiguration = JitterBufferConfiguration()) {
        let c = configuration
        precondition((1...120).contains(c.frameDurationMs), "frameDurationMs must be 1...120")
        precondition((1...120).contains(c.playoutStepMs), "playoutStepMs must be 1...120")
        precondition(c.clockRate >= 8000 && c.clockRate % 2000 == 0, "clockRate must be a multiple of 2 kHz")
        precondition(c.minimumDelayMs >= 0 && c.maximumDelayMs >= c.minimumDelayMs && c.maximumDelayMs <= 2000,
                     "delays must satisfy 0 <= minimum <= maximum <= 2000 ms")
        precondition(c.maxPayloadBytes > 0 && c.delayWindowMs >= 10 && c.capacityPackets >= 8)
        precondition(c.delayPercentile > 0.5 && c.delayPercentile <= 1)
        precondition(c.targetMarginMs >= 0)
        self.configuration = c
        samplesPerMs = Int64(c.clockRate / 1000)
        granule = Int64(c.clockRate / 400)
        longestPacket = 120 * samplesPerMs
        tolerance = granule / 2
        frameSamples = Int64(c.frameDurationMs) * samplesPerMs
        step = Int64(c.playoutStepMs) * samplesPerMs
        margin = c.targetMarginMs * Double(samplesPerMs)
        capacity = c.capacityPackets
        minimumTarget = Double(Int64(c.minimumDelayMs) * samplesPerMs)
        maximumTarget = Double(Int64(c.maximumDelayMs) * samplesPerMs)
        shrinkPerSample = c.shrinkRateMsPerSecond / 1000
        skipHold = Int64(c.skipHoldMs) * samplesPerMs
        silenceWait = Int64(max(c.silenceWaitMs, c.skipHoldMs)) * samplesPerMs
        lossMemory = Int64(c.lossMemoryMs) * samplesPerMs
        concealLimit = Int64(c.concealBeforeSilenceMs) * samplesPerMs
        jumpThreshold = Double(Int64(c.jumpThresholdMs) * samplesPerMs)
        horizon = Int64(2 * c.maximumDelayMs + 100) * samplesPerMs
        windowSpan = Int64(c.delayWindowMs) * samplesPerMs
        maxPayload = c.maxPayloadBytes
        windowCapacity = Int(windowSpan / granule) + 2
        histogramBins = c.maximumDelayMs + 1
        rawTarget = minimumTarget
        target = minimumTarget
        inferredDuration = frameSamples
        lastDuration = frameSamples

        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(sequence: Slot.empty, relative: 0, duration: 0, told: false, timestamp: 0, length: 0),
                         count: capacity)
        payloads = .allocate(byteCount: capacity * c.maxPayloadBytes, alignment: 16)
        output = .allocate(byteCount: c.maxPayloadBytes, alignment: 16)
        windowDelay = .allocate(capacity: windowCapacity)
        windowDelay.initialize(repeating: 0, count: windowCapacity)
        windowTime = .allocate(capacity: windowCapacity)
        windowTime.initialize(repeating: 0, count: windowCapacity)
        windowLength = .allocate(capacity: windowCapacity)
        windowLength.initialize(repeating: 0, count: windowCapacity)
        histogram = .allocate(capacity: histogramBins)
        histogram.initialize(repeating: 0, count: histogramBins)
        bitmap = .allocate(capacity: Self.bitmapWords)
        bitmap.initialize(repeating: 0, count: Self.bitmapWords)
        gaps = .allocate(capacity: Self.gapSlots)
        gaps.initialize(repeating: 0, count: Self.gapSlots)
        publishStatistics()
    }

    deinit {
        slots.deallocate()
        payloads.deallocate()
        output.deallocate()
        windowDelay.deallocate()
        windowTime.deallocate()
        windowLength.deallocate()
        histogram.deallocate()
        bitmap.deallocate()
        gaps.deallocate()
    }

    // MARK: - Public interface

    /// Starts over on a new stream (call on SSRC change). Statistics are kept (the lost
    /// count of the old stream is folded in); the target delay is kept as a starting point.
    public func reset() {
        lostBefore = lostNow()
        anchored = false
        seqUnwrap.reset()
        tsUnwrap.reset()
        arrivedCount = 0
        for i in 0 ..< capacity { slots[i].sequence = Slot.empty }
        buffered = 0
        started = false
        emptySamples = 0
        excessSince = Self.none
        lossUntil = Self.none
        outOfRangeRun = 0
        windowHead = 0
        windowCount = 0
        undoValid = false
        lastTransit = nil
        newestArrival = Self.none
        chainOpen = false
        lastLateArrival = Self.none
        gapCount = 0
        gapNext = 0
        inferredDuration = frameSamples
        lastDuration = frameSamples
        publishStatistics()
    }

    /// Zeroes the counters (not the state).
    public func resetStatistics() {
        statistics = JitterBufferStatistics()
        lostBefore = 0
        baseSequence = highestSequence + 1
        arrivedCount = 0
        publishStatistics()
    }

    /// Stores one packet. Copies `payload` into a preallocated slot.
    /// `arrivalSamples`: when the datagram arrived, on the receiver clock, in samples.
    /// `durationSamples`: how long the packet plays, in RTP clock ticks (for Opus,
    /// `opus_packet_get_nb_samples` at 48 kHz); 0 or negative when unknown: the buffer then
    /// uses the timestamp step between consecutive packets.
    @discardableResult
    public func insert(
        sequenceNumber: UInt16, timestamp: UInt32, arrivalSamples: Int64, payload: UnsafeRawBufferPointer,
        durationSamples: Int = 0
    ) -> JitterBufferInsertResult {
        guard payload.count <= maxPayload else {
            statistics.oversize += 1
            return .payloadTooLarge
        }
        let given = durationSamples > 0 ? min(Int64(durationSamples), longestPacket) : 0
        let result = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload, given)
        if result == .outOfRange {
            outOfRangeRun += 1
            statistics.outOfRange += 1
            if outOfRangeRun >= configuration.resyncAfterOutOfRange {
                reset()
                statistics.resyncs += 1
                let again = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload, given)
                publishStatistics()
                return again == .accepted ? .acceptedAfterResync : again
            }
        } else if result != .duplicate {
            outOfRangeRun = 0
        }
        publishStatistics()
        return result
    }

    /// Stores the payload of a parsed packet; `datagram` is the buffer it was parsed from.
    @discardableResult
    public func insert(_ packet: RTPPacket, datagram: UnsafeRawBufferPointer, arrivalSamples: Int64,
                       durationSamples: Int = 0) -> JitterBufferInsertResult {
        insert(sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp,
               arrivalSamples: arrivalSamples, payload: packet.payload(in: datagram), durationSamples: durationSamples)
    }

    /// Decides what to play next and for how many samples (`PlayoutDecision.samples`); call
    /// again when those samples have been played, after inserting what arrived.
    /// `nowSamples`: the receiver clock (same clock as the arrival times) at the moment the
    /// first of those samples is produced — when several decisions fill one period, advance
    /// it by what the period already holds. `upTo`: the samples (RTP clock) left in the
    /// caller's period. Silence and concealment stop there, so that the next decision falls on
    /// a period boundary, where what arrived during the period has been inserted; a packet
    /// always plays whole.
    public func nextFrame(nowSamples now: Int64, upTo room: Int = .max) -> PlayoutDecision {
        let room = max(granule, min(Int64(min(room, Int(Int32.max))), longestPacket))
        let wanted = wantedTarget(at: now)
        if wanted > target {
            target = wanted
        } else if lastNow != Self.none, now > lastNow, target > wanted {
            target = max(wanted, target - shrinkPerSample * Double(now - lastNow))
        }
        lastNow = now
        defer { publishStatistics() }

        if !started {
            guard buffered > 0, let first = lowestBuffered() else { return .silence(samples: Int(min(step, lastDuration, room))) }
            let slot = slots[first]
            // Start as soon as the first packet is within the band playout keeps to (no more
            // than half a step early): on a clean path that is the first period after it
            // arrived, not up to a period later.
            let ahead = Double(slot.relative) - (Double(now - smallestDelay) - target)
            if ahead >= Double(min(step, slot.duration)) / 2 { return .silence(samples: Int(min(step, slot.duration, room))) }   // still filling
            started = true
            playPosition = slot.relative
            lastPlayedSequence = slot.sequence - 1
            lastDuration = slot.duration
            emptySamples = 0
            excessSince = Self.none
        }

        // Positive: playing earlier than the target delay asks for (delay too short).
        var ahead = Double(playPosition) - (Double(now - smallestDelay) - target)

        // Far too much delay (the audio thread stalled while packets kept coming, a burst):
        // jump straight back to the target instead of dropping one packet at a time.
        ahead += catchUp(ahead: ahead, beyond: jumpThreshold)

        var skippedThisCall = false
        while true {
            statistics.currentDelayMs = Double(now - smallestDelay - playPosition) / Double(samplesPerMs)
            var next = nextBuffered()
            // A packet wholly before the playout point (a copy under another sequence number,
            // or timestamps that overlap) has nothing left to play.
            while let i = next, slots[i].relative + slots[i].duration <= playPosition {
                lastPlayedSequence = slots[i].sequence
                free(i)
                statistics.duplicates += 1
                next = nextBuffered()
            }

            if let i = next, slots[i].relative <= playPosition + tolerance {
                // The packet at the playout point is here.
                if !slots[i].told { slots[i].duration = inferredLength(of: i) }
                let slot = slots[i]
                emptySamples = 0
                let unit = min(step, slot.duration)
                if ahead >= Double(unit) / 2 {
                    // Well below the target: insert concealment, play this packet next time.
                    statistics.stretched += 1
                    excessSince = Self.none
                    return .conceal(samples: Int(min(unit, room)))
                }
                if ahead <= -Double(slot.duration) {
                    // Over target by a packet or more. A small excess (under two packets) waits
                    // a while for a pause, where silence goes at no cost; a larger one, or one
                    // that found no pause, drops audio, one packet per hold.
                    if excessSince == Self.none { excessSince = now }
                    let small = -ahead < Double(2 * max(slot.duration, step))
                    if now - excessSince >= (small ? silenceWait : skipHold), !skippedThisCall {
                        let before = playPosition
                        lastPlayedSequence = slot.sequence
                        lastDuration = slot.duration
                        free(i)
                        playPosition = max(playPosition, slot.relative + slot.duration)
                        ahead += Double(playPosition - before)
                        shed(playPosition - before)
                        excessSince = now
                        skippedThisCall = true
                        continue
                    }
                } else {
                    excessSince = Self.none
                }
                lastPlayedSequence = slot.sequence
                lastDuration = slot.duration
                playPosition = max(playPosition, slot.relative + slot.duration)
                statistics.decoded += 1
                let p = packet(at: i, slot)
                free(i)
                return .decode(p)
            }

            // Missing at the playout point. The next packet present tells loss from DTX.
            let kind: Missing
            var chunk: Int64
            var silentPart: Int64 = .max
            if let i = next {
                emptySamples = 0
                let n = slots[i]
                let gap = n.relative - playPosition
                let missingPackets = n.sequence - lastPlayedSequence - 1
                // Packets missing are taken to be the ones right before the next packet (so the
                // stretch just before it can come back through FEC); the rest of the gap is DTX.
                let lossPart = min(gap, max(0, missingPackets) * n.duration)
                silentPart = gap - lossPart
                if silentPart > tolerance {
                    kind = .dtx
                    chunk = min(silentPart, lastDuration, room)
                } else if abs(gap - n.duration) <= tolerance {
                    // In one piece, whatever the period: libopus rebuilds a frame from FEC only
                    // when asked for the whole of it (less is concealment).
                    kind = .fec
                    chunk = gap
                } else {
                    // Lost packets before it, one packet length at a time (the packet grid), or
                    // the rest of one partly concealed already.
                    kind = .loss
                    chunk = gap > n.duration ? min(gap - n.duration, n.duration) : gap
                }
            } else {
                kind = emptySamples < concealLimit ? .loss : .dtx
                chunk = min(lastDuration, room)
            }

            let unit = min(step, lastDuration)
            // Silence is free to stretch or cut: there it keeps within half a step of the
            // schedule (the band a packet plays in), so the next talk spurt starts at the target
            // delay, not up to a step above it. Missing audio waits while its deadline has not
            // come (its packet may still arrive).
            if kind == .dtx ? ahead >= Double(unit) / 2 : ahead > 0 {
                statistics.stretched += 1
                let wait = Int(min(unit, room))
                return kind == .dtx ? .silence(samples: wait) : .conceal(samples: wait)
            }
            if !skippedThisCall {
                // Above target: silence and missing audio are dropped at once, nothing audible
                // is lost. Silence goes in whole steps (as many as bring playout within half a
                // step of the schedule), so decisions stay on the caller's period boundaries.
                let excess = -ahead
                var drop: Int64 = 0
                if kind == .dtx, excess > Double(unit) / 2 {
                    let steps = Int64(min((excess + Double(unit) / 2) / Double(unit), 1e12))
                    drop = min(steps, silentPart / unit) * unit
                } else if kind != .dtx, excess >= Double(chunk) {
                    drop = chunk
                }
                if drop > 0 {
                    playPosition += drop
                    ahead += Double(drop)
                    if next == nil { emptySamples += drop }
                    shed(drop)
                    excessSince = Self.none
                    skippedThisCall = true
                    continue
                }
            }
            playPosition += chunk
            if next == nil { emptySamples += chunk }
            // Sequence numbers prove a loss: keep a packet of look-ahead for a while, so that
            // the next one can come back through FEC.
            if kind != .dtx, next != nil { lossUntil = now + lossMemory }
            switch kind {
            case .fec:
                statistics.fecRecovered += 1
                let i = next!
                return .decodeFEC(packet(at: i, slots[i]), samples: Int(chunk))
            case .loss:
                statistics.concealed += 1
                return .conceal(samples: Int(chunk))
            case .dtx:
                statistics.silence += 1
                return .silence(samples: Int(chunk))
            }
        }
    }

    // MARK: - Insert

    private func insertChecked(
        _ sequence: UInt16, _ timestamp: UInt32, _ arrival: Int64, _ payload: UnsafeRawBufferPointer, _ given: Int64
    ) -> JitterBufferInsertResult {
        if !anchored {
            anchored = true
            let s = seqUnwrap.unwrap(sequence)
            firstTimestamp = tsUnwrap.unwrap(timestamp)
            baseSequence = s
            highestSequence = s
            bitmapTop = s
            for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
            newestArrival = Self.none
            chainOpen = false
            let backlog = noteArrival(sequence: s, relative: 0, arrival: arrival, newest: true, late: false)
            return store(sequence: s, timestamp: timestamp, relative: 0, duration: given > 0 ? given : inferredDuration,
                         told: given > 0, arrival: arrival, payload: payload, newest: true, backlog: backlog)
        }

        let seq = seqUnwrap.peek(sequence)
        let relative = tsUnwrap.peek(timestamp) - firstTimestamp
        if seq <= bitmapTop - Self.bitmapSpan { return .outOfRange }      // older than we can judge
        if isMarked(seq) {
            statistics.duplicates += 1
            return .duplicate
        }
        let newest = seq > highestSequence
        var duration = given > 0 ? given : inferredDuration
        // A gap in the numbering whose turn has already come (playout is past where the first
        // missing packet starts): packets lost and concealed without their successor's FEC,
        // which was not here yet. Keep a packet of look-ahead from now on. (A gap still ahead of
        // playout may be mere reordering.)
        if seq > highestSequence + 1, seq < highestSequence + Int64(capacity), started,
           newestArrival != Self.none, playPosition > newestRelative + inferredDuration + tolerance {
            lossUntil = arrival + lossMemory
        }

        if started {
            // Playout far behind the schedule this packet's arrival implies (nextFrame has
            // not been called for a while): catch up before judging the packet.
            if windowCount > 0 {
                _ = catchUp(ahead: Double(playPosition) - (Double(arrival - smallestDelay) - target), beyond: maximumTarget)
            }
            if relative >= playPosition + horizon || seq > lastPlayedSequence + Int64(capacity) { return .outOfRange }
            if seq <= lastPlayedSequence || relative + duration <= playPosition {
                // Far behind the newest packet's timestamp: not this stream's numbering. (Far
                // behind the playout point alone is a backlog after a stall: merely late.)
                if relative < newestRelative - 4 * horizon { return .outOfRange }
                let backlog = noteArrival(sequence: seq, relative: relative, arrival: arrival, newest: newest, late: true)
                if given <= 0 { duration = inferredDuration }
                if newest, !backlog, emptySamples >= concealLimit, buffered == 0 {
                    // The sender paused and came back later than the old timing allows
                    // (its clock is slower, or the path got longer): start playout afresh.
                    started = false
                    windowHead = 0
                    windowCount = 0
                    statistics.playoutRestarts += 1
                    return store(sequence: seq, timestamp: timestamp, relative: relative, duration: duration,
                                 told: given > 0, arrival: arrival, payload: payload, newest: newest, backlog: false)
                }
                // Arrived after its turn: learn from it (unless it is backlog), then drop it. Its
                // turn has passed, so playout goes on after it (when nothing before it waits).
                if seq > lastPlayedSequence, (nextBuffered().map { slots[$0].sequence > seq } ?? true) {
                    lastPlayedSequence = seq
                }
                commitSequence(seq, newest: newest)
                _ = tsUnwrap.unwrap(timestamp)
                updateJitter(arrival - relative)
                if backlog {
                    statistics.backlog += 1
                } else {
                    lossUntil = arrival + lossMemory
                    recordDelay(arrival - relative, relative: relative, duration: duration, late: true, arrival: arrival, newest: newest)
                }
                statistics.late += 1
                return .late
            }
        } else if buffered > 0 {
            var lowSeq = seq, highSeq = seq, lowRel = relative, highRel = relative
            for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
                lowSeq = min(lowSeq, slots[i].sequence)
                highSeq = max(highSeq, slots[i].sequence)
                lowRel = min(lowRel, slots[i].relative)
                highRel = max(highRel, slots[i].relative)
            }
            if highSeq - lowSeq >= Int64(capacity) || highRel - lowRel >= horizon { return .outOfRange }
        }
        if slots[slotIndex(seq)].sequence != Slot.empty { return .outOfRange }   // defensive: never overwrite
        let backlog = noteArrival(sequence: seq, relative: relative, arrival: arrival, newest: newest, late: false)
        if given <= 0 { duration = inferredDuration }
        return store(sequence: seq, timestamp: timestamp, relative: relative, duration: duration, told: given > 0,
                     arrival: arrival, payload: payload, newest: newest, backlog: backlog)
    }

    /// Follows the arrival pattern of the newest packets: learns the packet duration from
    /// consecutive timestamps and says whether this packet is backlog — later than any
    /// delay the buffer could cover (an outage), or draining right behind a late or backlog
    /// packet (arriving at more than 4× real time). Backlog does not shape the target.
    private func noteArrival(sequence seq: Int64, relative: Int64, arrival: Int64, newest: Bool, late: Bool) -> Bool {
        var backlog = false
        if windowCount > 0, Double(arrival - relative - smallestDelay) > maximumTarget { backlog = true }
        guard newest else {
            // An older packet draining in the same burst (the queue was not quite in order).
            if chainOpen, newestArrival != Self.none, (arrival - newestArrival) * 4 < lastDuration { backlog = true }
            if backlog { undoValid = false }
            return backlog
        }
        if newestArrival != Self.none {
            let advance = relative - newestRelative
            if chainOpen, advance > 0, (arrival - newestArrival) * 4 < advance {
                backlog = true
                undoLastDelay()
            }
            if seq == highestSequence + 1, advance >= granule, advance <= longestPacket {
                gaps[gapNext] = advance
                gapNext = (gapNext + 1) % Self.gapSlots
                gapCount = min(gapCount + 1, Self.gapSlots)
                var smallest = Int64.max
                for i in 0 ..< gapCount where gaps[i] < smallest { smallest = gaps[i] }
                inferredDuration = smallest
            }
        }
        newestArrival = arrival
        newestRelative = relative
        chainOpen = backlog || late
        if backlog { undoValid = false }
        return backlog
    }

    private func store(
        sequence seq: Int64, timestamp: UInt32, relative: Int64, duration: Int64, told: Bool, arrival: Int64,
        payload: UnsafeRawBufferPointer, newest: Bool, backlog: Bool
    ) -> JitterBufferInsertResult {
        let index = slotIndex(seq)
        if slots[index].sequence != Slot.empty { return .outOfRange }   // defensive: never overwrite
        if !started, seq < baseSequence { baseSequence = seq }
        commitSequence(seq, newest: newest)
        _ = tsUnwrap.unwrap(timestamp)
        if payload.count > 0, let src = payload.baseAddress {
            (payloads + index * maxPayload).copyMemory(from: src, byteCount: payload.count)
        }
        slots[index] = Slot(sequence: seq, relative: relative, duration: duration, told: told, timestamp: timestamp,
                            length: payload.count)
        buffered += 1
        statistics.received += 1
        updateJitter(arrival - relative)
        if backlog {
            statistics.backlog += 1
        } else {
            recordDelay(arrival - relative, relative: relative, duration: duration, late: false, arrival: arrival, newest: newest)
        }
        return .accepted
    }

    /// Marks a sequence number as arrived and advances the numbering.
    private func commitSequence(_ seq: Int64, newest: Bool) {
        _ = seqUnwrap.unwrap(UInt16(truncatingIfNeeded: seq))
        if newest {
            highestSequence = seq
        } else if seq < highestSequence {
            statistics.reordered += 1
        }
        mark(seq)
        if seq >= baseSequence { arrivedCount += 1 }
    }

    // MARK: - Delay estimation

    /// RFC 3550 §6.4.1 interarrival jitter, in arrival order, scaled by 16 (§A.8).
    private func updateJitter(_ delay: Int64) {
        if let previous = lastTransit {
            let d = abs(delay - previous)
            jitter16 += d - ((jitter16 + 8) >> 4)
        }
        lastTransit = delay
    }

    /// Adds one relative delay to the window and recomputes the target.
    private func recordDelay(_ delay: Int64, relative: Int64, duration: Int64, late: Bool, arrival: Int64, newest: Bool) {
        undoTarget = target
        undoLateArrival = lastLateArrival
        undoValid = newest
        if windowCount == windowCapacity {
            windowHead = windowHead + 1 == windowCapacity ? 0 : windowHead + 1
            windowCount -= 1
        }
        if windowCount == 0 { windowNewest = relative }
        let tail = (windowHead + windowCount) % windowCapacity
        windowDelay[tail] = delay
        windowTime[tail] = relative
        windowLength[tail] = duration
        windowCount += 1
        if relative > windowNewest { windowNewest = relative }
        // The window holds the last `delayWindowMs` of the stream (by timestamp).
        while windowCount > 1, windowTime[windowHead] < windowNewest - windowSpan {
            windowHead = windowHead + 1 == windowCapacity ? 0 : windowHead + 1
            windowCount -= 1
        }
        recomputeTarget()
        if late {
            // A second late packet within the window: the target was too short, grow at once
            // to cover it. (One late packet alone is a spike; the percentile judges it.)
            if lastLateArrival != Self.none, arrival - lastLateArrival <= windowSpan {
                let needed = Double(delay - smallestDelay + samplesPerMs) + margin
                if needed > measuredTarget {
                    measuredTarget = needed
                    rawTarget = clampTarget(needed)
                }
            }
            lastLateArrival = arrival
        }
        let wanted = wantedTarget(at: arrival)
        if wanted > target { target = wanted }
    }

    /// The target the buffer steers to: the measured one, plus one packet (the longest in the
    /// window) of look-ahead while losses are recent (the next packet must be here when one is
    /// missing, for its FEC). On a clean path the look-ahead goes, and with it a packet of delay.
    ///
    /// Packets shorter than the caller's period add the rest of the period (for the shortest in
    /// the window): the caller inserts what arrived at the start of each period, so the last
    /// short packet decided in a period must be there (step − duration) before its own time.
    private func wantedTarget(at time: Int64) -> Double {
        let shortest = shortestPacket > 0 ? shortestPacket : lastDuration
        let subPeriod = Double(max(0, step - shortest))
        guard lossUntil != Self.none, time < lossUntil else {
            return subPeriod > 0 ? clampTarget(measuredTarget + subPeriod) : rawTarget
        }
        return clampTarget(measuredTarget + subPeriod + Double(max(longestInWindow, lastDuration)))
    }

    /// The newest packet recorded turned out to head a backlog burst (the packets behind it
    /// drain at once): its delay was the stall's, not the network's jitter. Takes it out of
    /// the window and gives back the target it may have raised.
    private func undoLastDelay() {
        guard undoValid, windowCount > 0 else { return }
        undoValid = false
        windowCount -= 1
        recomputeTarget()
        target = max(min(target, undoTarget), wantedTarget(at: newestArrival))
        lastLateArrival = undoLateArrival
        statistics.backlog += 1
    }

    /// Smallest delay and percentile target over the window (an empty window keeps the
    /// smallest delay it had).
    private func recomputeTarget() {
        guard windowCount > 0 else {
            measuredTarget = 0
            rawTarget = minimumTarget
            return
        }
        var smallest = Int64.max
        var shortest = Int64.max, longest: Int64 = 0
        var i = windowHead
        for _ in 0 ..< windowCount {
            if windowDelay[i] < smallest { smallest = windowDelay[i] }
            shortest = min(shortest, windowLength[i])
            longest = max(longest, windowLength[i])
            i = i + 1 == windowCapacity ? 0 : i + 1
        }
        smallestDelay = smallest
        shortestPacket = shortest
        longestInWindow = longest

        // Percentile of (delay - smallest) from a 1 ms histogram.
        for b in 0 ..< histogramBins { histogram[b] = 0 }
        i = windowHead
        for _ in 0 ..< windowCount {
            let bin = min(Int((windowDelay[i] - smallest) / samplesPerMs), histogramBins - 1)
            histogram[bin] += 1
            i = i + 1 == windowCapacity ? 0 : i + 1
        }
        let rank = Int((configuration.delayPercentile * Double(windowCount)).rounded(.up))
        var cumulative = 0
        var bin = 0
        while bin < histogramBins {
            cumulative += Int(histogram[bin])
            if cumulative >= rank { break }
            bin += 1
        }
        let spread = Double(Int64(bin + 1) * samplesPerMs)   // upper edge of the bin
        measuredTarget = spread + margin
        rawTarget = clampTarget(measuredTarget)
    }

    private func clampTarget(_ value: Double) -> Double {
        min(max(value, minimumTarget), maximumTarget)
    }

    // MARK: - Helpers

    private func slotIndex(_ sequence: Int64) -> Int {
        let c = Int64(capacity)
        let r = sequence % c
        return Int(r < 0 ? r + c : r)
    }

    private func free(_ index: Int) {
        slots[index].sequence = Slot.empty
        buffered -= 1
    }

    /// Slot of the buffered packet with the lowest sequence number.
    private func lowestBuffered() -> Int? {
        var best: Int?
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
            if best == nil || slots[i].sequence < slots[best!].sequence { best = i }
        }
        return best
    }

    /// Slot of the next packet to play: the lowest sequence number after the last played.
    private func nextBuffered() -> Int? {
        guard buffered > 0, lastPlayedSequence < highestSequence else { return nil }
        var s = lastPlayedSequence + 1
        let last = min(highestSequence, lastPlayedSequence + Int64(capacity))
        while s <= last {
            let i = slotIndex(s)
            if slots[i].sequence == s { return i }
            s += 1
        }
        return nil
    }

    /// A packet whose duration the caller did not give lasts what the stream's timestamp steps
    /// say (the smallest of the last few), or up to the next packet's timestamp if sooner.
    private func inferredLength(of index: Int) -> Int64 {
        var d = inferredDuration
        let following = slotIndex(slots[index].sequence + 1)
        if slots[following].sequence == slots[index].sequence + 1 {
            let step = slots[following].relative - slots[index].relative
            if step >= granule { d = min(d, step) }
        }
        return d
    }

    /// Copies a slot's payload to the output buffer, so what the caller holds stays valid
    /// whatever is inserted before the next `nextFrame`.
    private func packet(at index: Int, _ slot: Slot) -> Packet {
        if slot.length > 0 { output.copyMemory(from: payloads + index * maxPayload, byteCount: slot.length) }
        return Packet(
            sequenceNumber: UInt16(truncatingIfNeeded: slot.sequence),
            timestamp: slot.timestamp,
            durationSamples: Int(slot.duration),
            payload: UnsafeRawBufferPointer(start: output, count: slot.length))
    }

    private func shed(_ samples: Int64) {
        statistics.skipped += 1
        statistics.shedMs += Double(samples) / Double(samplesPerMs)
    }

    /// When playout lags the schedule by more than `threshold`, jumps forward to it,
    /// dropping the packets that end before it (counted as skipped) and landing on the start
    /// of a packet that spans it. Returns how much `ahead` grew.
    private func catchUp(ahead: Double, beyond threshold: Double) -> Double {
        guard -ahead > threshold else { return 0 }
        var landing = playPosition + Int64(min(-ahead, 1e15))
        var dropped = 0
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
            let s = slots[i]
            if s.relative + s.duration <= landing {
                lastPlayedSequence = max(lastPlayedSequence, s.sequence)
                free(i)
                dropped += 1
            }
        }
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty && slots[i].relative < landing {
            landing = slots[i].relative
        }
        let moved = max(0, landing - playPosition)
        guard moved > 0 || dropped > 0 else { return 0 }
        statistics.skipped += max(dropped, 1)
        statistics.shedMs += Double(moved) / Double(samplesPerMs)
        playPosition += moved
        if buffered == 0 { emptySamples += moved }
        excessSince = Self.none
        return Double(moved)
    }

    private func isMarked(_ seq: Int64) -> Bool {
        if seq > bitmapTop || seq <= bitmapTop - Self.bitmapSpan { return false }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        return bitmap[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    private func mark(_ seq: Int64) {
        if seq > bitmapTop {
            if seq - bitmapTop >= Self.bitmapSpan {
                for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
            } else {
                var s = bitmapTop + 1
                while s <= seq {
                    let bit = Int(s & (Self.bitmapSpan - 1))
                    bitmap[bit >> 6] &= ~(1 << UInt64(bit & 63))
                    s += 1
                }
            }
            bitmapTop = seq
        }
        if seq <= bitmapTop - Self.bitmapSpan { return }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        bitmap[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    private func lostNow() -> Int {
        guard anchored else { return lostBefore }
        let expected = Int(highestSequence - baseSequence + 1)
        return lostBefore + max(0, expected - arrivedCount)
    }

    private func publishStatistics() {
        statistics.lost = lostNow()
        statistics.targetDelayMs = target / Double(samplesPerMs)
        statistics.jitterMs = Double(jitter16 >> 4) / Double(samplesPerMs)
        statistics.bufferedPackets = buffered
    }
}
