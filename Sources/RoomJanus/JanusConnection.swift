import RoomSystem

/// A `JanusAudioBridgeSession` carried over a WebSocket on roomd's event loop: TCP to Janus's
/// WebSocket transport, the RFC 6455 handshake, text frames both ways, the session's keepalive
/// on a timer. What the session reports comes out of `onOutput`; a connection that closes or
/// fails is reported as `.failed` with the reason (the appliance then rejoins with a new one).
/// Event-loop thread only.
public final class JanusConnection {
    public private(set) var session: JanusAudioBridgeSession
    public var onOutput: ((JanusAudioBridgeSession.Output) -> Void)?
    public private(set) var isOpen = false

    private let loop: EventLoop
    private let address: SocketAddress
    private var connection: StreamConnection?
    private var ws: WebSocketClient
    private var pendingOffer: (sdp: String, muted: Bool)?
    private var timer: EventLoop.TimerID?
    private let started = monotonicNanoseconds()
    private var readBuffer = [UInt8](repeating: 0, count: 65_536)

    /// `address`: Janus's WebSocket transport (e.g. 127.0.0.1:8188; plain ws for now).
    public init(loop: EventLoop, address: SocketAddress, session: JanusAudioBridgeSession) {
        self.loop = loop
        self.address = address
        self.session = session
        var nonce = [UInt8](repeating: 0, count: 16)
        var rng = SystemRandomNumberGenerator()
        for i in nonce.indices { nonce[i] = UInt8.random(in: 0 ... 255, using: &rng) }
        ws = WebSocketClient(nonce: nonce, sha1: WebSocketClient.sha1, maskSource: { UInt32.random(in: 0 ... .max) })
    }

    deinit { close() }

    private var nowMs: UInt64 { (monotonicNanoseconds() - started) / 1_000_000 }

    /// Connects and joins with `offer` once the WebSocket is open.
    public func join(offer sdp: String, muted: Bool) throws(SystemError) {
        pendingOffer = (sdp, muted)
        connection = try StreamConnection.connect(to: address, loop: loop) { [weak self] c, event in
            self?.handle(c, event)
        }
        timer = loop.schedule(after: .seconds(1), repeating: .seconds(1)) { [weak self] in
            guard let self else { return }
            self.session.tick(now: self.nowMs)
            self.pump()
        }
    }

    public func setMuted(_ muted: Bool) { session.setMuted(muted, now: nowMs); pump() }
    public func configure(muted: Bool, display: String) { session.configure(muted: muted, display: display, now: nowMs); pump() }
    public func trickle(_ candidate: JanusTrickle) { session.trickle(candidate, now: nowMs); pump() }

    /// Leaves the room (leave, detach, destroy), sends what is queued, then closes.
    public func leave() {
        session.leave(now: nowMs)
        ws.close()
        pump()
        connection?.closeAfterFlush()
        stopTimer()
    }

    public func close() {
        stopTimer()
        connection?.close()
        connection = nil
        isOpen = false
    }

    private func stopTimer() {
        if let timer { loop.cancel(timer) }
        timer = nil
    }

    private func handle(_ c: StreamConnection, _ event: StreamConnection.Event) {
        switch event {
        case .connected:
            ws.open(host: address.description)
            pump()
        case .readable:
            while true {
                let result = try? readBuffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
                guard case .bytes(let n)? = result else {
                    if result == .endOfStream || result == nil { fail("Janus closed the WebSocket connection") }
                    break
                }
                for event in ws.receive(readBuffer[0 ..< n]) { take(event) }
            }
            pump()
        case .drained:
            break
        case .closed(let error):
            fail("Janus connection: \(error)")
        }
    }

    private func take(_ event: WebSocketClient.Event) {
        switch event {
        case .opened:
            isOpen = true
            if let offer = pendingOffer {
                pendingOffer = nil
                session.join(offer: offer.sdp, muted: offer.muted, now: nowMs)
            }
        case .text(let text):
            for output in session.receive(text, now: nowMs) { onOutput?(output) }
        case .binary:
            break
        case .closed(let code, let reason):
            fail("Janus closed the WebSocket (\(code)\(reason.isEmpty ? "" : ": " + reason))")
        }
    }

    private func pump() {
        for text in session.takeOutgoing() { ws.send(text: text) }
        let bytes = ws.takeOutgoing()
        if !bytes.isEmpty { _ = connection?.write(bytes) }
    }

    private func fail(_ why: String) {
        guard connection != nil else { return }
        close()
        if session.state != .left { onOutput?(.failed(why)) }
    }
}
