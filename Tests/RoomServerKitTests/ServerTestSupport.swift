import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// A server and its clients on one loop, turned by the test thread (`runOnce`): everything
/// in-process, loopback only, deterministic ordering. With `workers`, the server is a group of
/// worker threads (`RoomServerWorkers`, `group`) and only the clients are on the test's loop.
final class ServerHarness {
    static let secret = [UInt8](repeating: 7, count: 32)
    static let app = "test-app"

    let loop: EventLoop
    /// The server on the test's loop (nil with `workers`).
    let server: RoomServer!
    let group: RoomServerWorkers?
    /// What the server was started with.
    let configuration: RoomServerConfiguration
    var clients: [TestClient] = []

    init(policy: RoomStagePolicy = .open, speakerLimit: Int = 6, maxParticipants: Int = 50,
         reconnectGraceMs: Int64 = 20_000, limits: RoomServerLimits = RoomServerLimits(), srtp: Bool = true,
         topN: Int = 3, speakerTurnMs: Int64 = RoomConfig().speakerTurnMs, workers: Int? = nil,
         configure: (inout RoomServer.Options) -> Void = { _ in }) throws {
        loop = try EventLoop()
        var configuration = RoomServerConfiguration(
            // Plain signalling: these tests are about the room service, not the transport
            // (RoomTLSTests runs the same server behind TLS).
            listen: [], media: .ipv4Loopback(port: 0),
            keys: [
                "k1": RoomServerKey(keyID: "k1", appID: Self.app, secret: Self.secret),
                "other": RoomServerKey(keyID: "other", appID: "another-app", secret: [UInt8](repeating: 9, count: 32)),
            ],
            room: RoomConfig(policy: policy, speakerLimit: speakerLimit, topN: topN, reconnectGraceMs: reconnectGraceMs,
                             speakerTurnMs: speakerTurnMs),
            maxParticipants: maxParticipants)
        configuration.plainListen = [.ipv4Loopback(port: 0)]
        configuration.limits = limits
        configuration.srtp = srtp
        self.configuration = configuration
        var options = RoomServer.Options()
        configure(&options)
        if let workers {
            group = try RoomServerWorkers(configuration: configuration, options: options, count: workers)
            server = nil
        } else {
            group = nil
            server = RoomServer(configuration: configuration, loop: loop, options: options)
            try server.start()
        }
    }

    deinit {
        group?.shutdown()
        group?.wait()
    }

    var signallingPort: UInt16 { (group?.plainSignallingAddresses ?? server.plainSignallingAddresses)[0].port! }
    var mediaPort: UInt16 { (group?.mediaAddress ?? server.mediaAddress)!.port! }

    func token(room: String = "lobby", user: String, name: String? = nil, publish: Bool = false,
               moderate: Bool = false, expiresIn: Int = 3600, notBefore: Int = 0, keyID: String = "k1",
               secret: [UInt8] = ServerHarness.secret, app: String = ServerHarness.app) -> String {
        let now = RoomTokenVerifier.systemClock()
        let claims = RoomTokenClaims(
            app: app, room: room, sub: user, name: name ?? user,
            grants: RoomGrants(publish: publish, moderate: moderate),
            exp: now + expiresIn, nbf: now + notBefore, iat: now)
        return RoomToken.mint(claims: claims, keyID: keyID, secret: secret)
    }

    /// Turns the loop until `condition` holds (true) or `seconds` pass (false).
    @discardableResult
    func run(seconds: Double = 3, until condition: () -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() {
            if monotonicNanoseconds() > deadline { return false }
            _ = try? loop.runOnce(timeout: .milliseconds(10))
        }
        return true
    }

    /// Turns the loop for a while (to show that something does *not* happen).
    func settle(seconds: Double = 0.15) { run(seconds: seconds) { false } }

    func connect() throws -> TestClient {
        let client = try TestClient(loop: loop, port: signallingPort, mediaPort: mediaPort)
        clients.append(client)
        return client
    }

