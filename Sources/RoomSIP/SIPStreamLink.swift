import RoomSystem

/// One connection the agent's stream transport opened: the transport (a RoomTLS
/// `TLSConnection`, which keeps `StreamTransport`'s contract), this end's address once
/// connected, and whether a failure was the registrar's certificate.
public struct SIPConnectedStream {
    public let transport: any StreamTransport
    public let localAddress: () -> SocketAddress
    public let failedCertificateChecks: () -> Bool

    public init(transport: any StreamTransport, localAddress: @escaping () -> SocketAddress, failedCertificateChecks: @escaping () -> Bool) {
        self.transport = transport
        self.localAddress = localAddress
        self.failedCertificateChecks = failedCertificateChecks
    }
}

/// How the agent opens its connection to the registrar over TLS. The application makes it
/// (RoomAppliance, with RoomTLS's context: the CA file or the system's store, and the name the
/// certificate must carry): RoomSIP is an adapter of libosip2 and imports no other adapter, so
/// the certificate checks come in from the layer that wires both.
public struct SIPStreamConnector {
    /// As Via writes it ("TLS"); the Contact's `transport` parameter is its lower case.
    public let transportName: String
    /// Starts connecting to the registrar; `.connected` comes once the checks passed.
    public let connect: (SocketAddress, EventLoop) throws(SystemError) -> SIPConnectedStream

    public init(transportName: String, connect: @escaping (SocketAddress, EventLoop) throws(SystemError) -> SIPConnectedStream) {
        self.transportName = transportName
        self.connect = connect
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
final class SIPStreamLink {
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
    let connector: SIPStreamConnector
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

    private(set) var connection: SIPConnectedStream?
    private(set) var isConnected = false
    /// The connection's local address while connected (what Via and Contact carry).
    private(set) var localAddress: SocketAddress?
    private(set) var connectsStarted = 0
    private(set) var pongsReceived = 0

    private var framer = SIPStreamFramer()
    private var readBuffer: UnsafeMutableRawBufferPointer
    private var keepAliveTimer: EventLoop.TimerID?
    private var pongTimer: EventLoop.TimerID?
    private var reconnectTimer: EventLoop.TimerID?
    private var nextDelay: Duration
    private var peerAnswersPings = false
    private var closed = false

    init(loop: EventLoop, destination: SocketAddress, connector: SIPStreamConnector) {
        self.loop = loop
        self.destination = destination
        self.connector = connector
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
            let opened = try connector.connect(destination, loop)
            let transport = opened.transport
            transport.setEventHandler { [weak self, weak transport] event in
                guard let self, let transport, transport === self.connection?.transport else { return }
                self.event(event)
            }
            connection = opened
        } catch {
            lost(.connection("connect to \(destination): \(error)"))
        }
    }

    /// A registration succeeded on this connection: the next loss starts the backoff again.
    func connectionProved() { nextDelay = firstReconnectDelay }

    /// Sends bytes on the connection; false when there is none or it would not take them.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        guard isConnected, let connection = connection?.transport else { return false }
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
        connection?.transport.setEventHandler(nil)
        connection?.transport.closeAfterFlush()
        connection = nil
        isConnected = false
    }

    /// Ends the current connection (a test's way to see a reconnect; also a framing error's).
    func drop(_ loss: Loss) {
        guard let connection else { return }
        connection.transport.setEventHandler(nil)
        connection.transport.close()
        lost(loss)
    }

    // MARK: Events

    private func event(_ event: StreamConnection.Event) {
        switch event {
        case .connected:
            isConnected = true
            localAddress = connection?.localAddress()
            peerAnswersPings = false
            framer.reset()
            scheduleKeepAlive()
            onConnected?()
        case .readable:
            readAvailable()
        case .drained:
            break
        case .closed(let error):
            if connection?.failedCertificateChecks() == true {
                lost(.certificate("\(error)"))
            } else {
                lost(.connection("\(error)"))
            }
        }
    }

    private func readAvailable() {
        // At most 64 KiB a wake-up: TLSConnection calls again while decrypted bytes remain.
        for _ in 0 ..< 4 {
            guard let connection = connection?.transport else { return }
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
                    Log.warning("sip: closing the TLS connection to \(destination): \(error)")
                    drop(.connection("the registrar at \(destination) sent \(error)"))
                    return
                }
                for item in items {
                    guard self.connection?.transport === connection else { return }
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
            connection.transport.setEventHandler(nil)
            connection.transport.close()
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
