import RoomSystem
import RoomTLS

/// How the agent reaches its registrar over TLS: the CA and name the registrar's certificate
/// is checked against (RoomTLS: a CA file or the system's store, and always the host name).
public struct SIPTLSSettings {
    public let context: TLSClientContext
    /// The name the registrar's certificate must carry (its host name, or its address).
    public let serverName: String

    public init(context: TLSClientContext, serverName: String) {
        self.context = context
        self.serverName = serverName
    }
}

/// The agent's one TLS connection to its registrar, which is also its outbound proxy (RFC 3261
/// §18 over TLS): every request the agent sends goes out on it, and requests for the appliance
/// (calls in) come back on it — the appliance does not listen, the proxy reuses the
/// connection the REGISTER came on (it finds it by the Contact's address, which is this
/// connection's own; RFC 5626 §3 for why a client behind a registrar works that way).
///
/// What it does beside carrying bytes: cuts the stream into messages (`SIPStreamFramer`,
/// budgets included), sends RFC 5626 §4.4.1 keep-alives (CRLF CRLF) so the proxy and any NAT
/// keep the idle connection, counts a connection whose pong stopped coming as lost, and
/// reconnects after a loss with a doubling delay. Loop-thread only.
final class SIPTLSLink {
    enum Loss {
        /// The registrar's certificate failed a check: the same will fail again until someone
        /// fixes the configuration or the certificate.
        case certificate(String)
        case connection(String)

        var reason: String {
            switch self {
            case .certificate(let s), .connection(let s): s
            }
        }
    }

    let loop: EventLoop
    let destination: SocketAddress
    let settings: SIPTLSSettings
    /// A CRLF CRLF this often while connected (RFC 5626 §4.4.1 recommends 95-120 s for
    /// connection-oriented flows; 25 s stays well inside kamailio's default 120 s
    /// `tcp_connection_lifetime` and the idle time-outs of common NATs).
    var keepAliveInterval: Duration = .seconds(25)
    /// A ping unanswered this long means the flow failed (RFC 5626 §4.4.1: 10 s). Only
    /// enforced once the peer has answered one ping: a proxy that never sends pongs is not
    /// thereby broken.
    var pongTimeout: Duration = .seconds(10)
    /// The first delay before reconnecting; it doubles up to `maximumReconnectDelay`.
    var firstReconnectDelay: Duration = .seconds(1)
    var maximumReconnectDelay: Duration = .seconds(60)

    /// Called on the loop when a connection is up and its certificate checks passed.
    var onConnected: (() -> Void)?
    /// One whole message received (the bytes, without a NUL).
    var onMessage: ((UnsafeRawBufferPointer) -> Void)?
    /// The connection failed or was closed by the peer; a reconnect is scheduled already.
    var onLost: ((Loss) -> Void)?

    private(set) var connection: TLSConnection?
    private(set) var isConnected = false
    /// The connection's local address while connected (what Via and Contact carry).
    private(set) var localAddress: SocketAddress?
    private(set) var connectsStarted = 0
    private(set) var pingsSent = 0
    private(set) var pongsReceived = 0
    /// Framing errors that closed a connection (oversize, no Content-Length).
    private(set) var framingErrors = 0

    private var framer = SIPStreamFramer()
    private var readBuffer: UnsafeMutableRawBufferPointer
    private var keepAliveTimer: EventLoop.TimerID?
    private var pongTimer: EventLoop.TimerID?
    private var reconnectTimer: EventLoop.TimerID?
    private var nextDelay: Duration
    private var peerAnswersPings = false
    private var closed = false

    init(loop: EventLoop, destination: SocketAddress, settings: SIPTLSSettings) {
        self.loop = loop
        self.destination = destination
        self.settings = settings
        readBuffer = .allocate(byteCount: 16 * 1024, alignment: 8)
        nextDelay = .seconds(1)
    }

    deinit {
        close()
        readBuffer.deallocate()
    }

    /// Connects unless connected, connecting, or waiting to reconnect.
    func connect() {
        guard !closed, connection == nil, reconnectTimer == nil else { return }
        connectsStarted += 1
        do {
            let stream = try StreamConnection.connect(to: destination, loop: loop, outgoingLimit: 256 * 1024)
            let tls = try TLSConnection(stream: stream, role: .client(settings.context, serverName: settings.serverName), loop: loop)
            tls.setEventHandler { [weak self, weak tls] event in
                guard let self, let tls, tls === self.connection else { return }
                self.event(event)
            }
            connection = tls
        } catch {
            lost(.connection("connect to \(destination): \(error)"))
        }
    }

    /// A registration succeeded on this connection: the next loss starts the backoff again.
    func connectionProved() { nextDelay = firstReconnectDelay }

