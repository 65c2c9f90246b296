import FoundationEssentials
import RoomDTLS
import RoomICE
import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomSDP
import RoomSystem

/// The media half of a WebRTC PeerConnection for one audio stream: one UDP socket on the event
/// loop, demultiplexed by first byte (RFC 7983) into the ICE agent (STUN), the DTLS endpoint
/// (20-63) and SRTP (128-191); once ICE has selected a pair and DTLS has exported the keys, RTP
/// goes out protected to the selected address and comes in unprotected from it only.
///
/// RTCP rides along (rtcp-mux): every RTP packet sent and received feeds an `RTCPSession`,
/// whose compound reports go out as SRTCP from the tick once connected, and the peer's SRTCP is
/// read for the round trip and its view of our stream (`statistics`).
///
/// What the signalling side (a Janus session, or any other) does with it: put `localEndpoint`'s
/// credentials, fingerprint and candidate in its offer or answer, then `start` with the
/// negotiated `Agreement`. Event-loop thread only.
public final class WebRTCMediaTransport {
    public enum State: Sendable, Equatable {
        case idle
        case checking
        /// ICE selected a pair; DTLS is running over it.
        case securing
        /// Keys exported: `sendRTP` works, `onRTP` receives.
        case connected(profile: String)
        case failed(String)
    }

    public struct Statistics: Sendable, Equatable {
        public var rtpSent = 0
        public var rtpReceived = 0
        /// SRTP packets that failed authentication or replayed.
        public var srtpRefused = 0
        /// Media from an address other than the selected pair's: dropped (RFC 7675 consent).
        public var fromElsewhere = 0
        /// RTCP nothing was read from: it came before the SRTP keys, or it verified but is not
        /// valid RTCP (bad lengths). SRTCP that fails authentication counts in `srtpRefused`.
        public var rtcpIgnored = 0
        /// Compound SRTCP packets sent (reports, and the BYE at `close`).
        public var rtcpSent = 0
        /// Compound SRTCP packets from the peer that verified and were read.
        public var rtcpReceived = 0
        /// Round-trip time from the peer's latest report that echoed one of our SRs (RFC 3550
        /// §6.4.1: arrival − LSR − DLSR). Nil until then.
        public var roundTripMs: Double?
        /// The fraction of our packets the peer lost (0...1) over its latest report interval.
        public var remoteFractionLost: Double?
        /// The peer's interarrival jitter of our stream, in milliseconds (48 kHz RTP clock).
        public var remoteJitterMs: Double?
    }

    public private(set) var state = State.idle { didSet { if state != oldValue { onState?(state) } } }
    public private(set) var statistics = Statistics()
    public var onState: ((State) -> Void)?
    /// After each RTCP report of the peer's was read: its view of our stream (`statistics`'
    /// `roundTripMs`, `remoteFractionLost`, `remoteJitterMs`), e.g. for the encoder's FEC.
    public var onRemoteReport: ((Statistics) -> Void)?
    /// Whether reports are sent (incoming RTCP is read either way). On by default; off only to
    /// measure what a peer does without our RTCP (docs/webrtc.md, "RTCP").
    public var sendsRTCP = true
    /// A decrypted RTP packet (valid for the call only).
    public var onRTP: ((UnsafeMutableRawBufferPointer) -> Void)?

