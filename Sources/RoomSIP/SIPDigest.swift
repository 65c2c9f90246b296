import RoomBase
import RoomCrypto

/// A digest challenge (`WWW-Authenticate` / `Proxy-Authenticate`, RFC 3261 §22.4), as the
/// registrar or proxy sent it, quotes removed.
public struct SIPDigestChallenge: Sendable, Equatable {
    public var realm: String
    public var nonce: String
    public var opaque: String?
    /// The `qop` options offered (`auth`, `auth-int`); empty for an RFC 2069 challenge.
    public var qop: [String]
    /// nil means MD5 (the default).
    public var algorithm: String?
    /// The nonce expired but the credentials were right: answer again without counting it as
    /// a refusal (RFC 2617 §3.2.1).
    public var stale: Bool

    public init(realm: String, nonce: String, opaque: String? = nil, qop: [String] = [],
                algorithm: String? = nil, stale: Bool = false) {
        self.realm = realm
        self.nonce = nonce
        self.opaque = opaque
        self.qop = qop
        self.algorithm = algorithm
        self.stale = stale
    }
}

public struct SIPDigestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// The answer to a digest challenge (RFC 2617 with MD5, `qop=auth` or none). Written here
/// rather than taken from a library because libosip2 has none (docs/calls.md, "Why
/// libosip2"); MD5 is libcrypto's through RoomCrypto, roomd's one crypto library (osipparser2
/// has an MD5 of its own, which would be a second).
public enum SIPDigest {
    /// The header value (`Digest username="…", …`) answering `challenge` for a request
    /// `method uri`. `cnonce` and `nonceCount` are parameters so tests can check known answers.
    /// Refuses what it cannot answer correctly (another algorithm, only `auth-int`) instead of
    /// sending a response the registrar would reject without saying why.
    public static func authorization(
        challenge: SIPDigestChallenge, method: String, uri: String,
        user: String, password: String, cnonce: String, nonceCount: UInt32 = 1
    ) throws(SIPDigestError) -> String {
        if let algorithm = challenge.algorithm, algorithm.uppercased() != "MD5" {
            throw SIPDigestError(description: "digest algorithm \(algorithm) is not supported (only MD5)")
        }
        let useQop = challenge.qop.contains { $0.lowercased() == "auth" }
        if !challenge.qop.isEmpty && !useQop {
            throw SIPDigestError(description: "digest qop \(challenge.qop.joined(separator: ",")) is not supported (only auth)")
        }
        let ha1 = md5Hex("\(user):\(challenge.realm):\(password)")
        let ha2 = md5Hex("\(method):\(uri)")
        let nc = hexDigits(nonceCount, width: 8, uppercase: false)
        let response = useQop
            ? md5Hex("\(ha1):\(challenge.nonce):\(nc):\(cnonce):auth:\(ha2)")
            : md5Hex("\(ha1):\(challenge.nonce):\(ha2)")
        var value = "Digest username=\(quoted(user)), realm=\(quoted(challenge.realm)), nonce=\(quoted(challenge.nonce)), "
            + "uri=\(quoted(uri)), response=\"\(response)\", algorithm=MD5"
        if useQop { value += ", qop=auth, nc=\(nc), cnonce=\(quoted(cnonce))" }
        if let opaque = challenge.opaque { value += ", opaque=\(quoted(opaque))" }
        return value
    }

    static func md5Hex(_ text: String) -> String { hexBytes(Digest.md5(Array(text.utf8))) }

    /// A quoted-string (RFC 3261 §25.1): backslash and quote escaped.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for c in s {
            if c == "\"" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out + "\""
    }
}
