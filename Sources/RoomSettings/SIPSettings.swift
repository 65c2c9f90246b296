/// roomd.conf's `[sip]` section: the SIP account roomd registers and calls with (docs/calls.md).
/// No `[sip]` section, no SIP: the appliance is a room device only.
///
/// The password is never in roomd.conf (which is world-readable on most installs): it is in
/// `password_file`, which must be readable by its owner only — roomd refuses a file that its
/// group or others may read, as ssh refuses a private key.
public struct SIPSettings: Sendable, Equatable {
    /// The registrar (and outbound proxy), host:port.
    public var registrar: String
    /// The account's domain, the host part of its address of record; default the registrar's host.
    public var domain: String
    public var user: String
    /// The digest user name, when the provider's differs from `user`.
    public var authUser: String
    public var passwordFile: String?
    /// How SIP travels: `tls` (the default: the SDES keys of SRTP ride in the signalling, so
    /// plain signalling would hand them to anyone on the path) or `udp`, on a network you trust.
    public var transport: Transport
    /// PEM file of the CA(s) the registrar's certificate must chain to (TLS); nil: the
    /// system's trust store.
    public var caFile: String?
    /// The name the registrar's certificate must carry (TLS); nil: the registrar's host as
    /// written in `registrar`.
    public var tlsServerName: String?
    public var mediaEncryption: MediaEncryptionPolicy
    /// Codecs in the order roomd prefers them (names as `AudioCodec.name`, lower-case).
    public var codecs: [String]
    /// Answer incoming calls without a button press — only from `autoAnswerFrom` (intercom use).
    public var autoAnswer: Bool
    /// Callers (user, or user@domain) auto-answer applies to; empty: auto-answer answers nobody.
    public var autoAnswerFrom: [String]
    /// Peak level of the ring on the speaker, dBFS.
    public var ringLevelDB: Double
    /// Seconds the registration is asked for (the registrar may grant less).
    public var registerExpires: Int

    public enum Transport: String, Sendable, Equatable, CaseIterable {
        case tls, udp
    }

    public enum MediaEncryptionPolicy: String, Sendable, Equatable, CaseIterable {
        /// SRTP (SDES) or no call: a plain offer is refused with 488.
        case required
        /// SRTP when the far end takes it, plain RTP otherwise.
        case optional
        /// Plain RTP only.
        case off
    }

    public static let codecNames = ["opus", "g722", "pcmu", "pcma"]
    public static let ringLevelRange: ClosedRange<Double> = -60 ... 0
    public static let keys = ["registrar", "domain", "user", "auth_user", "password_file", "transport", "ca_file", "tls_server_name", "media_encryption",
                              "codecs", "auto_answer", "auto_answer_from", "ring_level_db", "register_expires"]

    public init(registrar: String, domain: String, user: String, authUser: String? = nil, passwordFile: String? = nil,
                transport: Transport = .tls, caFile: String? = nil, tlsServerName: String? = nil, mediaEncryption: MediaEncryptionPolicy = .required, codecs: [String] = codecNames,
                autoAnswer: Bool = false, autoAnswerFrom: [String] = [], ringLevelDB: Double = -12, registerExpires: Int = 600) {
        self.registrar = registrar
        self.domain = domain
        self.user = user
        self.authUser = authUser ?? user
        self.passwordFile = passwordFile
        self.transport = transport
        self.caFile = caFile
        self.tlsServerName = tlsServerName
        self.mediaEncryption = mediaEncryption
        self.codecs = codecs
        self.autoAnswer = autoAnswer
        self.autoAnswerFrom = autoAnswerFrom
        self.ringLevelDB = ringLevelDB
        self.registerExpires = registerExpires
    }

