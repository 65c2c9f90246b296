import CRoomTLS
import RoomSystem

/// A TLS 1.3 connection over a non-blocking `StreamConnection`, on the same event loop and
/// thread: OpenSSL works on memory buffers (CRoomTLS), this class moves ciphertext between
/// them and the socket. It keeps `StreamConnection`'s contract (`StreamTransport`):
///
/// - `.connected` after the handshake *and* the certificate checks (client); the server side
///   starts connected and reports `.readable` once application data arrives.
/// - A handshake or verification failure arrives as `.closed(error)` with a sentence an
///   installer can act on ("host name mismatch: certificate is for …, not …").
/// - `write` is all-or-nothing against `outgoingLimit`, counting the TLS record overhead, so
///   the socket's buffer never refuses ciphertext this class accepted.
/// - Level-triggered reading: a handler that stops reading while decrypted bytes remain is
///   called again from the loop (the socket alone would not wake it: the bytes left it).
public final class TLSConnection: StreamTransport {
    public enum Role {
        case client(TLSClientContext, serverName: String)
        case server(TLSServerContext)
    }

    public let stream: StreamConnection
    private let raw: OpaquePointer
    private let role: Role
    private var loop: EventLoop
    private var handler: ((StreamConnection.Event) -> Void)?
    public private(set) var isHandshakeComplete = false
    /// The connection failed because the server's certificate did not pass a check (chain,
    /// validity, name or pin): retrying will not help until someone fixes the configuration.
    public private(set) var failedCertificateChecks = false
    /// Plaintext written before the handshake finished.
    private var early: [UInt8] = []
    private var peerEnded = false
    private var failed = false
    private var sawWouldBlock = false
    private var renotifyTimer: EventLoop.TimerID?
    private var closing = false

    /// While true, no `.readable` events, and once `inputHighWater` bytes wait here the socket is
    /// not read either: the peer's writes then back up in TCP, as with a plain connection.
    public var isReadingPaused = false {
        didSet {
            guard oldValue != isReadingPaused else { return }
            updateSocketReading()
            if !isReadingPaused && isHandshakeComplete && roomtls_buffered_input(raw) > 0 { scheduleRenotify() }
        }
    }
    /// Most received bytes held in OpenSSL's buffers before the socket is left unread.
    public static let inputHighWater = 64 * 1024

    /// "TLSv1.3 TLS_AES_256_GCM_SHA384" once the handshake is done.
    public private(set) var sessionDescription = ""
    /// From the first handshake step (client: TCP connected) to the checks passed.
    public private(set) var handshakeDuration: Duration?
    private var handshakeStartNs: UInt64?

    /// Client: starts the handshake once `stream` connects (it must not be connected yet).
    /// Server: `stream` is an accepted connection; the handshake starts with the client's bytes.
    public init(stream: StreamConnection, role: Role, loop: EventLoop) throws(SystemError) {
        var error = [CChar](repeating: 0, count: 256)
        let conn: OpaquePointer?
        switch role {
        case .client(let context, let serverName):
            conn = roomtls_conn_new(context.raw, 0, context.settings.serverName ?? serverName,
                                    context.acceptsUntrustedChain ? 1 : 0, &error, error.count)
        case .server(let context):
            conn = roomtls_conn_new(context.raw, 1, nil, 0, &error, error.count)
        }
        guard let conn else { throw SystemError("TLS: \(cText(error))") }
        raw = conn
        self.stream = stream
        self.role = role
        self.loop = loop
        stream.handler = { [weak self] _, event in self?.streamEvent(event) }
    }

    deinit {
        if let renotifyTimer { loop.cancel(renotifyTimer) }
        stream.handler = nil
        stream.close()
        roomtls_conn_free(raw)
    }

    // MARK: StreamTransport