    public let identity: DTLSIdentity
    public let credentials: ICEAgent.Credentials
    public let socket: UDPSocket
    private let loop: EventLoop
    private let start: UInt64
    private var agent: ICEAgent?
    private var dtls: DTLSEndpoint?
    private var srtpOut: SRTPSession?
    private var srtpIn: SRTPSession?
    /// The SRTP master keys (key ‖ salt) DTLS exported, ours and the peer's: tests decrypt a
    /// packet capture with them (never logged, not public).
    private(set) var srtpMasterKeys: (local: [UInt8], remote: [UInt8])?
    private var timer: EventLoop.TimerID?
    /// The selected pair's remote address as a socket address, kept from the moment ICE selects
    /// it: media in and out compare and send with it, so no packet formats an address.
    private var selectedDestination: SocketAddress?
    private var buffer = [UInt8](repeating: 0, count: 2048)
    private var sendBuffer = [UInt8](repeating: 0, count: 1500 + SRTPSession.trailerRoom)
    /// RTCP statistics and schedule (sans-IO); reports are written into `rtcpBuffer` and sent
    /// from the 5 ms tick once connected.
    private var rtcp: RTCPSession
    private var rtcpBuffer = [UInt8](repeating: 0, count: 1200 + SRTPSession.rtcpTrailerRoom)

    /// Binds `address` (a host candidate: libnice-based servers gather no loopback candidates,
    /// docs/webrtc.md) and makes a DTLS identity.
    public init(loop: EventLoop, address: SocketAddress) throws(SystemError) {
        self.loop = loop
        socket = try UDPSocket(bindingTo: address)
        do { identity = try DTLSIdentity() } catch { throw SystemError("\(error)") }
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/".utf8)
        func token(_ n: Int) -> String { String(decoding: (0 ..< n).map { _ in alphabet[Int(rng.next() % 64)] }, as: UTF8.self) }
        credentials = ICEAgent.Credentials(ufrag: token(8), password: token(24))
        start = monotonicNanoseconds()
        // Until `localEndpoint` names them (or a sent packet's SSRC does): a random SSRC and CNAME.
        rtcp = RTCPSession(localSSRC: UInt32.random(in: 1 ... .max), cname: token(16),
                           wallClockNTP: RTCPSession.ntp(unixSeconds: Date().timeIntervalSince1970),
                           monotonicNow: start)
        try socket.onReadable(loop: loop) { [weak self] _ in self?.readAll() }
    }

    deinit {
        if let timer { loop.cancel(timer) }
        socket.close()
    }

    /// This side's ICE and DTLS parameters for the SDP.
    /// `ssrc` and `cname` are also what this side's RTCP reports under.
    public func localEndpoint(ssrc: UInt32, cname: String, sends: Bool, receives: Bool) -> OpusAudioNegotiation.LocalEndpoint {
        rtcp.setLocal(ssrc: ssrc, cname: cname)
        let host = socket.localAddress
        return OpusAudioNegotiation.LocalEndpoint(
            iceUfrag: credentials.ufrag, icePassword: credentials.password, fingerprint: identity.fingerprint,
            candidates: [ICECandidate(foundation: "1", priority: ICECandidate.priority(kind: .host),
                                      address: host.host, port: Int(host.port ?? 0), kind: .host)],
            ssrc: ssrc, cname: cname, sends: sends, receives: receives)
    }

    // MARK: Server-reflexive candidate

    private var gathering: (server: SocketAddress, transaction: [UInt8], completion: (ICECandidate?) -> Void,
                            timer: EventLoop.TimerID?, deadline: UInt64, wait: UInt64)?

    /// This socket's address as a STUN server sees it (an RFC 8489 Binding request from the media
    /// socket), as a server-reflexive candidate for the offer: what a peer outside the
    /// appliance's NAT can reach. `completion` gets the candidate, or nil when the server did not
    /// answer within `timeout` (requests are repeated at 100, 200, 400 ms …). Before `start`.
    public func gatherServerReflexive(from server: SocketAddress, timeout: Duration = .milliseconds(800),
                                      completion: @escaping (ICECandidate?) -> Void) {
        let transaction = (0 ..< 12).map { _ in UInt8.random(in: 0 ... 255) }
        let now = monotonicNanoseconds()
        gathering = (server, transaction, completion, nil, now + timeout.monotonicNanosecondCount, 100_000_000)
        sendGatheringRequest()
    }

