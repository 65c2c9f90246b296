import RoomClient
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSystem
import XCTest

/// Turns the loop until `condition` holds or `seconds` pass; returns whether it held.
@discardableResult
func runLoop(_ loop: EventLoop, seconds: Double = 5, until condition: () -> Bool) throws -> Bool {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    while !condition() {
        if monotonicNanoseconds() > deadline { return false }
        _ = try loop.runOnce(timeout: .milliseconds(10))
    }
    return true
}

/// Turns the loop for `seconds`.
func runLoop(_ loop: EventLoop, for seconds: Double) throws {
    try runLoop(loop, seconds: seconds) { false }
}

/// A port on 127.0.0.1 where nothing listens (connects are refused).
func deadAddress(_ loop: EventLoop) throws -> SocketAddress {
    let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop) { _ in }
    let port = listener.localPort
    listener.close()
    return .ipv4Loopback(port: port)
}

/// A tiny stand-in for roomserver, on the test's loop: speaks the framing and enough of the
/// protocol for the client (hello → welcome, ping → pong, stage and mute requests, ok for
/// everything else) and answers binding datagrams. Everything it receives is recorded.
final class FakeRoomServer {
    final class Client {
        let connection: StreamConnection
        var decoder = FrameDecoder()
        var info: ParticipantInfo?
        init(_ connection: StreamConnection) { self.connection = connection }
    }

    let loop: EventLoop
    var listener: TCPListener?
    let udp: UDPSocket
    let mediaKey = MediaKey(bytes: Array(1 ... 16))!
    /// SRTP keys to hand out in `welcome` (nil: plain RTP, like `[media] srtp = no`). The fake
    /// does not encrypt by itself: tests protect what they send with `downlink`.
    var mediaEncryption: MediaEncryption?
    var address: SocketAddress
    var clients: [Client] = []

    // Recorded.
    var hellos: [SignalMessage.Hello] = []
    var received: [SignalMessage] = []
    var pings = 0
    var datagrams: [(bytes: [UInt8], source: SocketAddress)] = []
    var bindings: [BindingDatagram] = []
    /// Binding datagrams to receive but not answer (a lossy path at join).
    var bindingsToDrop = 0
    var rtp: [MediaPacket] = []
    var clientMediaAddress: SocketAddress?

    // Behaviour.
    var answerPings = true
    /// Ignore every frame (a hung server).
    var silent = false
    var refuseHello: ErrorCode?
    /// Give back `previous_participant_id` (the server still remembers the participant).
    var remembers = true
    var nextParticipantID: RoomParticipantID = 7
    var others: [ParticipantInfo] = [
        ParticipantInfo(id: 3, userID: "alice", name: "Alice", role: .streamer, stage: .onStage, muted: false,
                        moderator: true, ssrc: 0x3333),
    ]
    var attributes = ["topic": "standup"]
    /// Answers to requests by type name (default ok).
    var refuse: [String: ErrorCode] = [:]

    init(loop: EventLoop, port: UInt16 = 0) throws {
        self.loop = loop
        udp = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        address = .ipv4Loopback(port: port)
        try listen(port: port)
        try udp.onReadable(loop: loop) { [unowned self] socket in self.receiveDatagrams(socket) }
    }

    func listen(port: UInt16) throws {
        let listener = try TCPListener(address: .ipv4Loopback(port: port), loop: loop) { [unowned self] c in
            self.accept(c)
        }
        self.listener = listener
        address = listener.localAddress
    }

    /// Stops listening and drops every connection (a crash).
    func shutDown() {
        listener?.close()
        listener = nil
        dropConnections()
    }

    func dropConnections() {
        for client in clients { client.connection.close() }
        clients = []
    }