    public func setEventHandler(_ handler: ((StreamConnection.Event) -> Void)?) { self.handler = handler }
    public var peerAddress: SocketAddress { stream.peerAddress }
    public var isOpen: Bool { stream.isOpen }
    public var bufferedByteCount: Int { stream.bufferedByteCount + early.count }
    public var outgoingLimit: Int { stream.outgoingLimit }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> StreamConnection.ReadResult {
        guard isHandshakeComplete, stream.isOpen, !buffer.isEmpty else { return .wouldBlock }
        let n = roomtls_read(raw, buffer.baseAddress, buffer.count)
        flushOutput()  // a key update is answered from inside a read
        if stream.isReadingPaused { updateSocketReading() }
        if n > 0 { return .bytes(n) }
        switch Int32(n) {
        case Int32(ROOMTLS_WANT_MORE):
            sawWouldBlock = true
            return peerEnded ? .endOfStream : .wouldBlock
        case Int32(ROOMTLS_CLOSED):
            return .endOfStream
        default:
            throw SystemError("TLS from \(peerAddress): \(errorText())")
        }
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> StreamConnection.WriteResult {
        guard stream.isOpen, !closing, !failed else { return .closed }
        if bytes.isEmpty { return .accepted }
        if bufferedByteCount + Self.ciphertextBound(bytes.count) > outgoingLimit { return .backpressure }
        guard isHandshakeComplete else {
            early.append(contentsOf: bytes)
            return .accepted
        }
        let n = bytes.withUnsafeBytes { roomtls_write(raw, $0.baseAddress, $0.count) }
        guard n == bytes.count else {
            failLater(SystemError("TLS to \(peerAddress): \(errorText())"))
            return .closed
        }
        flushOutput()
        return stream.isOpen ? .accepted : .closed
    }

    public func close() {
        closing = true
        stream.close()
        early = []
    }

    /// Sends a close_notify after what is queued, then closes.
    public func closeAfterFlush() {
        guard stream.isOpen else { return }
        closing = true
        if isHandshakeComplete {
            roomtls_shutdown(raw)
            flushOutput()
        }
        stream.closeAfterFlush()
    }

    /// After the handshake only (the server's connections move once their `hello` names a
    /// room): a connection that failed or is closing stays where it is.
    public func leaveLoop() -> Bool {
        guard isHandshakeComplete, !failed, !closing, stream.isOpen, early.isEmpty else { return false }
        guard stream.leaveLoop() else { return false }
        if let renotifyTimer { loop.cancel(renotifyTimer) }
        renotifyTimer = nil
        return true
    }

    public func joinLoop(_ loop: EventLoop) throws(SystemError) {
        self.loop = loop
        try stream.joinLoop(loop)
        // Decrypted bytes already in OpenSSL would not wake the new loop: the socket has none.
        if !isReadingPaused && (roomtls_buffered_input(raw) > 0 || peerEnded) { scheduleRenotify() }
    }

    /// The most ciphertext `count` plaintext bytes become: TLS 1.3 records carry at most 16 KiB,
    /// each with a 5-byte header, the content-type byte and a 16-byte AEAD tag.
    static func ciphertextBound(_ count: Int) -> Int { count + (count / 16384 + 1) * 22 }

    // MARK: Engine

    private func streamEvent(_ event: StreamConnection.Event) {
        switch event {
        case .connected:
            advance()
        case .readable:
            pull()
        case .drained:
            if isHandshakeComplete { handler?(.drained) }
        case .closed(let error):
            if isHandshakeComplete {
                handler?(.closed(error))
            } else {
                failed = true
                handler?(.closed(SystemError("TLS handshake with \(peerAddress): \(error)", errno: error.errno)))
            }
        }
    }

    /// Moves what the socket has into OpenSSL, then lets it work.
    private func pull() {
        for _ in 0 ..< 4 where roomtls_buffered_input(raw) < Self.inputHighWater {
            let result: StreamConnection.ReadResult
            do {
                result = try stream.read(into: loop.scratch)
            } catch {
                fail(error)
                return
            }
            switch result {
            case .bytes(let n):
                let ok = roomtls_feed(raw, loop.scratch.baseAddress, n)
                if ok != 0 { fail(SystemError("TLS from \(peerAddress): cannot buffer received data")); return }
                continue
            case .endOfStream:
                peerEnded = true
            case .wouldBlock:
                break
            }
            break
        }
        advance()
    }

    private func advance() {
        guard stream.isOpen, !failed else { return }
        if !isHandshakeComplete {
            if handshakeStartNs == nil { handshakeStartNs = monotonicNanoseconds() }
            let rc = roomtls_handshake(raw)
            flushOutput()
            guard stream.isOpen else { return }
            switch rc {
            case Int32(ROOMTLS_DONE):
                if let problem = checkPin() {
                    failedCertificateChecks = true
                    fail(SystemError("TLS to \(peerAddress): \(problem)"))
                    return
                }
                var text = [CChar](repeating: 0, count: 128)
                roomtls_session_description(raw, &text, text.count)
                sessionDescription = cText(text)
                isHandshakeComplete = true
                if let start = handshakeStartNs { handshakeDuration = .nanoseconds(Int64(monotonicNanoseconds() &- start)) }
                if !early.isEmpty {
                    let queued = early
                    early = []
                    let n = queued.withUnsafeBytes { roomtls_write(raw, $0.baseAddress, $0.count) }
                    if n != queued.count { fail(SystemError("TLS to \(peerAddress): \(errorText())")); return }
                    flushOutput()
                }
                if case .client = role { handler?(.connected) }
            case Int32(ROOMTLS_WANT_MORE):
                if peerEnded { fail(SystemError(handshakeFailure(closedByPeer: true))) }
                return
            default:
                fail(SystemError(handshakeFailure(closedByPeer: false)))
                return
            }
        }
        guard stream.isOpen, isHandshakeComplete else { return }
        updateSocketReading()
        if !isReadingPaused && (roomtls_buffered_input(raw) > 0 || peerEnded) { notifyReadable() }
    }

    /// The socket is read unless the caller paused reading or does not keep up.
    private func updateSocketReading() {
        guard stream.isOpen else { return }
        let full = roomtls_buffered_input(raw) >= Self.inputHighWater
        stream.isReadingPaused = isHandshakeComplete && (isReadingPaused || full)
    }

    private func notifyReadable() {
        sawWouldBlock = false
        handler?(.readable)
        // The handler stopped before `.wouldBlock`: what is left would wait for the next packet.
        if stream.isOpen && !sawWouldBlock && (roomtls_buffered_input(raw) > 0 || peerEnded) { scheduleRenotify() }
    }

    private func scheduleRenotify() {
        guard renotifyTimer == nil else { return }
        renotifyTimer = loop.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            self.renotifyTimer = nil
            if self.stream.isOpen && !self.failed && !self.isReadingPaused { self.notifyReadable() }
        }
    }

