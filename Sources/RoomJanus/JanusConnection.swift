import RoomSystem
import RoomTLS

/// A `JanusAudioBridgeSession` carried over a WebSocket on roomd's event loop: TCP (or TLS, for
/// `wss`) to Janus's WebSocket transport, the RFC 6455 handshake, text frames both ways, the
/// session's keepalive on a timer. What the session reports comes out of `onOutput`; a
/// connection that closes or fails is reported as `.failed` with the reason (the appliance then
/// rejoins with a new one).
///
/// TLS is `RoomTLS`, the same code and settings (CA file, SPKI pins, server name) as the
/// roomserver signalling, so a certificate Janus presents is checked exactly as roomserver's
/// would be and a refusal reads the same ("TLS to 10.0.0.5:8989: host name mismatch: …"): an
/// installer who has met one knows the other. Event-loop thread only.
public final class JanusConnection {
    public private(set) var session: JanusAudioBridgeSession
    public var onOutput: ((JanusAudioBridgeSession.Output) -> Void)?
    /// True once the WebSocket handshake is done, until the connection closes.
    public private(set) var isOpen = false

    /// Janus's WebSocket transport: a host name (resolved at `join`) or a numeric address.
    public let endpoint: HostPort
    /// nil: plain `ws`; otherwise `wss` with these checks of Janus's certificate.
    public let tls: TLSClientSettings?
    /// The WebSocket request target (Janus answers on any; a proxy in front may route on it).
    public let path: String
    /// The address connected to (or being tried), after name resolution.
    public private(set) var peerAddress: SocketAddress?
    /// "TLSv1.3 TLS_AES_256_GCM_SHA384" once a `wss` connection is up; nil for `ws`.
    public private(set) var tlsSessionDescription: String?
    /// From `join` (or the move to the next resolved address) to the WebSocket handshake's end;
    /// past it the attempt fails. The kernel's own TCP timeout is minutes, far longer than
    /// anyone waits for a room to start.
    public var connectTimeout: Duration = .seconds(10)

    private let loop: EventLoop
    private var connection: (any StreamTransport)?
    private var ws: WebSocketClient
    private var pendingOffer: (sdp: String, muted: Bool)?
    private var timer: EventLoop.TimerID?
    private let started = monotonicNanoseconds()
    private var readBuffer = [UInt8](repeating: 0, count: 65_536)
    /// Made at the first `join` (the CA file is read then) and kept for later ones.
    private var tlsContext: TLSClientContext?
    private var addresses: [SocketAddress] = []
    private var addressIndex = 0
    private var attemptStartedMs: UInt64 = 0
    /// Between `join` and `close` (or a reported failure): failures are reported only then.
    private var active = false

    /// Plain `ws` to a numeric address, path "/". Kept for the code written against it; new code
    /// uses `init(loop:endpoint:tls:path:session:)` or `init(loop:url:tls:session:)`.
    public convenience init(loop: EventLoop, address: SocketAddress, session: JanusAudioBridgeSession) {
        self.init(loop: loop, endpoint: HostPort(address: address), tls: nil, path: "/", session: session)
    }

    /// `endpoint`: Janus's WebSocket transport, a host name or a numeric address (names are
    /// resolved at `join`, like `room.server`, so an appliance that boots before its DNS works
    /// gets there on its next join). `tls` nil is plain `ws`; with settings it is `wss`, Janus's
    /// certificate checked against them and the host name (or `tls.serverName`). `path` must
    /// start with "/" (`join` refuses it otherwise).
    public init(loop: EventLoop, endpoint: HostPort, tls: TLSClientSettings?, path: String = "/",
                session: JanusAudioBridgeSession) {
        self.loop = loop
        self.endpoint = endpoint
        self.tls = tls
        self.path = path
        self.session = session
        ws = Self.makeWebSocket()
    }

    /// The connection a `room.janus_url` names: TLS with `tls` when its scheme is `wss` (the
    /// default settings trust the system's CA store), plain when it is `ws` (`tls` unused).
    public convenience init(loop: EventLoop, url: JanusURL, tls: TLSClientSettings = TLSClientSettings(),
                            session: JanusAudioBridgeSession) {
        self.init(loop: loop, endpoint: url.endpoint, tls: url.isSecure ? tls : nil, path: url.path, session: session)
    }

    deinit { close() }

    /// A fresh client per TCP connection: the handshake's state (key, accept check) belongs to one.
    private static func makeWebSocket() -> WebSocketClient {
        var nonce = [UInt8](repeating: 0, count: 16)
        var rng = SystemRandomNumberGenerator()
        for i in nonce.indices { nonce[i] = UInt8.random(in: 0 ... 255, using: &rng) }
        return WebSocketClient(nonce: nonce, sha1: WebSocketClient.sha1, maskSource: { UInt32.random(in: 0 ... .max) })
    }

    private var nowMs: UInt64 { (monotonicNanoseconds() - started) / 1_000_000 }

    /// The Host header: host[:port] as a browser would send it for this URL.
    public var hostHeader: String { JanusURL.hostHeader(host: endpoint.host, port: endpoint.port, secure: tls != nil) }