    /// Connects, says hello and waits for the welcome; binds media when `bind`.
    func join(_ user: String, role: RoomRole = .audience, publish: Bool = false, moderate: Bool = false,
              room: String = "lobby", bind: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> TestClient {
        let client = try connect()
        client.send(.hello(.init(client: "test/1", token: token(room: room, user: user, publish: publish, moderate: moderate),
                                 role: role)))
        guard run(until: { client.welcome != nil || client.closed }), client.welcome != nil else {
            XCTFail("\(user) got no welcome: \(client.messages)", file: file, line: line)
            throw TestFailure()
        }
        if bind { try self.bind(client, file: file, line: line) }
        return client
    }

    /// Binds `client`'s media address as a client does: a binding, the server's challenge with
    /// the address cookie, the binding again with the cookie, the answer.
    func bind(_ client: TestClient, file: StaticString = #filePath, line: UInt = #line) throws {
        for attempt in 0 ..< 2 {
            client.datagrams.removeAll()
            try client.sendBinding()
            guard run(until: { !client.datagrams.isEmpty }) else {
                XCTFail("no binding answer", file: file, line: line)
                throw TestFailure()
            }
            let answer = try BindingDatagram.parse(client.datagrams.removeFirst(), key: client.welcome!.mediaKey)
            XCTAssertEqual(answer.participantID, 0, file: file, line: line)
            client.cookie = answer.cookie
            if !answer.isChallenge { return }
            XCTAssertEqual(attempt, 0, "a second challenge after echoing the cookie", file: file, line: line)
        }
        throw TestFailure()
    }
}

struct TestFailure: Error {}

/// A protocol client on the harness's loop: TCP signalling plus one UDP socket.
///
/// Speaks SRTP when its `welcome` carries keys, as roomd does: `sendRTP` protects with the
/// uplink key, and received RTP is unprotected with the downlink key before it lands in
/// `datagrams` (so tests compare plain packets); what arrived on the wire is in `wireDatagrams`,
/// and RTP that did not unprotect is counted in `refusedSRTP` and not kept in `datagrams`.
final class TestClient {
    let connection: StreamConnection
    let udp: UDPSocket
    let mediaPort: UInt16
    var decoder = FrameDecoder()
    var messages: [SignalMessage] = []
    var datagrams: [[UInt8]] = []
    var wireDatagrams: [[UInt8]] = []
    var refusedSRTP: [SRTPSession.Outcome] = []
    var uplink: SRTPSession?
    var downlink: SRTPSession?
    var closed = false
    var bindingClock: UInt64 = 1000
    /// The server's address cookie for this client's socket (`ServerHarness.bind`).
    var cookie: AddressCookie?
    var sequence: UInt16 = 0
    var nextID = 1

    init(loop: EventLoop, port: UInt16, mediaPort: UInt16) throws {
        self.mediaPort = mediaPort
        connection = try StreamConnection.connect(to: .ipv4Loopback(port: port), loop: loop)
        udp = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        connection.handler = { [unowned self] connection, event in
            switch event {
            case .readable: self.readAll()
            case .closed: self.closed = true
            case .connected, .drained: break
            }
        }
        try udp.onReadable(loop: loop) { [unowned self] socket in
            var buffer = [UInt8](repeating: 0, count: 2048 + SRTPSession.trailerRoom)
            while let d = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
                self.wireDatagrams.append(Array(buffer[0 ..< d.count]))
                guard d.count > 0, buffer[0] & 0xC0 == 0x80, let downlink = self.downlink else {
                    self.datagrams.append(Array(buffer[0 ..< d.count]))
                    continue
                }
                switch buffer.withUnsafeMutableBytes({ downlink.unprotect($0, length: d.count) }) {
                case let .rtp(length): self.datagrams.append(Array(buffer[0 ..< length]))
                case let refused: self.refusedSRTP.append(refused)
                }
            }
        }
    }

