import Glibc

/// Who is on the other end of a Unix stream socket (SO_PEERCRED, SO_PEERGROUPS): the
/// credentials the peer had when it connected — not whatever process holds that pid now.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    public let pid: pid_t
    public let uid: uid_t
    public let gid: gid_t
    /// Supplementary groups at connect time; nil where the kernel cannot say (before 4.13).
    public let groups: [gid_t]?
    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }

    public init(pid: pid_t, uid: uid_t, gid: gid_t, groups: [gid_t]? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }
}

/// TCP connections are stream connections.
public typealias TCPConnection = StreamConnection
/// Unix stream connections (the control socket) are stream connections.
public typealias UnixConnection = StreamConnection

/// A non-blocking TCP or Unix stream connection driven by an `EventLoop`, with a bounded
/// outgoing buffer. Loop-thread only (see `EventLoop`).
///
/// Ownership: the caller keeps the connection; the loop holds it only weakly, and dropping the
/// last reference closes it. The connection keeps its loop alive.
///
/// Events (to `handler`, on the loop thread):
/// - `.connected` — an outgoing connect completed (accepted connections start connected).
/// - `.readable` — call `read` (until `.wouldBlock`, or as much as you want to handle now: it
///   is level-triggered, you will be called again while data is waiting). `.endOfStream`
///   means the peer closed (or shut down its side): reply if you like, then `close()` or
///   `closeAfterFlush()`. A handler that ignores `.readable` is called again and again: set
///   `isReadingPaused` instead.
/// - `.drained` — the outgoing buffer emptied after having held data.
/// - `.closed(error)` — the system ended the connection (connect failed, reset, broken pipe, or
///   the peer hung up while reading was paused); the descriptor is already closed. Not sent for
///   `close()` or end of stream.
public final class StreamConnection {
    public enum Event {
        case connected
        case readable
        case drained
        case closed(SystemError)
    }

    public enum ReadResult: Equatable, Sendable {
        case bytes(Int)
        case wouldBlock
        case endOfStream
    }

    public enum WriteResult: Equatable, Sendable {
        /// Sent, or queued to send when the socket is writable.
        case accepted
        /// Not queued (nothing of it was sent): the outgoing buffer would exceed
        /// `outgoingLimit`. The peer is not reading; the caller decides — drop the message or
        /// cut the peer off.
        case backpressure
        /// The connection is closed.
        case closed
    }

    public typealias Handler = (StreamConnection, Event) -> Void

    public var handler: Handler?
    /// Most bytes the outgoing buffer may hold.
    public let outgoingLimit: Int
    /// The remote address (the zero `SocketAddress` for an unnamed Unix peer).
    public let peerAddress: SocketAddress
    public private(set) var isConnected: Bool
    public var isOpen: Bool { fd >= 0 }
    /// Bytes accepted by `write` and not yet handed to the kernel.
    public var bufferedByteCount: Int { pending.count - pendingHead }
    public var fileDescriptor: Int32 { fd }
    /// This end's address (the zero `SocketAddress` once closed or before the system chose
    /// one): what a SIP agent must put in its Via and Contact so the proxy can find this
    /// connection again.
    public var localAddress: SocketAddress { fd >= 0 ? SocketSupport.localAddress(fd) : SocketAddress() }
    /// While true the loop does not watch for incoming data (no `.readable` events): flow
    /// control, or a peer you are not ready to hear from. Level-triggered readiness means a
    /// connection with unread data and no reader would otherwise be reported on every
    /// iteration.
    public var isReadingPaused = false {
        didSet { if oldValue != isReadingPaused { updateInterest() } }
    }

    private var loop: EventLoop
    private var fd: Int32
    private var registration: EventLoop.IORegistration?
    private var pending: [UInt8] = []
    private var pendingHead = 0
    private var closeWhenDrained = false