    /// Connects and joins with `offer` once the WebSocket is open. Throws what is wrong before
    /// any byte is sent (a bad path, an unreadable CA file or a bad pin, a name that does not
    /// resolve, no socket); whatever happens later comes out of `onOutput` as `.failed`.
    /// Several resolved addresses are tried in turn until one answers, except after a
    /// certificate refusal (every address of a name presents the same certificate).
    public func join(offer sdp: String, muted: Bool) throws(SystemError) {
        if let problem = JanusURL.pathProblem(path) { throw SystemError("Janus WebSocket \(problem)") }
        if let tls, tlsContext == nil { tlsContext = try TLSClientContext(settings: tls) }
        close()
        addresses = try endpoint.resolve()
        addressIndex = 0
        pendingOffer = (sdp, muted)
        ws = Self.makeWebSocket()
        while true {
            do {
                try connect(to: addresses[addressIndex])
                break
            } catch {
                guard addressIndex + 1 < addresses.count else { throw error }
                addressIndex += 1
            }
        }
        active = true
        timer = loop.schedule(after: .seconds(1), repeating: .seconds(1)) { [weak self] in
            guard let self else { return }
            let timeout = self.connectTimeout.components
            let timeoutMs = UInt64(max(0, timeout.seconds)) * 1000 + UInt64(max(0, timeout.attoseconds) / 1_000_000_000_000_000)
            if !self.isOpen, self.connection != nil, self.nowMs - self.attemptStartedMs >= timeoutMs {
                self.attemptFailed("no WebSocket answer from \(self.peerAddress.map { "\($0)" } ?? self.endpoint.description) within \(self.connectTimeout)", final: false)
                return
            }
            self.session.tick(now: self.nowMs)
            self.pump()
        }
    }

    private func connect(to address: SocketAddress) throws(SystemError) {
        peerAddress = address
        attemptStartedMs = nowMs
        let stream = try StreamConnection.connect(to: address, loop: loop)
        let transport: any StreamTransport
        if let tlsContext {
            do {
                transport = try TLSConnection(stream: stream, role: .client(tlsContext, serverName: endpoint.host), loop: loop)
            } catch {
                stream.close()
                throw error
            }
        } else {
            transport = stream
        }
        transport.setEventHandler { [weak self, weak transport] event in
            guard let self, let transport else { return }
            self.handle(transport, event)
        }
        connection = transport
    }

    public func setMuted(_ muted: Bool) { session.setMuted(muted, now: nowMs); pump() }
    public func configure(muted: Bool, display: String) { session.configure(muted: muted, display: display, now: nowMs); pump() }
    public func moderate(_ request: String, participant: UInt64, secret: String) {
        session.moderate(request, participant: participant, secret: secret, now: nowMs)
        pump()
    }
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
        active = false
        stopTimer()
        dropConnection()
    }

    private func dropConnection() {
        connection?.setEventHandler(nil)
        connection?.close()
        connection = nil
        isOpen = false
        tlsSessionDescription = nil
    }

    private func stopTimer() {
        if let timer { loop.cancel(timer) }
        timer = nil
    }

    private func handle(_ c: any StreamTransport, _ event: StreamConnection.Event) {
        guard c === connection else { return }
        switch event {
        case .connected:
            tlsSessionDescription = (c as? TLSConnection)?.sessionDescription
            ws.open(host: hostHeader, path: path)
            pump()
        case .readable:
            reading: while c === connection {
                let result: StreamConnection.ReadResult
                do {
                    result = try readBuffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
                } catch {
                    attemptFailed("\(error)", final: false)
                    break
                }
                switch result {
                case .bytes(let n):
                    for event in ws.receive(readBuffer[0 ..< n]) { take(event) }
                case .endOfStream:
                    attemptFailed("Janus closed the WebSocket connection", final: false)
                    break reading
                case .wouldBlock:
                    break reading
                }
            }
            pump()
        case .drained:
            break
        case .closed(let error):
            // A certificate that fails its checks fails the same way at every address of the name.
            attemptFailed("\(error)", final: (c as? TLSConnection)?.failedCertificateChecks ?? false)
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
            attemptFailed("Janus closed the WebSocket (\(code)\(reason.isEmpty ? "" : ": " + reason))", final: true)
        }
    }

    private func pump() {
        for text in session.takeOutgoing() { ws.send(text: text) }
        let bytes = ws.takeOutgoing()
        if !bytes.isEmpty { _ = connection?.write(bytes) }
    }

    /// The connection ended. Before the WebSocket opened, the next resolved address gets its
    /// turn (unless `final`); otherwise the failure is reported with `reason` — for TLS, the
    /// sentence `RoomTLS` wrote, unchanged.
    private func attemptFailed(_ reason: String, final: Bool) {
        guard active else { return }
        var reason = reason
        if !isOpen, !final, pendingOffer != nil {
            while addressIndex + 1 < addresses.count {
                dropConnection()
                addressIndex += 1
                ws = Self.makeWebSocket()
                do {
                    try connect(to: addresses[addressIndex])
                    return
                } catch {
                    reason = "\(error)"
                }
            }
        }
        fail("Janus connection: \(reason)")
    }

    private func fail(_ why: String) {
        guard active else { return }
        close()
        if session.state != .left { onOutput?(.failed(why)) }
    }
}
