import Glibc

/// An IPv4, IPv6 or Unix socket address held inline (a `sockaddr_storage`, no heap), so
/// receiving a datagram's source address allocates nothing. Equality and hashing look at the
/// family, address, port (and IPv6 scope), or the Unix path — not at padding bytes.
///
/// Only numeric hosts are parsed: name resolution blocks and does not belong on the event loop.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Family: Sendable, Equatable { case ipv4, ipv6, unix, unspecified }

    var storage = sockaddr_storage()
    var length: socklen_t = 0

    /// An empty address (family unspecified), to be filled by `receive`.
    public init() {}

    /// "1.2.3.4:5" or "[::1]:5" (brackets required for IPv6).
    public init(parsing text: String) throws(SystemError) {
        func bad(_ why: String) -> SystemError { SystemError("address '\(text)': \(why)") }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("missing ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw bad("expected ':port' after ']'") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw bad("expected host:port") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { throw bad("write IPv6 addresses as [address]:port") }
        }
        guard let port = UInt16(portText) else { throw bad("port '\(portText)' is not a number 0-65535") }
        do {
            try self.init(ip: String(host), port: port)
        } catch {
            throw bad("'\(host)' is not a numeric IPv4 or IPv6 address")
        }
    }

    /// A numeric IPv4 ("127.0.0.1") or IPv6 ("::1", "fe80::1%eth0") address and a port.
    public init(ip: String, port: UInt16) throws(SystemError) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, ip, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            self.init(copying: &v4)
            return
        }
        var v6 = sockaddr_in6()
        var address = Substring(ip)
        if let percent = ip.firstIndex(of: "%") {
            let zone = String(ip[ip.index(after: percent)...])
            address = ip[..<percent]
            let index = UInt32(zone) ?? if_nametoindex(zone)
            if index == 0 { throw SystemError("address '\(ip)': unknown interface '\(zone)'") }
            v6.sin6_scope_id = index
        }
        if inet_pton(AF_INET6, String(address), &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            self.init(copying: &v6)
            return
        }
        throw SystemError("address '\(ip)': not a numeric IPv4 or IPv6 address")
    }

    /// A Unix socket path, or an abstract name written "@name".
    public init(unixPath path: String) throws(SystemError) {
        var un = sockaddr_un()
        un.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: un.sun_path)
        let abstract = bytes.first == UInt8(ascii: "@")
        // A path needs room for its NUL; an abstract name's leading NUL replaces the '@'.
        if bytes.isEmpty || bytes.count > capacity - (abstract ? 0 : 1) {
            throw SystemError("unix socket path '\(path)': empty or longer than \(capacity - 1) bytes")
        }
        if bytes.contains(0) { throw SystemError("unix socket path '\(path)': contains NUL") }
        withUnsafeMutableBytes(of: &un.sun_path) { raw in
            raw.copyBytes(from: bytes)
            if abstract { raw[0] = 0 }
        }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
        self.init(copying: &un)
        length = socklen_t(offset + bytes.count + (abstract ? 0 : 1))
    }

    public static func ipv4Loopback(port: UInt16) -> SocketAddress { try! SocketAddress(ip: "127.0.0.1", port: port) }
    public static func ipv6Loopback(port: UInt16) -> SocketAddress { try! SocketAddress(ip: "::1", port: port) }
    public static func ipv4Any(port: UInt16) -> SocketAddress { try! SocketAddress(ip: "0.0.0.0", port: port) }
    public static func ipv6Any(port: UInt16) -> SocketAddress { try! SocketAddress(ip: "::", port: port) }

    private init<T>(copying address: inout T) {
        withUnsafeMutableBytes(of: &storage) { dst in
            withUnsafeBytes(of: &address) { src in dst.copyMemory(from: src) }
        }
        length = socklen_t(MemoryLayout<T>.size)
    }

    public var family: Family {
        switch Int32(storage.ss_family) {
        case AF_INET: return .ipv4
        case AF_INET6: return .ipv6
        case AF_UNIX: return .unix
        default: return .unspecified
        }
    }

    /// The port of an IP address, nil otherwise.
    public var port: UInt16? {
        switch family {
        case .ipv4: return withIPv4 { UInt16(bigEndian: $0.sin_port) }
        case .ipv6: return withIPv6 { UInt16(bigEndian: $0.sin6_port) }
        default: return nil
        }
    }

    /// The numeric host ("127.0.0.1", "::1"), the Unix path ("@name" when abstract, "" when
    /// unnamed), or "" for an unspecified address.
    public var host: String {
        switch family {
        case .ipv4:
            return withIPv4 { a in
                var addr = a.sin_addr
                return Self.ntop(AF_INET, &addr)
            }
        case .ipv6:
            return withIPv6 { a in
                var addr = a.sin6_addr
                let text = Self.ntop(AF_INET6, &addr)
                return a.sin6_scope_id == 0 ? text : "\(text)%\(a.sin6_scope_id)"
            }
        case .unix:
            let bytes = unixPathBytes
            if bytes.first == 0 { return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self) }
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        case .unspecified:
            return ""
        }
    }

    public var description: String {
        switch family {
        case .ipv4: return "\(host):\(port ?? 0)"
        case .ipv6: return "[\(host)]:\(port ?? 0)"
        case .unix: let h = host; return h.isEmpty ? "unix:(unnamed)" : "unix:\(h)"
        case .unspecified: return "(unspecified)"
        }
    }

    public static func == (a: SocketAddress, b: SocketAddress) -> Bool {
        guard a.storage.ss_family == b.storage.ss_family else { return false }
        switch a.family {
        case .ipv4:
            return a.withIPv4 { x in b.withIPv4 { y in
                x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr
            } }
        case .ipv6:
            return a.withIPv6 { x in b.withIPv6 { y in
                x.sin6_port == y.sin6_port && x.sin6_scope_id == y.sin6_scope_id
                    && withUnsafeBytes(of: x.sin6_addr) { p in withUnsafeBytes(of: y.sin6_addr) { q in p.elementsEqual(q) } }
            } }
        case .unix:
            return a.unixPathBytes.elementsEqual(b.unixPathBytes)
        case .unspecified:
            return true
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.ss_family)
        switch family {
        case .ipv4:
            withIPv4 { hasher.combine($0.sin_port); hasher.combine($0.sin_addr.s_addr) }
        case .ipv6:
            withIPv6 { a in
                hasher.combine(a.sin6_port)
                hasher.combine(a.sin6_scope_id)
                withUnsafeBytes(of: a.sin6_addr) { hasher.combine(bytes: $0) }
            }
        case .unix:
            unixPathBytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        case .unspecified:
            break
        }
    }

    // MARK: Glibc plumbing

    func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        var copy = storage
        return try withUnsafeMutableBytes(of: &copy) { (raw) throws(E) -> R in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    /// Lets a system call fill the address (`recvfrom`, `accept`, `getsockname`).
    mutating func fill<R>(_ body: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> R) -> R {
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutableBytes(of: &storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &len)
        }
        length = len
        return result
    }

    private func withIPv4<R>(_ body: (sockaddr_in) -> R) -> R {
        withUnsafeBytes(of: storage) { body($0.loadUnaligned(as: sockaddr_in.self)) }
    }

    private func withIPv6<R>(_ body: (sockaddr_in6) -> R) -> R {
        withUnsafeBytes(of: storage) { body($0.loadUnaligned(as: sockaddr_in6.self)) }
    }

    /// sun_path as far as `length` says: an abstract name with its leading NUL, a path without
    /// its terminating NUL (the kernel reports lengths with and without it).
    private var unixPathBytes: [UInt8] {
        let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
        guard Int(length) > offset else { return [] }
        let bytes = withUnsafeBytes(of: storage) { Array($0[offset..<min(Int(length), $0.count)]) }
        if bytes.first == 0 { return bytes }
        return Array(bytes.prefix { $0 != 0 })
    }

    private static func ntop(_ family: Int32, _ address: UnsafeRawPointer) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard inet_ntop(family, address, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
