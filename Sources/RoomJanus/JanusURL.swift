import RoomSystem

/// Where an appliance finds Janus's WebSocket API, as an installer writes it in roomd.conf
/// (`room.janus_url = wss://janus.example:8989/janus`): the scheme says whether the connection
/// is TLS (`wss`) or plain (`ws`), the host may be a name (resolved when connecting, like
/// `room.server`) or a numeric address (IPv6 in brackets), the port defaults to Janus's own
/// defaults (8188 for ws, 8989 for wss — not HTTP's 80/443, which a stock Janus does not
/// listen on), and the path is sent in the WebSocket request (Janus accepts any; a reverse proxy
/// in front of it may route on it).
///
/// Parsing is strict rather than forgiving: a setting that is almost right (a stray space, an
/// `http://` pasted from a browser, an IPv6 address without brackets) is refused with the
/// reason, because a guess would show up later as a connection that fails for a reason the
/// installer cannot see.
public struct JanusURL: Sendable, Hashable, CustomStringConvertible {
    public enum Scheme: String, Sendable, Hashable {
        case ws, wss
        /// Janus's default ports (`ws_port`, `wss_port` in janus.transport.websockets.jcfg).
        public var defaultPort: UInt16 { self == .ws ? 8188 : 8989 }
    }

    public var scheme: Scheme
    /// A host name or a numeric address; IPv6 without brackets (as `HostPort` keeps it).
    public var host: String
    public var port: UInt16
    /// The request target sent in the WebSocket handshake: starts with "/", may carry a query.
    public var path: String

    /// Longer values are refused: a URL this long is a paste gone wrong, not a Janus address.
    public static let maxLength = 2048

    public init(scheme: Scheme, host: String, port: UInt16? = nil, path: String = "/") {
        self.scheme = scheme
        self.host = host
        self.port = port ?? scheme.defaultPort
        self.path = path
    }

    /// Parses `text`; errors name `key` (the setting being read) and what is wrong.
    public init(parsing text: String, key: String = "room.janus_url") throws(JanusURLError) {
        func fail(_ message: String) -> JanusURLError { JanusURLError(key: key, message: message) }
        let expected = "expected ws://host[:port][/path] or wss://host[:port][/path]"
        guard !text.isEmpty else { throw fail("empty; \(expected)") }
        guard text.utf8.count <= Self.maxLength else { throw fail("longer than \(Self.maxLength) bytes") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw fail("only printable ASCII without spaces is allowed (percent-encode the rest): \(Self.quoted(text))")
        }
        guard let separator = text.firstRange(of: "://") else { throw fail("\(expected): \(text)") }
        let schemeText = String(text[..<separator.lowerBound])
        guard let scheme = Scheme(rawValue: schemeText.lowercased()) else {
            throw fail("scheme must be ws or wss: \(schemeText.isEmpty ? "(none)" : schemeText)")
        }
        let rest = text[separator.upperBound...]
        if rest.contains("#") { throw fail("a fragment (#…) has no meaning in a WebSocket URL (RFC 6455 §3): \(text)") }
        let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" }
        let authority = rest[..<(pathStart ?? rest.endIndex)]
        var path = pathStart.map { String(rest[$0...]) } ?? "/"
        if path.hasPrefix("?") { path = "/" + path }
        if let problem = Self.pathProblem(path) { throw fail(problem) }
        if authority.contains("@") { throw fail("user information (user@) is not supported: \(text)") }
        guard !authority.isEmpty else { throw fail("host missing: \(text)") }

        var host: String
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("IPv6 address without its closing ]: \(text)") }
            host = String(authority[authority.index(after: authority.startIndex) ..< close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("expected :port after ]: \(text)") }
                portText = after.dropFirst()
            }
            guard host.contains(":"), (try? SocketAddress(ip: host, port: 1))?.family == .ipv6 else {
                throw fail("not an IPv6 address between the brackets: \(host.isEmpty ? "(empty)" : host)")
            }
        } else {
            let colons = authority.count { $0 == ":" }
            if colons > 1 { throw fail("an IPv6 address goes in brackets (wss://[2001:db8::1]:8989/): \(authority)") }
            if let colon = authority.firstIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            guard !host.isEmpty else { throw fail("host missing: \(text)") }
            let isIPv4 = (try? SocketAddress(ip: host, port: 1))?.family == .ipv4
            guard isIPv4 || HostPort.isHostName(host) else {
                throw fail("host is neither a host name nor an IPv4 address: \(host)")
            }
        }
        var port = scheme.defaultPort
        if let portText {
            guard !portText.isEmpty else { throw fail("port missing after ':' (leave out the ':' for Janus's default, \(scheme.defaultPort)): \(text)") }
            guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), portText.count <= 5, let value = Int(portText),
                  (1 ... 65535).contains(value)
            else { throw fail("port must be 1-65535: \(portText)") }
            port = UInt16(value)
        }
        self.init(scheme: scheme, host: host, port: port, path: path)
    }

    /// Why `path` cannot be a WebSocket request target, or nil when it can: it goes verbatim
    /// into the request line, so anything that could end or split that line is refused.
    public static func pathProblem(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "path must start with /: \(quoted(path))" }
        guard path.utf8.count <= maxLength else { return "path longer than \(maxLength) bytes" }
        guard path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return "path may hold only printable ASCII without spaces (percent-encode the rest): \(quoted(path))"
        }
        return nil
    }

    /// True for `wss`: the connection runs over TLS.
    public var isSecure: Bool { scheme == .wss }

    /// Host and port to connect to (resolved when connecting).
    public var endpoint: HostPort { HostPort(host: host, port: port) }

    /// The WebSocket request's Host header (RFC 6455 §4.1, RFC 7230 §5.4): the host as the URL
    /// names it, IPv6 in brackets, and the port unless it is the scheme's HTTP default (80 for
    /// ws, 443 for wss) — so a name-based virtual host or a TLS-terminating proxy in front of
    /// Janus sees the same value a browser would send.
    public var hostHeader: String { Self.hostHeader(host: host, port: port, secure: isSecure) }

    public static func hostHeader(host: String, port: UInt16, secure: Bool) -> String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// The canonical form: lower-case scheme, explicit port, brackets around IPv6.
    public var description: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return "\(scheme.rawValue)://\(name):\(port)\(path)"
    }

    /// `text` with control characters made visible, for an error message on one line.
    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars.prefix(200) {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + (text.unicodeScalars.count > 200 ? "…\"" : "\"")
    }
}

/// A `room.janus_url` (or other setting) that is not a Janus WebSocket URL: `key` is the
/// setting, `message` what is wrong, so a configuration reader can put them in its own error
/// with the file and line.
public struct JanusURLError: Error, Sendable, Equatable, CustomStringConvertible {
    public let key: String
    public let message: String

    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    /// "room.janus_url: scheme must be ws or wss: http"
    public var description: String { "\(key): \(message)" }
}