    /// Hands OpenSSL's output to the socket.
    private func flushOutput() {
        while stream.isOpen {
            let n = roomtls_take_output(raw, loop.scratch.baseAddress, loop.scratch.count)
            if n == 0 { return }
            switch stream.write(UnsafeRawBufferPointer(rebasing: loop.scratch[0 ..< n])) {
            case .accepted: continue
            case .backpressure:
                failLater(SystemError("TLS to \(peerAddress): more than \(outgoingLimit) bytes queued"))
                return
            case .closed:
                return
            }
        }
    }

    private func errorText() -> String {
        var text = [CChar](repeating: 0, count: 256)
        roomtls_error_text(raw, &text, text.count)
        let s = cText(text)
        return s.isEmpty ? "protocol error" : s
    }

    private func peerText(_ f: (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int) -> Int32) -> String {
        var text = [CChar](repeating: 0, count: 1024)
        _ = f(raw, &text, text.count)
        return cText(text)
    }

    /// The sentence for a failed handshake: the certificate check that failed, in the words
    /// an installer needs, or OpenSSL's reason with a hint for the usual mix-up.
    private func handshakeFailure(closedByPeer: Bool) -> String {
        let code = roomtls_verify_error(raw)
        let prefix = "TLS to \(peerAddress)"
        if code != 0, case .client(let context, let serverName) = role {
            failedCertificateChecks = true
            switch code {
            case Int32(ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT), Int32(ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY),
                 Int32(ROOMTLS_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE), Int32(ROOMTLS_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT),
                 Int32(ROOMTLS_V_ERR_SELF_SIGNED_CERT_IN_CHAIN):
                return "\(prefix): certificate verify failed: \(String(cString: roomtls_verify_error_string(code))) (wrong CA?)"
            case Int32(ROOMTLS_V_ERR_CERT_HAS_EXPIRED):
                return "\(prefix): certificate has expired (notAfter \(peerText(roomtls_peer_not_after)))"
            case Int32(ROOMTLS_V_ERR_CERT_NOT_YET_VALID):
                return "\(prefix): certificate is not yet valid (is the appliance's clock right?)"
            case Int32(ROOMTLS_V_ERR_HOSTNAME_MISMATCH), Int32(ROOMTLS_V_ERR_IP_ADDRESS_MISMATCH):
                let names = peerText(roomtls_peer_names)
                return "\(prefix): host name mismatch: certificate is for \(names.isEmpty ? "no name" : names), not \(context.settings.serverName ?? serverName)"
            default:
                return "\(prefix): certificate verify failed: \(String(cString: roomtls_verify_error_string(code)))"
            }
        }
        if closedByPeer { return "\(prefix): the peer closed the connection during the TLS handshake (a plain listener, or it refused our certificate checks?)" }
        let reason = errorText()
        switch reason {
        case "wrong version number", "packet length too long", "record layer failure", "http request", "unexpected eof while reading":
            return "\(prefix): TLS handshake failed: \(reason) (is the other side speaking plain signalling, not TLS?)"
        default:
            return "\(prefix): TLS handshake failed: \(reason)"
        }
    }

    /// Client with pins: the server's key must be one of them.
    private func checkPin() -> String? {
        guard case .client(let context, _) = role, !context.settings.pins.isEmpty else { return nil }
        let presented = peerText(roomtls_peer_spki_pin)
        if context.settings.pins.contains(presented) { return nil }
        return "SPKI pin mismatch: server presented \(presented.isEmpty ? "no certificate" : presented)"
    }

    private func fail(_ error: SystemError) {
        guard !failed else { return }
        failed = true
        stream.close()
        handler?(.closed(error))
    }

    /// A failure inside `write`: reported from the loop, not into the caller that is writing.
    private func failLater(_ error: SystemError) {
        guard !failed else { return }
        failed = true
        stream.close()
        loop.schedule(after: .zero) { [weak self] in self?.handler?(.closed(error)) }
    }
}
