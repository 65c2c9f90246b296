import Glibc

/// Accepts stream connections on the loop (shared by `TCPListener` and `UnixListener`).
final class AcceptCore {
    let fd: Int32
    let loop: EventLoop
    let outgoingLimit: Int
    let name: String
    var onAccept: (StreamConnection) -> Void
    /// Set once listening: from then on it owns `fd`.
    private var descriptor: WatchedDescriptor?
    private var paused = false

    init(fd: Int32, name: String, loop: EventLoop, outgoingLimit: Int, onAccept: @escaping (StreamConnection) -> Void) {
        self.fd = fd
        self.name = name
        self.loop = loop
        self.outgoingLimit = outgoingLimit
        self.onAccept = onAccept
    }

    func start(backlog: Int32) throws(SystemError) {
        if listen(fd, backlog) != 0 {
            let error = SystemError.errno("listen \(name)")
            Glibc.close(fd)
            throw error
        }
        descriptor = try WatchedDescriptor(fd, loop: loop, interest: .readable) { [weak self] _ in self?.acceptPending() }
    }

    /// Accepts up to 64 connections per wake-up (level-triggered: the rest come next time), so
    /// a connection storm does not starve established peers.
    private func acceptPending() {
        for _ in 0..<64 {
            var peer = SocketAddress()
            let client = peer.fill { LinuxAPI.accept(fd, $0, $1) }
            if client < 0 {
                let e = errno
                switch e {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: level-triggered epoll would spin on the pending
                    // connection. Stop listening for a moment instead.
                    Log.warning("accept on \(name): \(SocketSupport.errorText(e)); pausing accepts for 100 ms")
                    pause()
                    return
                default:
                    if !Errno(rawValue: e).isWouldBlock { Log.warning("accept on \(name): \(SocketSupport.errorText(e))") }
                    return
                }
            }
            if peer.family != .unix {
                try? SocketSupport.setOption(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY")
            }
            let connection = StreamConnection(fd: client, peer: peer, connected: true, loop: loop, limit: outgoingLimit)
            do {
                try connection.attach(interest: .readable)
            } catch {
                Log.warning("accept on \(name): \(error)")
                continue // the connection closes as it goes out of scope
            }
            onAccept(connection)
            if descriptor?.isOpen != true { return } // closed by the callback
        }
    }

    private func pause() {
        guard let descriptor, descriptor.isOpen, !paused else { return }
        paused = true
        try? descriptor.modify(interest: [])
        loop.schedule(after: .milliseconds(100)) { [weak self] in
            guard let self, let descriptor = self.descriptor, descriptor.isOpen else { return }
            self.paused = false
            try? descriptor.modify(interest: .readable)
        }
    }

    func close() { descriptor?.close() }
}

/// A TCP listening socket (IPv4 or IPv6) on the loop. SO_REUSEADDR is set so a restarted
/// server binds at once; IPv6 sockets are IPv6-only (bind "0.0.0.0" and "::" separately), so
/// behaviour does not depend on the host's bindv6only sysctl. Port 0 picks an ephemeral port
/// (`localPort`). Accepted connections are handed to `onAccept` on the loop thread; keep a
/// reference, set `handler`, or they close when dropped.
public final class TCPListener {
    private let core: AcceptCore
    public let localAddress: SocketAddress
    public var localPort: UInt16 { localAddress.port ?? 0 }

    public init(
        address: SocketAddress, loop: EventLoop, backlog: Int32 = 1024, outgoingLimit: Int = 1 << 20,
        onAccept: @escaping (StreamConnection) -> Void
    ) throws(SystemError) {
        guard address.family == .ipv4 || address.family == .ipv6 else {
            throw SystemError("TCP listener \(address): not an IP address")
        }
        let fd = try SocketSupport.openBound(address, type: Int32(SOCK_STREAM.rawValue), reuseAddress: true, what: "listen \(address)")
        localAddress = SocketSupport.localAddress(fd)
        core = AcceptCore(fd: fd, name: "\(localAddress)", loop: loop, outgoingLimit: outgoingLimit, onAccept: onAccept)
        try core.start(backlog: backlog)
    }

    public var fileDescriptor: Int32 { core.fd }

    /// Stops listening; accepted connections stay open.
    public func close() { core.close() }
}

/// A Unix stream listening socket (the control socket). On start it replaces a stale socket
/// file left by a crashed daemon, but refuses when another process still listens on it or the
/// path is not a socket. The file gets `mode` (and `group` when given) right after bind; keep
/// it in a directory only the service can write (e.g. RuntimeDirectory) so the moment between
/// bind and chmod does not matter. `close()` removes the file if it is still ours.
/// "@name" listens on an abstract name (no file, no mode).
public final class UnixListener {
    private let core: AcceptCore
    public let path: String
    private var fileIdentity: (dev: UInt, ino: UInt)?

    public init(
        path: String, mode: mode_t = 0o660, group: gid_t? = nil, loop: EventLoop, backlog: Int32 = 64,
        outgoingLimit: Int = 1 << 20, onAccept: @escaping (StreamConnection) -> Void
    ) throws(SystemError) {
        let address = try SocketAddress(unixPath: path)
        let abstract = path.hasPrefix("@")
        if !abstract { try Self.removeStaleSocket(path, address) }
        let fd = try SocketSupport.open(family: AF_UNIX, type: Int32(SOCK_STREAM.rawValue), what: "listen \(path)")
        var bound = false
        do throws(SystemError) {
            try SocketSupport.bind(fd, address)
            bound = true
            if !abstract {
                if chmod(path, mode) != 0 { throw SystemError.errno("chmod \(path)") }
                if let group, chown(path, uid_t.max, group) != 0 { throw SystemError.errno("chown \(path) to group \(group)") }
            }
        } catch {
            Glibc.close(fd)
            if bound && !abstract { unlink(path) }
            throw error
        }
        self.path = path
        if !abstract {
            var st = stat()
            if lstat(path, &st) == 0 { fileIdentity = (UInt(st.st_dev), UInt(st.st_ino)) }
        }
        core = AcceptCore(fd: fd, name: path, loop: loop, outgoingLimit: outgoingLimit, onAccept: onAccept)
        do {
            try core.start(backlog: backlog)
        } catch {
            removeFile()
            throw error
        }
    }

    public var fileDescriptor: Int32 { core.fd }

    /// Stops listening and removes the socket file; accepted connections stay open.
    public func close() {
        core.close()
        removeFile()
    }

    deinit { close() }

    private func removeFile() {
        guard let id = fileIdentity else { return }
        fileIdentity = nil
        var st = stat()
        // Only if it is still the file we bound (a successor may have replaced it).
        if lstat(path, &st) == 0, UInt(st.st_dev) == id.dev, UInt(st.st_ino) == id.ino { unlink(path) }
    }

    private static func removeStaleSocket(_ path: String, _ address: SocketAddress) throws(SystemError) {
        var st = stat()
        if lstat(path, &st) != 0 { return } // nothing there
        if (st.st_mode & S_IFMT) != S_IFSOCK { throw SystemError("\(path): exists and is not a socket") }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if probe < 0 { throw .errno("socket (probe \(path))") }
        defer { Glibc.close(probe) }
        if address.withSockAddr({ Glibc.connect(probe, $0, $1) }) == 0 {
            throw SystemError("\(path): another process is listening on it")
        }
        if errno == ECONNREFUSED { unlink(path) }
    }
}