    /// Starts connecting to `address` (IPv4, IPv6 or Unix); `.connected` or `.closed(error)`
    /// follows on the loop. Errors known at once (no such Unix socket, refused) are thrown.
    /// Writes before `.connected` are queued.
    public static func connect(
        to address: SocketAddress, loop: EventLoop, outgoingLimit: Int = 1 << 20, handler: Handler? = nil
    ) throws(SystemError) -> StreamConnection {
        let fd = try SocketSupport.open(family: SocketSupport.domain(of: address), type: Int32(SOCK_STREAM.rawValue),
                                        what: "connect \(address)")
        if address.family != .unix { try? SocketSupport.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY") }
        let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if rc != 0 && errno != EINPROGRESS {
            let e = errno
            Glibc.close(fd)
            throw .errno("connect \(address)", e)
        }
        // Connected or not, the completion is reported through the writable event, so the
        // caller sees `.connected` from the loop either way.
        let connection = StreamConnection(fd: fd, peer: address, connected: false, loop: loop, limit: outgoingLimit)
        connection.handler = handler
        do {
            try connection.attach(interest: .writable)
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    init(fd: Int32, peer: SocketAddress, connected: Bool, loop: EventLoop, limit: Int) {
        self.fd = fd
        self.peerAddress = peer
        self.isConnected = connected
        self.loop = loop
        self.outgoingLimit = limit
    }

    func attach(interest: EventLoop.Interest) throws(SystemError) {
        registration = try loop.register(fd, interest: interest) { [weak self] events in
            self?.handleIO(events)
        }
    }

    deinit { close() }

    // MARK: Moving to another loop

    /// Stops the loop watching the connection, keeping it open, so another loop's thread can
    /// take it with `joinLoop` (roomserver hands a joined connection to the worker that holds
    /// its room). Call on the current loop's thread; from then until `joinLoop` nothing may
    /// touch the connection. False, and nothing changed, when it cannot move: closed, or
    /// closing after a flush.
    public func leaveLoop() -> Bool {
        guard fd >= 0, isConnected, !closeWhenDrained, let registration else { return false }
        loop.deregister(registration)
        self.registration = nil
        return true
    }

    /// Continues on `loop` (call on its thread) after `leaveLoop`: what was queued to send
    /// still goes, and bytes that arrived meanwhile are reported as `.readable`.
    public func joinLoop(_ loop: EventLoop) throws(SystemError) {
        precondition(registration == nil && fd >= 0, "joinLoop without leaveLoop")
        self.loop = loop
        var interest: EventLoop.Interest = isReadingPaused ? [] : .readable
        if bufferedByteCount > 0 { interest.insert(.writable) }
        try attach(interest: interest)
    }

    // MARK: Reading and writing

    /// Reads what is available into `buffer`. Throws on a connection error (reset); the
    /// caller should then `close()`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> ReadResult {
        guard fd >= 0, isConnected else { return .wouldBlock }
        let n = retryingEINTR { recv(fd, buffer.baseAddress, buffer.count, 0) }
        if n > 0 { return .bytes(n) }
        if n == 0 { return buffer.isEmpty ? .wouldBlock : .endOfStream }
        let e = errno
        if Errno(rawValue: e).isWouldBlock { return .wouldBlock }
        throw .errno("read from \(peerAddress)", e)
    }

    /// Sends `bytes`, queueing what the kernel does not take now. All or nothing: a write that
    /// would push the buffer over `outgoingLimit` is refused whole (`.backpressure`), so the
    /// buffer never holds more than the limit and framing is never cut.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        guard fd >= 0, !closeWhenDrained else { return .closed }
        if bytes.isEmpty { return .accepted }
        if bufferedByteCount + bytes.count > outgoingLimit { return .backpressure }
        var offset = 0
        if bufferedByteCount == 0 && isConnected {
            while offset < bytes.count {
                let n = retryingEINTR { send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
                if n >= 0 { offset += n; continue }
                let e = errno
                if Errno(rawValue: e).isWouldBlock { break }
                failLater(.errno("write to \(peerAddress)", e))
                return .closed
            }
            if offset == bytes.count { return .accepted }
        }
        let wasEmpty = bufferedByteCount == 0
        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        if wasEmpty && isConnected { updateInterest() }
        return .accepted
    }

    @discardableResult
    public func write(_ bytes: [UInt8]) -> WriteResult {
        bytes.withUnsafeBytes { write($0) }
    }

    @discardableResult
    public func write(_ text: String) -> WriteResult {
        var copy = text
        return copy.withUTF8 { write(UnsafeRawBufferPointer($0)) }
    }

    // MARK: Closing

    /// Closes now, dropping unsent bytes. No event follows. Safe to call twice.
    public func close() {
        guard fd >= 0 else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        Glibc.close(fd)
        fd = -1
        pending = []
        pendingHead = 0
    }

    /// Stops reading and accepting writes, sends what is queued, then closes (no event). For
    /// "send an error, then hang up". A peer that never reads keeps it open: pair it with a
    /// timer that calls `close()`.
    public func closeAfterFlush() {
        guard fd >= 0 else { return }
        closeWhenDrained = true
        if bufferedByteCount == 0 { close() } else { updateInterest() }
    }

    /// Ends the sending side (shutdown SHUT_WR): the peer reads end of stream after what was
    /// sent, and this side can still read. Call once the outgoing buffer is empty (`.drained`,
    /// or `bufferedByteCount == 0`); bytes still queued would not go out.
    public func shutdownWriting() {
        guard fd >= 0 else { return }
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    /// The peer's pid/uid/gid (Unix sockets; SO_PEERCRED).
    public func peerCredentials() throws(SystemError) -> PeerCredentials {
        guard let cred = LinuxAPI.peerCredentials(fd) else { throw .errno("SO_PEERCRED") }
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid, groups: LinuxAPI.peerGroups(fd))
    }

    // MARK: Loop side

    private func handleIO(_ events: EventLoop.IOEvents) {
        if !isConnected {
            let code = SocketSupport.pendingError(fd)
            if code != 0 {
                fail(.errno("connect to \(peerAddress)", code))
                return
            }
            guard events.contains(.writable) || events.contains(.hangup) else { return }
            isConnected = true
            updateInterest()
            handler?(self, .connected)
            return
        }
        if events.contains(.error) {
            let code = SocketSupport.pendingError(fd)
            if code != 0 { fail(.errno("connection to \(peerAddress)", code)); return }
        }
        if events.contains(.writable) {
            flush()
            if fd < 0 { return }
        }
        if events.contains(.hangup) && (isReadingPaused || closeWhenDrained) {
            // EPOLLHUP: both directions are shut — the peer is gone, nothing can be written — and
            // epoll reports it whatever the interest. A connection that stopped reading would be
            // woken for it forever: roomd spun at ~90 % of a core after an interrupted
            // `roomctl events` (a subscriber keeps its connection with reading paused).
            fail(.errno("connection to \(peerAddress) hung up", EPIPE))
            return
        }
        if (events.contains(.readable) || events.contains(.hangup)) && !closeWhenDrained {
            handler?(self, .readable)
        }
    }

    private func flush() {
        while pendingHead < pending.count {
            let n = retryingEINTR {
                pending.withUnsafeBytes { raw in
                    send(fd, raw.baseAddress! + pendingHead, raw.count - pendingHead, Int32(MSG_NOSIGNAL))
                }
            }
            if n >= 0 { pendingHead += n; continue }
            let e = errno
            if Errno(rawValue: e).isWouldBlock { break }
            fail(.errno("write to \(peerAddress)", e))
            return
        }
        if pendingHead < pending.count {
            // Compact once the sent prefix dominates, so memory stays within ~2x the limit.
            if pendingHead > 65536 && pendingHead * 2 > pending.count {
                pending.removeSubrange(0..<pendingHead)
                pendingHead = 0
            }
            return
        }
        // Drained: give back a large buffer, stop asking for writability.
        if pending.capacity > 65536 { pending = [] } else { pending.removeAll(keepingCapacity: true) }
        pendingHead = 0
        if closeWhenDrained { close(); return }
        updateInterest()
        handler?(self, .drained)
    }

    private func updateInterest() {
        guard let registration else { return }
        var interest: EventLoop.Interest = closeWhenDrained || isReadingPaused ? [] : .readable
        if bufferedByteCount > 0 || !isConnected { interest.insert(.writable) } // connect completes as writable
        do {
            try loop.modify(registration, interest: interest)
        } catch {
            fail(error)
        }
    }

    private func fail(_ error: SystemError) {
        close()
        handler?(self, .closed(error))
    }

    /// A failure seen inside `write`: close now, report from the loop (not re-entrantly into
    /// the caller that is writing, e.g. while it iterates its connections).
    private func failLater(_ error: SystemError) {
        close()
        loop.schedule(after: .zero) { [weak self] in
            guard let self else { return }
            self.handler?(self, .closed(error))
        }
    }
}
