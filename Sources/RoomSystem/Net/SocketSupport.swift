import Glibc

/// Small wrappers shared by the socket types. Every socket is non-blocking and close-on-exec.
enum SocketSupport {
    static func open(family: Int32, type: Int32, what: String) throws(SystemError) -> Int32 {
        let fd = socket(family, type | LinuxAPI.socketFlags, 0)
        if fd < 0 { throw .errno("socket (\(what))") }
        return fd
    }

    static func domain(of address: SocketAddress) -> Int32 {
        switch address.family {
        case .ipv4: return AF_INET
        case .ipv6: return AF_INET6
        case .unix: return AF_UNIX
        case .unspecified: return AF_UNSPEC
        }
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws(SystemError) {
        var v = value
        if setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) != 0 { throw .errno("setsockopt \(what)") }
    }

    static func bind(_ fd: Int32, _ address: SocketAddress) throws(SystemError) {
        let rc = address.withSockAddr { Glibc.bind(fd, $0, $1) }
        if rc != 0 { throw .errno("bind \(address)") }
    }

    /// An IP socket of `type` bound to `address` (IPv6 sockets are v6-only, so a v4 and a v6
    /// socket can share a port); closed again if any step fails.
    static func openBound(_ address: SocketAddress, type: Int32, reuseAddress: Bool, reusePort: Bool = false,
                          what: String) throws(SystemError) -> Int32 {
        let fd = try open(family: domain(of: address), type: type, what: what)
        do {
            if reuseAddress { try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR") }
            if reusePort { try setOption(fd, SOL_SOCKET, SO_REUSEPORT, 1, "SO_REUSEPORT") }
            if address.family == .ipv6 { try setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1, "IPV6_V6ONLY") }
            try bind(fd, address)
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    static func localAddress(_ fd: Int32) -> SocketAddress {
        var a = SocketAddress()
        if a.fill({ getsockname(fd, $0, $1) }) != 0 { return SocketAddress() }
        return a
    }

    static func peerAddress(_ fd: Int32) -> SocketAddress {
        var a = SocketAddress()
        if a.fill({ getpeername(fd, $0, $1) }) != 0 { return SocketAddress() }
        return a
    }

    /// SO_ERROR: the outcome of a non-blocking connect, or a pending asynchronous error.
    static func pendingError(_ fd: Int32) -> Int32 {
        var code: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &len) != 0 { return errno }
        return code
    }

    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }
}