    private func sendGatheringRequest() {
        guard var g = gathering else { return }
        let request = STUNMessage(class: .request, transactionID: g.transaction).serialize()
        _ = try? socket.send(request, to: g.server)
        let now = monotonicNanoseconds()
        guard now < g.deadline else { return finishGathering(nil) }
        let wait = min(g.wait, g.deadline - now)
        g.wait *= 2
        g.timer = loop.schedule(after: .nanoseconds(Int64(wait))) { [weak self] in
            self?.gathering?.timer = nil
            self?.sendGatheringRequest()
        }
        gathering = g
    }

    private func gathered(_ bytes: UnsafeRawBufferPointer) {
        guard let g = gathering, let m = try? STUNMessage.parse(bytes).message, m.transactionID == g.transaction,
              m.messageClass == .success, let mapped = m.xorMappedAddress else { return }
        let host = socket.localAddress
        // The server saw this socket from an address of the socket's own family; another family
        // (an IPv6 address answered to an IPv4 socket) is not where a peer reaches it — the
        // IPv6 bytes were written as a 16-part dotted "address" before. Keep waiting instead.
        guard (mapped.ip.count == 16) == (host.family == .ipv6) else { return }
        finishGathering(ICECandidate(foundation: "2", priority: ICECandidate.priority(kind: .srflx),
                                     address: mapped.host, port: Int(mapped.port), kind: .srflx,
                                     relatedAddress: host.host, relatedPort: Int(host.port ?? 0)))
    }

    private func finishGathering(_ candidate: ICECandidate?) {
        guard let g = gathering else { return }
        if let timer = g.timer { loop.cancel(timer) }
        gathering = nil
        g.completion(candidate)
    }

    /// Starts ICE with what the other side's description said, then DTLS over the selected pair.
    public func start(_ agreement: OpusAudioNegotiation.Agreement, controlling: Bool) {
        let agent = ICEAgent(role: controlling ? .controlling : .controlled, local: credentials,
                             tieBreaker: UInt64.random(in: 0 ... .max), hmac: STUNMessage.hmacSHA1,
                             random: { UInt64.random(in: 0 ... .max) })
        self.agent = agent
        do {
            dtls = try DTLSEndpoint(identity: identity, role: agreement.dtlsRole == .client ? .client : .server,
                                    expectedPeer: agreement.remoteFingerprint)
        } catch {
            state = .failed("\(error)")
            return
        }
        let candidates: [(address: STUNAddress, priority: UInt32)] = agreement.remoteCandidates.compactMap { c in
            guard let a = Self.stunAddress(c.address, UInt16(clamping: c.port)) else { return nil }
            return (a, c.priority)
        }
        agent.start(remote: .init(ufrag: agreement.remoteUfrag, password: agreement.remotePassword), candidates: candidates, now: now)
        if agreement.remoteCandidatesComplete { agent.remoteCandidatesComplete() }
        state = .checking
        timer = loop.schedule(after: .milliseconds(5), repeating: .milliseconds(5)) { [weak self] in self?.tick() }
        flush()
    }

    /// A trickled remote candidate.
    public func addRemoteCandidate(_ c: ICECandidate) {
        guard c.component == 1, c.transport == "udp", let a = Self.stunAddress(c.address, UInt16(clamping: c.port)) else { return }
        agent?.addRemoteCandidate(a, priority: c.priority)
    }

    /// Protects and sends one RTP packet (`packet[0..<length]`) to the selected pair. False
    /// until connected, or when the packet does not fit.
    @discardableResult
    public func sendRTP(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard case .connected = state, let srtpOut, let destination = selectedDestination,
              packet.count + SRTPSession.trailerRoom <= sendBuffer.count else { return false }
        let sent: Bool = sendBuffer.withUnsafeMutableBytes { out in
            out.copyMemory(from: packet)
            guard let n = srtpOut.protect(out, length: packet.count) else { return false }
            return (try? socket.send(UnsafeRawBufferPointer(rebasing: out[0 ..< n]), to: destination)) ?? false
        }
        if sent {
            statistics.rtpSent += 1
            rtcp.sent(rtp: packet, at: monotonicNanoseconds())
        }
        return sent
    }

