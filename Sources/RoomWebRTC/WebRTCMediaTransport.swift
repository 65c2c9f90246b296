import RoomDTLS
import RoomICE
import RoomMediaCrypto
import RoomProtocol
import RoomSDP
import RoomSystem

/// The media half of a WebRTC PeerConnection for one audio stream: one UDP socket on the event
/// loop, demultiplexed by first byte (RFC 7983) into the ICE agent (STUN), the DTLS endpoint
/// (20-63) and SRTP (128-191); once ICE has selected a pair and DTLS has exported the keys, RTP
/// goes out protected to the selected address and comes in unprotected from it only.
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
        public var rtcpIgnored = 0
    }

    public private(set) var state = State.idle { didSet { if state != oldValue { onState?(state) } } }
    public private(set) var statistics = Statistics()
    public var onState: ((State) -> Void)?
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
    private var timer: EventLoop.TimerID?
    /// The selected pair's remote address as a socket address, kept from the moment ICE selects
    /// it: media in and out compare and send with it, so no packet formats an address.
    private var selectedDestination: SocketAddress?
    private var buffer = [UInt8](repeating: 0, count: 2048)
    private var sendBuffer = [UInt8](repeating: 0, count: 1500 + SRTPSession.trailerRoom)

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
        try socket.onReadable(loop: loop) { [weak self] _ in self?.readAll() }
    }

    deinit {
        if let timer { loop.cancel(timer) }
        socket.close()
    }

    /// This side's ICE and DTLS parameters for the SDP.
    public func localEndpoint(ssrc: UInt32, cname: String, sends: Bool, receives: Bool) -> OpusAudioNegotiation.LocalEndpoint {
        let host = socket.localAddress
        return OpusAudioNegotiation.LocalEndpoint(
            iceUfrag: credentials.ufrag, icePassword: credentials.password, fingerprint: identity.fingerprint,
            candidates: [ICECandidate(foundation: "1", priority: ICECandidate.priority(kind: .host),
                                      address: host.host, port: Int(host.port ?? 0), kind: .host)],
            ssrc: ssrc, cname: cname, sends: sends, receives: receives)
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
        if sent { statistics.rtpSent += 1 }
        return sent
    }

    public func close() {
        if let timer { loop.cancel(timer) }
        timer = nil
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
            guard let agent, d.count > 0 else { continue }
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
                    if (72 ... 78).contains(datagram[1] & 0x7F) { statistics.rtcpIgnored += 1; return }
                    guard let srtpIn else { return }
                    if case .rtp(let length) = srtpIn.unprotect(datagram, length: d.count) {
                        statistics.rtpReceived += 1
                        onRTP?(UnsafeMutableRawBufferPointer(rebasing: datagram[0 ..< length]))
                    } else {
                        statistics.srtpRefused += 1
                    }
                }
            }
        }
        follow()
        flush()
    }

    /// IPv4 only for now (the appliance's host candidate and the servers it reaches).
    static func stunAddress(_ host: String, _ port: UInt16) -> STUNAddress? {
        let parts = host.split(separator: ".").compactMap { UInt8($0) }
        return parts.count == 4 ? STUNAddress(ip: parts, port: port) : nil
    }
}