    /// Sends bytes on the connection; false when there is none or it would not take them.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        guard isConnected, let connection else { return false }
        switch connection.write(bytes) {
        case .accepted: return true
        case .backpressure:
            // The proxy does not read: a stream cannot drop one message and carry on.
            drop(.connection("the registrar at \(destination) does not read (more than \(connection.outgoingLimit) bytes queued)"))
            return false
        case .closed: return false
        }
    }

    /// Closes the connection (politely) and stops reconnecting.
    func close() {
        closed = true
        if let t = reconnectTimer { loop.cancel(t); reconnectTimer = nil }
        stopTimers()
        connection?.setEventHandler(nil)
        connection?.closeAfterFlush()
        connection = nil
        isConnected = false
    }

    /// Ends the current connection (a test's way to see a reconnect; also a framing error's).
    func drop(_ loss: Loss) {
        guard connection != nil else { return }
        connection?.setEventHandler(nil)
        connection?.close()
        lost(loss)
    }

    // MARK: Events

    private func event(_ event: StreamConnection.Event) {
        switch event {
        case .connected:
            isConnected = true
            localAddress = connection?.stream.localAddress
            peerAnswersPings = false
            framer.reset()
            scheduleKeepAlive()
            onConnected?()
        case .readable:
            readAvailable()
        case .drained:
            break
        case .closed(let error):
            if connection?.failedCertificateChecks == true {
                lost(.certificate("\(error)"))
            } else {
                lost(.connection("\(error)"))
            }
        }
    }

    private func readAvailable() {
        // At most 64 KiB a wake-up: TLSConnection calls again while decrypted bytes remain.
        for _ in 0 ..< 4 {
            guard let connection else { return }
            let result: StreamConnection.ReadResult
            do { result = try connection.read(into: readBuffer) } catch {
                lost(.connection("\(error)"))
                return
            }
            switch result {
            case .bytes(let n):
                let items: [SIPStreamFramer.Item]
                do throws(SIPStreamFramer.FramingError) {
                    items = try framer.append(UnsafeRawBufferPointer(rebasing: readBuffer[0 ..< n]))
                } catch {
                    framingErrors += 1
                    Log.warning("sip: closing the TLS connection to \(destination): \(error)")
                    drop(.connection("the registrar at \(destination) sent \(error)"))
                    return
                }
                for item in items {
                    guard self.connection === connection else { return }
                    switch item {
                    case .message(let bytes): bytes.withUnsafeBytes { onMessage?($0) }
                    case .ping: _ = send(Array("\r\n".utf8))
                    case .pong:
                        pongsReceived += 1
                        peerAnswersPings = true
                        if let t = pongTimer { loop.cancel(t); pongTimer = nil }
                    }
                }
            case .endOfStream:
                lost(.connection("the registrar at \(destination) closed the connection"))
                return
            case .wouldBlock:
                return
            }
        }
    }

    private func lost(_ loss: Loss) {
        stopTimers()
        if let connection {
            connection.setEventHandler(nil)
            connection.close()
        }
        connection = nil
        isConnected = false
        localAddress = nil
        framer.reset()
        guard !closed else { return }
        // A certificate that failed will fail again at once: wait the longest delay.
        let delay: Duration
        if case .certificate = loss {
            delay = maximumReconnectDelay
        } else {
            delay = nextDelay
            nextDelay = min(nextDelay * 2, maximumReconnectDelay)
        }
        if let t = reconnectTimer { loop.cancel(t) }
        reconnectTimer = loop.schedule(after: delay) { [weak self] in
            self?.reconnectTimer = nil
            self?.connect()
        }
        // Reported from the loop: a loss found inside a send (from osip's callback) must not
        // run the agent's reaction inside osip's step.
        loop.schedule(after: .zero) { [weak self] in
            guard let self, !self.closed else { return }
            self.onLost?(loss)
        }
    }

    private func stopTimers() {
        if let t = keepAliveTimer { loop.cancel(t); keepAliveTimer = nil }
        if let t = pongTimer { loop.cancel(t); pongTimer = nil }
    }

    private func scheduleKeepAlive() {
        if let t = keepAliveTimer { loop.cancel(t) }
        keepAliveTimer = loop.schedule(after: keepAliveInterval) { [weak self] in
            guard let self else { return }
            self.keepAliveTimer = nil
            guard self.isConnected else { return }
            self.pingsSent += 1
            self.send(Array("\r\n\r\n".utf8))
            if self.peerAnswersPings, self.pongTimer == nil {
                self.pongTimer = self.loop.schedule(after: self.pongTimeout) { [weak self] in
                    guard let self else { return }
                    self.pongTimer = nil
                    self.drop(.connection("no keep-alive answer from the registrar at \(self.destination) in \(self.pongTimeout)"))
                }
            }
            self.scheduleKeepAlive()
        }
    }
}
