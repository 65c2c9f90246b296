import RoomSystem

/// A SIP account: who roomd registers as, where, and with which credentials (issue 29: an
/// account in roomd.conf). Every field goes into request text, so the initializer refuses what
/// would break a header (CR, LF, NUL, spaces, quotes, angle brackets) rather than letting a
/// configuration line inject headers.
public struct SIPAccount: Sendable {
    /// Where REGISTERs go (an IP address and port; names and SRV come later).
    public let registrar: SocketAddress
    /// The domain of the address of record, `sip:user@domain` (the registrar's realm usually).
    public let domain: String
    public let user: String
    /// The digest user name; often the same as `user`.
    public let authUser: String
    public let password: String
    /// The registration time asked for, in seconds; the registrar may grant less or more.
    public let expires: Int

    public init(registrar: SocketAddress, domain: String, user: String, authUser: String? = nil,
                password: String, expires: Int = 600) throws(SIPAccountError) {
        for (name, value) in [("domain", domain), ("user", user), ("auth user", authUser ?? user)] {
            if value.isEmpty { throw SIPAccountError(description: "SIP account: \(name) is empty") }
            if let bad = value.unicodeScalars.first(where: Self.breaksHeader) {
                throw SIPAccountError(description: "SIP account: \(name) contains U+\(String(bad.value, radix: 16, uppercase: true)), which SIP cannot carry there")
            }
        }
        if password.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
            throw SIPAccountError(description: "SIP account: the password contains a line break or NUL")
        }
        guard expires >= 0 && expires <= 86_400 else {
            throw SIPAccountError(description: "SIP account: expires \(expires) is outside 0...86400 seconds")
        }
        self.registrar = registrar
        self.domain = domain
        self.user = user
        self.authUser = authUser ?? user
        self.password = password
        self.expires = expires
    }

    /// The address of record.
    public var addressOfRecord: String { "sip:\(user)@\(domain)" }

    static func breaksHeader(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x21 || s.value == 0x7F || s == "\"" || s == "<" || s == ">" || s == "\\"
    }
}

public struct SIPAccountError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// Where a registration stands, reported on every change.
public enum SIPRegistrationState: Sendable, Equatable {
    case unregistered
    /// A REGISTER is out and no registration holds yet.
    case registering
    /// The registrar holds the binding for `expires` seconds from the last 2xx; it is
    /// refreshed half-way.
    case registered(expires: Int)
    case failed(SIPRegistrationFailure)
}

/// Why a registration failed, in words a log line and `roomctl status` can show.
public struct SIPRegistrationFailure: Sendable, Equatable, CustomStringConvertible {
    /// The SIP status that ended it, or nil (no answer, a request we could not build).
    public let statusCode: Int?
    public let reason: String
    /// Whether the failure is transient and retried soon (after `SIPUserAgent.retryInterval`,
    /// doubling): yes for a silent registrar or a server error, no for refused credentials
    /// and other refusals, where each try would be another failed login on the registrar
    /// (those are retried only after `maximumRetryInterval`).
    public let willRetry: Bool
    /// When the agent tries again, set by the agent as it reports the failure.
    public internal(set) var retryDelay: Duration?

    init(statusCode: Int?, reason: String, willRetry: Bool, retryDelay: Duration? = nil) {
        self.statusCode = statusCode
        self.reason = reason
        self.willRetry = willRetry
        self.retryDelay = retryDelay
    }

    public var description: String {
        (statusCode.map { "\($0) " } ?? "") + reason + (retryDelay.map { "; next try in \(Self.words($0))" } ?? "")
    }

    /// "45 s", "15 min", "1 h 30 min": what a person reads in the log and in `roomctl status`.
    static func words(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        if ms < 10_000 && ms % 1000 != 0 { return "\(Double(ms) / 1000) s" }
        let s = ms / 1000
        if s < 120 { return "\(s) s" }
        if s < 7200 { return s % 60 == 0 ? "\(s / 60) min" : "\(s / 60) min \(s % 60) s" }
        return "\(s / 3600) h" + (s % 3600 >= 60 ? " \(s % 3600 / 60) min" : "")
    }
}