    /// Stops: a last report with BYE when connected (the peer learns at once that we left,
    /// instead of after its media timeout), then the socket is closed.
    public func close() {
        if let timer { loop.cancel(timer) }
        timer = nil
        // A gathering under way ends without a candidate and sends nothing more.
        if let g = gathering, let t = g.timer { loop.cancel(t) }
        gathering = nil
        if case .connected = state, sendsRTCP { sendReport(at: monotonicNanoseconds(), leaving: true) }
        socket.close()
        if case .failed = state {} else { state = .failed("closed") }
    }

    // MARK: Inside

    private var now: UInt64 { (monotonicNanoseconds() - start) / 1_000_000 }

    private static func socketAddress(_ a: STUNAddress) -> SocketAddress? {
        try? SocketAddress(ip: a.ip.map(String.init).joined(separator: "."), port: a.port)
    }

    private func tick() {
        guard let agent else { return }
        agent.tick(now: now)
        dtls?.tick(now: now)
        follow()
        flush()
        if case .connected = state, sendsRTCP {
            let t = monotonicNanoseconds()
            if rtcp.reportDue(at: t) { sendReport(at: t, leaving: false) }
        }
    }

    /// Writes the compound report due (`RTCPSession`), protects it as SRTCP and sends it to the
    /// selected pair.
    private func sendReport(at t: UInt64, leaving: Bool) {
        guard let srtpOut, let destination = selectedDestination else { return }
        let sent: Bool = rtcpBuffer.withUnsafeMutableBytes { out in
            let room = UnsafeMutableRawBufferPointer(rebasing: out[0 ..< out.count - SRTPSession.rtcpTrailerRoom])
            let length = rtcp.writeReport(into: room, at: t, random: Double.random(in: 0 ..< 1), leaving: leaving)
            guard length > 0, let n = srtpOut.protectRTCP(out, length: length) else { return false }
            return (try? socket.send(UnsafeRawBufferPointer(rebasing: out[0 ..< n]), to: destination)) ?? false
        }
        if sent { statistics.rtcpSent += 1 }
    }

    /// The peer's view of our stream, copied into `statistics` after each report read.
    private func updateRemoteStatistics() {
        statistics.roundTripMs = rtcp.roundTripMs
        statistics.remoteFractionLost = rtcp.remoteFractionLost
        statistics.remoteJitterMs = rtcp.remoteReport.map { Double($0.jitter) * 1000 / Double(rtcp.clockRate) }
        onRemoteReport?(statistics)
    }

    /// Moves the state along what ICE and DTLS did.
    private func follow() {
        guard let agent, let dtls else { return }
        switch agent.state {
        case .failed(let why): state = .failed("ICE: \(why)"); return
        case .consentLost: state = .failed("ICE: the peer stopped answering consent checks"); return
        default: break
        }
        if state == .checking, agent.state == .connected, let selected = agent.selectedAddress {
            selectedDestination = Self.socketAddress(selected)
            state = .securing
            dtls.start(now: now)
        }
        if state == .securing {
            switch dtls.state {
            case .connected(let keys):
                guard let local = SRTPMasterKey(bytes: keys.local), let remote = SRTPMasterKey(bytes: keys.remote),
                      keys.profile == "SRTP_AEAD_AES_128_GCM" else {
                    state = .failed("DTLS negotiated \(keys.profile); roomd's SRTP runs SRTP_AEAD_AES_128_GCM only")
                    return
                }
                do {
                    srtpOut = try SRTPSession(key: local, direction: .protect)
                    srtpIn = try SRTPSession(key: remote, direction: .unprotect)
                    srtpMasterKeys = (keys.local, keys.remote)
                    rtcp.start(at: monotonicNanoseconds(), random: Double.random(in: 0 ..< 1))
                    state = .connected(profile: keys.profile)
                } catch {
                    state = .failed("SRTP: \(error)")
                }
            case .failed(let why): state = .failed(why)
            case .handshaking: break
            }
        }
    }

