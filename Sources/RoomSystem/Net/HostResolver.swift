import Glibc

/// A signalling server as the installer wrote it: a host (name or numeric address) and a port.
/// Names are resolved when a connection is attempted, so an appliance that boots before its
/// DNS works, or whose server moved to another address, gets there on a later attempt.
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    /// A DNS name, or a numeric address (IPv6 without brackets).
    public var host: String
    public var port: UInt16
    /// Set when `host` is numeric: no lookup needed.
    public let numericAddress: SocketAddress?

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
        numericAddress = try? SocketAddress(ip: host, port: port)
    }

    /// A numeric address as an endpoint.
    public init(address: SocketAddress) {
        host = address.host
        port = address.port ?? 0
        numericAddress = address
    }

    /// "name:port", "1.2.3.4:port" or "[v6]:port".
    public init(parsing text: String) throws(SystemError) {
        if text.hasPrefix("[") {
            let address = try SocketAddress(parsing: text)
            self.init(address: address)
            return
        }
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0 else {
            throw SystemError("'\(text)': expected host:port (port 1-65535)")
        }
        let host = String(text[..<colon])
        guard Self.isHostName(host) || (try? SocketAddress(ip: host, port: port)) != nil else {
            throw SystemError("'\(text)': '\(host)' is neither a host name nor a numeric address")
        }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Letters, digits and hyphens in dot-separated labels (RFC 1123), at most 253 characters;
    /// all-numeric labels are left to the numeric parser (so "1.2.3.999" is not a name).
    public static func isHostName(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !text.isEmpty, text.utf8.count <= 253 else { return false }
        if labels.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) { return false }
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }

    /// The addresses to try, IPv4 and IPv6 in the resolver's order. A name goes to the system
    /// resolver (getaddrinfo, /etc/hosts then DNS), which blocks the calling thread for up to
    /// its timeout: roomd calls it on its event loop once per connection attempt, never on the
    /// audio thread.
    public func resolve() throws(SystemError) -> [SocketAddress] {
        if let numericAddress { return [numericAddress] }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else {
            throw SystemError("cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var next = list
        while let info = next {
            if let sa = info.pointee.ai_addr, let address = SocketAddress(copying: sa, length: info.pointee.ai_addrlen),
               !addresses.contains(address) {
                addresses.append(address)
            }
            next = info.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw SystemError("cannot resolve \(host): no IPv4 or IPv6 address") }
        return addresses
    }
}

extension SocketAddress {
    /// An IPv4 or IPv6 address from a `sockaddr` (getaddrinfo's results).
    init?(copying address: UnsafePointer<sockaddr>, length: socklen_t) {
        let family = Int32(address.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6, Int(length) <= MemoryLayout<sockaddr_storage>.size else { return nil }
        self.init()
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
        self.length = length
    }
}