    private func accept(_ connection: StreamConnection) {
        let client = Client(connection)
        clients.append(client)
        connection.handler = { [unowned self] c, event in
            guard case .readable = event else { return }
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let result = try? buffer.withUnsafeMutableBytes { try c.read(into: $0) }
                switch result {
                case .bytes(let n)?:
                    let frames = (try? client.decoder.feed(buffer[0 ..< n])) ?? []
                    for frame in frames {
                        guard let message = try? SignalMessage.decode(frame) else { continue }
                        self.handle(message, from: client)
                    }
                case .wouldBlock?:
                    return
                case .endOfStream?, nil:
                    c.close()
                    self.clients.removeAll { $0 === client }
                    return
                }
            }
        }
    }

    func send(_ body: SignalMessage.Body, to client: Client? = nil) {
        guard let client = client ?? clients.last else { return }
        let bytes = try! FrameEncoder().frame(try! SignalMessage(body).encode())
        _ = client.connection.write(bytes)
    }

    private func handle(_ message: SignalMessage, from client: Client) {
        if silent { return }
        received.append(message)
        func ok() { if let id = message.id { send(.ok(requestID: id), to: client) } }
        func update(_ change: (inout ParticipantInfo) -> Void) {
            guard var info = client.info else { return }
            change(&info)
            client.info = info
            send(.participantUpdated(info), to: client)
        }
        if let id = message.id, let code = refuse[message.body.typeName] {
            send(.error(.init(code: code, message: "refused by the fake", requestID: id)), to: client)
            return
        }
        switch message.body {
        case .hello(let hello):
            hellos.append(hello)
            if let code = refuseHello {
                send(.error(.init(code: code, message: "refused by the fake")), to: client)
                client.connection.closeAfterFlush()
                return
            }
            let id: RoomParticipantID
            if remembers, let previous = hello.previousParticipantID {
                id = previous
            } else {
                id = nextParticipantID
                nextParticipantID += 1
            }
            let onStage = hello.role == .streamer
            let me = ParticipantInfo(id: id, userID: "board", name: "Board", role: onStage ? .streamer : .audience,
                                     stage: onStage ? .onStage : .off, muted: false, moderator: false,
                                     ssrc: 0x1000 + id)
            client.info = me
            send(.welcome(.init(participantID: id, room: "lobby", ssrc: 0x1000 + id, udpPort: udp.localPort,
                                mediaKey: mediaKey, policy: .open, speakerLimit: 6, participants: others + [me],
                                attributes: attributes, tokenExpiresAt: 2_000_000_000, mediaEncryption: mediaEncryption)),
                 to: client)
        case .ping(let t):
            pings += 1
            if answerPings { send(.pong(t: t), to: client) }
        case .raiseHand:
            update { $0.stage = .onStage; $0.role = .streamer }
            ok()
        case .stepDown:
            update { $0.stage = .off; $0.role = .audience }
            ok()
        case .setMute(let muted):
            update { $0.muted = muted }
            ok()
        case .leave:
            ok()
            client.connection.closeAfterFlush()
        default:
            ok()
        }
    }

    private func receiveDatagrams(_ socket: UDPSocket) {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while let d = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
            let bytes = Array(buffer[0 ..< d.count])
            datagrams.append((bytes, d.source))
            if bytes.first == 0x52 {
                guard let binding = try? BindingDatagram.parse(bytes, key: mediaKey) else { continue }
                bindings.append(binding)
                if bindingsToDrop > 0 { bindingsToDrop -= 1; continue }
                clientMediaAddress = d.source
                let answer = BindingDatagram(participantID: 0, timestampMs: binding.timestampMs).encoded(key: mediaKey)
                _ = try? socket.send(answer, to: d.source)
            } else if let packet = bytes.withUnsafeBytes({ try? MediaPacket(rtp: $0, arrivalSamples: 0) }) {
                rtp.append(packet)
            }
        }
    }

    /// Sends raw bytes from the server's media port to the client's learned media address.
    func sendDatagram(_ bytes: [UInt8]) {
        guard let destination = clientMediaAddress else { return XCTFail("no client media address yet") }
        _ = try? udp.send(bytes, to: destination)
    }
}

/// An outgoing packet as the engine would make it.
func makePacket(sequence: UInt16, timestamp: UInt32, payload: [UInt8] = [0xF8, 0xFF, 0xFE]) -> MediaPacket {
    var packet = MediaPacket()
    packet.ssrc = 0xDEAD_BEEF  // the engine does not know the assigned SSRC
    packet.sequenceNumber = sequence
    packet.timestamp = timestamp
    packet.audioLevel = 30
    packet.voiceActivity = true
    _ = payload.withUnsafeBytes { packet.setPayload($0) }
    return packet
}

func rtpBytes(_ packet: MediaPacket) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 1500)
    let n = out.withUnsafeMutableBytes { try! packet.serializeRTP(into: $0) }
    return Array(out[0 ..< n])
}