    private func readAll() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let result = try? buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
            switch result {
            case let .bytes(n)?:
                guard let frames = try? decoder.feed(buffer[0 ..< n]) else { closed = true; connection.close(); return }
                for frame in frames {
                    if let message = try? SignalMessage.decode(frame) {
                        messages.append(message)
                        if case let .welcome(w) = message.body, let keys = w.mediaEncryption {
                            uplink = try! SRTPSession(key: keys.uplink, direction: .protect)
                            downlink = try! SRTPSession(key: keys.downlink, direction: .unprotect)
                        }
                    }
                }
            case .wouldBlock?: return
            case .endOfStream?, nil:
                closed = true
                connection.close()
                return
            }
        }
    }

    var welcome: SignalMessage.Welcome? {
        for m in messages { if case let .welcome(w) = m.body { return w } }
        return nil
    }
    var id: RoomParticipantID { welcome!.participantID }

    /// Sends a request; returns its id.
    @discardableResult
    func send(_ body: SignalMessage.Body, id: Int? = nil) -> Int? {
        let frame = try! FrameEncoder().encode(SignalMessage(id: id, body))
        connection.write(frame)
        return id
    }

    /// Sends a request with a fresh id.
    @discardableResult
    func request(_ body: SignalMessage.Body) -> Int {
        let id = nextID
        nextID += 1
        send(body, id: id)
        return id
    }

    func sendRaw(_ bytes: [UInt8]) { connection.write(bytes) }

    /// A frame with `json` as payload.
    func sendJSON(_ json: String) { sendRaw(try! FrameEncoder().frame(Array(json.utf8))) }

    func sendBinding(participantID: RoomParticipantID? = nil, key: MediaKey? = nil) throws {
        bindingClock += 1
        let datagram = BindingDatagram(participantID: participantID ?? id, timestampMs: bindingClock, cookie: cookie)
            .encoded(key: key ?? welcome!.mediaKey)
        _ = try udp.send(datagram, to: .ipv4Loopback(port: mediaPort))
    }

    static func rtp(ssrc: UInt32, sequence: UInt16, level: UInt8 = 20, voice: Bool = true) -> [UInt8] {
        let header = RTPPacket(sequenceNumber: sequence, timestamp: UInt32(sequence) * 480, ssrc: ssrc,
                               audioLevel: RTPAudioLevel(voiceActivity: voice, level: level))
        var out = [UInt8](repeating: 0, count: 64)
        let payload: [UInt8] = [0xFC, 1, 2, 3, 4, 5, 6, 7]
        let n = payload.withUnsafeBytes { p in out.withUnsafeMutableBytes { try! header.serialize(payload: p, into: $0) } }
        return Array(out[0 ..< n])
    }

    /// Sends one RTP packet with the assigned SSRC (or `ssrc`), SRTP-protected when the
    /// welcome gave keys; returns the plain RTP packet.
    @discardableResult
    func sendRTP(ssrc: UInt32? = nil, level: UInt8 = 20) throws -> [UInt8] {
        sequence &+= 1
        let packet = Self.rtp(ssrc: ssrc ?? welcome!.ssrc, sequence: sequence, level: level)
        _ = try udp.send(protect(packet), to: .ipv4Loopback(port: mediaPort))
        return packet
    }

    /// A datagram received elsewhere (another socket of this client), unprotected with this
    /// client's downlink key when it has one; nil when SRTP refuses it.
    func unprotect(_ wire: [UInt8]) -> [UInt8]? {
        guard let downlink else { return wire }
        var buffer = wire
        guard case let .rtp(n) = buffer.withUnsafeMutableBytes({ downlink.unprotect($0, length: wire.count) }) else { return nil }
        return Array(buffer[0 ..< n])
    }

    /// `packet` as this client would put it on the wire (SRTP when it has keys).
    func protect(_ packet: [UInt8]) -> [UInt8] {
        guard let uplink else { return packet }
        var buffer = packet + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
        let n = buffer.withUnsafeMutableBytes { uplink.protect($0, length: packet.count) }
        return Array(buffer[0 ..< n!])
    }

    func errors() -> [SignalMessage.ErrorInfo] {
        messages.compactMap { if case let .error(e) = $0.body { return e } else { return nil } }
    }
    func lastError() -> SignalMessage.ErrorInfo? { errors().last }

    func has(_ predicate: (SignalMessage.Body) -> Bool) -> Bool { messages.contains { predicate($0.body) } }

    func gotOK(_ id: Int) -> Bool { has { if case .ok(id) = $0 { true } else { false } } }

    func removed() -> (RoomLeaveReason, String)? {
        for m in messages { if case let .removed(reason, message) = m.body { return (reason, message) } }
        return nil
    }

    func left(_ participant: RoomParticipantID) -> RoomLeaveReason? {
        for m in messages {
            if case let .participantLeft(id, reason) = m.body, id == participant { return reason }
        }
        return nil
    }
}
