import Glibc

/// Which of this machine's addresses to offer a peer: what an ICE host candidate must be.
public enum LocalAddress {
    /// The address the kernel would send from to reach `destination` (a connected UDP socket's
    /// own address: nothing is sent). Nil when there is no route.
    public static func source(toward destination: SocketAddress) -> SocketAddress? {
        let fd = socket(destination.family == .ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        let connected = destination.withSockAddr { address, length in Glibc.connect(fd, address, length) }
        guard connected == 0 else { return nil }
        var local = SocketAddress()
        guard local.fill({ getsockname(fd, $0, $1) }) == 0 else { return nil }
        return local
    }

    /// The first IPv4 address of an interface that is up and not loopback, with its name.
    /// Media servers built on libnice (Janus) gather no loopback candidates, so even a server on
    /// this machine must be reached on such an address (docs/janus.md).
    public static func firstNonLoopbackIPv4() -> (interface: String, address: String)? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET),
                  entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0,
                  entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var a = sin.pointee.sin_addr
                _ = inet_ntop(AF_INET, &a, &text, socklen_t(INET_ADDRSTRLEN))
            }
            let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return (String(decoding: Array(UnsafeBufferPointer(start: entry.pointee.ifa_name, count: strlen(entry.pointee.ifa_name))).map { UInt8(bitPattern: $0) }, as: UTF8.self), address)
        }
        return nil
    }

    /// The host candidate for reaching `destination`: the route's source address, or, when the
    /// route is loopback (a server on this machine), the first non-loopback IPv4 address.
    public static func hostCandidate(toward destination: SocketAddress) -> String? {
        if let source = source(toward: destination), !source.host.hasPrefix("127."), source.host != "::1" {
            return source.host
        }
        return firstNonLoopbackIPv4()?.address
    }
}