    private func flush() {
        guard let agent else { return }
        for out in agent.takeOutgoing() {
            if let to = Self.socketAddress(out.destination) { _ = try? socket.send(out.bytes, to: to) }
        }
        if let dtls, let to = selectedDestination {
            for datagram in dtls.takeOutgoing() { _ = try? socket.send(datagram, to: to) }
        }
    }

    private func readAll() {
        while let d = buffer.withUnsafeMutableBytes({ try? socket.receive(into: $0) }) ?? nil {
            if gathering != nil, d.count > 0, d.source == gathering?.server, buffer[0] < 4 {
                buffer.withUnsafeBytes { gathered(UnsafeRawBufferPointer(rebasing: $0[0 ..< d.count])) }
                continue
            }
            guard let agent, d.count > 0 else { continue }
            // The arrival time of the datagram, for the jitter of the RTP in it (RFC 3550 A.8).
            let arrival = monotonicNanoseconds()
            buffer.withUnsafeMutableBytes { raw in
                let datagram = UnsafeMutableRawBufferPointer(rebasing: raw[0 ..< d.count])
                let first = datagram[0]
                if first < 4 {
                    // STUN (RFC 7983): checks and consent, from any candidate.
                    guard let p = d.source.port, let from = Self.stunAddress(d.source.host, p) else { return }
                    _ = agent.receive(UnsafeRawBufferPointer(datagram), from: from, now: now)
                    return
                }
                // Everything else only from where ICE selected (and consent holds).
                guard let selected = selectedDestination, d.source == selected else { statistics.fromElsewhere += 1; return }
                if (20 ... 63).contains(first) {
                    dtls?.receive(UnsafeRawBufferPointer(datagram), now: now)
                } else if (128 ... 191).contains(first), d.count > 12 {
                    // rtcp-mux (RFC 5761): payload types 200-206 (marker bit aside) are RTCP.
                    if (72 ... 78).contains(datagram[1] & 0x7F) {
                        receiveRTCP(datagram, at: arrival)
                        return
                    }
                    guard let srtpIn else { return }
                    if case .rtp(let length) = srtpIn.unprotect(datagram, length: d.count) {
                        statistics.rtpReceived += 1
                        let packet = UnsafeMutableRawBufferPointer(rebasing: datagram[0 ..< length])
                        rtcp.received(rtp: UnsafeRawBufferPointer(packet), at: arrival)
                        onRTP?(packet)
                    } else {
                        statistics.srtpRefused += 1
                    }
                }
            }
        }
        follow()
        flush()
    }

    /// One SRTCP datagram from the selected pair: verified, decrypted, read.
    private func receiveRTCP(_ datagram: UnsafeMutableRawBufferPointer, at arrival: UInt64) {
        guard let srtpIn else { statistics.rtcpIgnored += 1; return }
        switch srtpIn.unprotectRTCP(datagram, length: datagram.count) {
        case .rtcp(let length):
            do throws(RTCPError) {
                try rtcp.receive(rtcp: UnsafeRawBufferPointer(rebasing: datagram[0 ..< length]), at: arrival)
                statistics.rtcpReceived += 1
                updateRemoteStatistics()
            } catch {
                statistics.rtcpIgnored += 1
            }
        case .authenticationFailure, .replay, .malformed:
            statistics.srtpRefused += 1
        }
    }

    /// IPv4 only for now (the appliance's host candidate and the servers it reaches).
    static func stunAddress(_ host: String, _ port: UInt16) -> STUNAddress? {
        let parts = host.split(separator: ".").compactMap { UInt8($0) }
        return parts.count == 4 ? STUNAddress(ip: parts, port: port) : nil
    }
}