    /// Characters a SIP user part or domain may hold here: what RFC 3261's `user` and `host`
    /// allow, less the escapes and separators a header would misread.
    public static func isSIPToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 128 && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.!~*'()&=+$,;?/%".contains($0)) }
    }

    /// Reads `[sip]` (nil without a `sip.registrar`); `path` resolves relative file names.
    static func parse(_ values: ConfigValues, path: (String) throws(ConfigError) -> String?) throws(ConfigError) -> SIPSettings? {
        guard let registrar = try values.string("sip.registrar") else {
            for key in keys where try values.string("sip.\(key)") != nil {
                throw values.error("sip.\(key)", "needs sip.registrar (the [sip] section is the account at a registrar)")
            }
            return nil
        }
        guard ApplianceConfiguration.isHostPort(registrar) else {
            throw values.error("sip.registrar", "\"\(registrar)\" is not host:port (e.g. pbx.example.org:5061)")
        }
        let host = String(registrar[..<registrar.lastIndex(of: ":")!])
        let domain = try values.string("sip.domain") ?? host.trimmingBrackets
        guard ApplianceConfiguration.isHostPort(domain + ":1") else { throw values.error("sip.domain", "\"\(domain)\" is not a host name or address") }
        let user = try values.requiredString("sip.user")
        guard isSIPToken(user) else { throw values.error("sip.user", "\"\(user)\" is not a SIP user name (letters, digits and -_.!~*'()&=+$,;?/%, at most 128)") }
        let authUser = try values.string("sip.auth_user")
        if let authUser, !isSIPToken(authUser) { throw values.error("sip.auth_user", "\"\(authUser)\" is not a SIP user name") }
        var s = SIPSettings(registrar: registrar, domain: domain, user: user, authUser: authUser, passwordFile: try path("sip.password_file"))
        s.transport = try values.value("sip.transport", as: Transport.self) ?? .tls
        s.caFile = try path("sip.ca_file")
        s.tlsServerName = try values.string("sip.tls_server_name")
        if s.transport == .udp {
            for key in ["ca_file", "tls_server_name"] where try values.string("sip.\(key)") != nil {
                throw values.error("sip.\(key)", "is for transport = tls; with udp nothing is checked (remove it, or use tls)")
            }
        }
        if let name = s.tlsServerName {
            guard ApplianceConfiguration.isHostPort(name + ":1"), !name.hasPrefix("[") else {
                throw values.error("sip.tls_server_name", "\"\(name)\" is not a host name or address (the name the registrar's certificate carries)")
            }
        }
        s.mediaEncryption = try values.value("sip.media_encryption", as: MediaEncryptionPolicy.self) ?? .required
        if let list = try values.string("sip.codecs") {
            let names = ApplianceConfiguration.serverList(list).map { $0.lowercased() }
            guard !names.isEmpty else { throw values.error("sip.codecs", "empty (give some of \(codecNames.joined(separator: ", ")))") }
            for n in names where !codecNames.contains(n) {
                throw values.error("sip.codecs", "\"\(n)\" is not one of \(codecNames.joined(separator: ", "))")
            }
            guard Set(names).count == names.count else { throw values.error("sip.codecs", "a codec is listed twice") }
            s.codecs = names
        }
        s.autoAnswer = try values.yesNo("sip.auto_answer") ?? false
        if let from = try values.string("sip.auto_answer_from") {
            s.autoAnswerFrom = from.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
            for caller in s.autoAnswerFrom where !caller.split(separator: "@", maxSplits: 1).allSatisfy({ isSIPToken(String($0)) }) {
                throw values.error("sip.auto_answer_from", "\"\(caller)\" is not user or user@domain")
            }
        }
        if s.autoAnswer && s.autoAnswerFrom.isEmpty {
            throw values.error("sip.auto_answer", "yes needs sip.auto_answer_from (the callers it may answer): an appliance that answers anyone is a microphone anyone can open")
        }
        s.ringLevelDB = try values.double("sip.ring_level_db", in: ringLevelRange) ?? -12
        s.registerExpires = try values.int("sip.register_expires", in: 60 ... 86_400) ?? 600
        return s
    }
}

extension Substring {
    /// Without `set`'s characters at either end.
    func trimmingCharacters(in set: String) -> String {
        var t = self[...]
        while let f = t.first, set.contains(f) { t = t.dropFirst() }
        while let l = t.last, set.contains(l) { t = t.dropLast() }
        return String(t)
    }
}

extension String {
    /// "[v6]" → "v6": a registrar's host as a domain.
    fileprivate var trimmingBrackets: String {
        hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self
    }
}
