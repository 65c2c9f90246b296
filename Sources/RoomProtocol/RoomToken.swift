import FoundationEssentials
import RoomBase
import RoomCrypto
import RoomJSON
import RoomModel

/// What a room token grants beyond listening.
public enum TokenGrant: String, Sendable, Hashable {
    /// May speak: needed to join as, or become, a streamer.
    case publish
    /// May approve, deny, invite, demote, mute and kick others.
    case moderate
}

/// The claims of a room token (a JWT, RFC 7519). Times are seconds since the Unix epoch.
public struct RoomTokenClaims: Sendable, Hashable, Codable {
    /// The application (tenant) the token was issued for.
    public var app: String
    public var room: String
    /// The user id; the same `sub` joining again replaces the older session.
    public var sub: String
    /// Display name shown to others.
    public var name: String
    /// RoomModel's grants, so the verified claims feed a `RoomJoinRequest` as they are.
    public var grants: RoomGrants
    public var exp: Int
    public var nbf: Int
    public var iat: Int
    /// Placement (docs/scaling.md, "Placement in the token"): which kind of server hosts the
    /// room (`roomserver` or `janus`) and which instance (`host:port`), both or neither. Kept
    /// as the token says them: an appliance checks them with `TokenPlacement`, after the
    /// signature; roomserver, which is the instance already, does not need them.
    public var backend: String?
    public var server: String?

    public init(
        app: String, room: String, sub: String, name: String, grants: RoomGrants, exp: Int, nbf: Int, iat: Int,
        backend: String? = nil, server: String? = nil
    ) {
        self.backend = backend
        self.server = server
        self.app = app
        self.room = room
        self.sub = sub
        self.name = name
        self.grants = grants
        self.exp = exp
        self.nbf = nbf
        self.iat = iat
    }

    public func has(_ grant: TokenGrant) -> Bool {
        switch grant {
        case .publish: grants.publish
        case .moderate: grants.moderate
        }
    }

    enum CodingKeys: String, CodingKey { case app, room, sub, name, grants, exp, nbf, iat, backend, server }
    enum GrantKeys: String, CodingKey { case publish, moderate }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        app = try c.decode(String.self, forKey: .app)
        room = try c.decode(String.self, forKey: .room)
        sub = try c.decode(String.self, forKey: .sub)
        if sub.isEmpty { throw c.fieldError(.sub, "empty") }
        name = try c.decode(String.self, forKey: .name)
        let g = try c.nestedContainer(keyedBy: GrantKeys.self, forKey: .grants)
        grants = RoomGrants(
            publish: try g.decode(Bool.self, forKey: .publish), moderate: try g.decode(Bool.self, forKey: .moderate))
        exp = try c.int(.exp)
        nbf = try c.int(.nbf)
        iat = try c.int(.iat)
        backend = try c.decodeIfPresent(String.self, forKey: .backend)
        server = try c.decodeIfPresent(String.self, forKey: .server)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(app, forKey: .app)
        try c.encode(room, forKey: .room)
        try c.encode(sub, forKey: .sub)
        try c.encode(name, forKey: .name)
        var g = c.nestedContainer(keyedBy: GrantKeys.self, forKey: .grants)
        try g.encode(grants.publish, forKey: .publish)
        try g.encode(grants.moderate, forKey: .moderate)
        try c.encode(exp, forKey: .exp)
        try c.encode(nbf, forKey: .nbf)
        try c.encode(iat, forKey: .iat)
        try c.encodeIfPresent(backend, forKey: .backend)
        try c.encodeIfPresent(server, forKey: .server)
    }
}

/// Why a token was refused; each maps to its own wire error code (`code`) so a client can
/// tell "get a new token" (expired) from "this will never work" (wrong room, bad signature).
public enum TokenError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    case unknownKey(String)
    case badSignature
    case expired(at: Int)
    case notYetValid(until: Int)
    case wrongRoom(expected: String, got: String)
    case missingGrant(TokenGrant)

    public var code: ErrorCode {
        switch self {
        case .malformed: .malformedToken
        case .unknownKey: .unknownKey
        case .badSignature: .badSignature
        case .expired: .tokenExpired
        case .notYetValid: .tokenNotYetValid
        case .wrongRoom: .wrongRoom
        case .missingGrant: .missingGrant
        }
    }

    public var description: String {
        switch self {
        case let .malformed(reason): "malformed token: \(reason)"
        case let .unknownKey(kid): "unknown key id \"\(kid)\""
        case .badSignature: "bad token signature"
        case let .expired(at): "token expired at \(at)"
        case let .notYetValid(until): "token not valid before \(until)"
        case let .wrongRoom(expected, got): "token is for room \"\(got)\", not \"\(expected)\""
        case let .missingGrant(grant): "token lacks the \(grant.rawValue) grant"
        }
    }
}

/// JWS header (RFC 7515 §4). Only what HS256 tokens need; anything else present is ignored
/// except `crit`, which by RFC 7515 §4.1.11 we must refuse since we understand no extension.
private struct TokenHeader: Codable {
    var alg: String
    var typ: String?
    var kid: String?
    var crit: [String]?
}

/// Mints room tokens: JWS compact serialisation, the key id in `kid` so a server can hold
/// several keys at once (rotation, several apps). HS256 (HMAC-SHA256) with a shared secret, or
/// EdDSA (Ed25519, RFC 8037) with the service's private key: the only kind an appliance, which
/// holds no secret, can check, and so the only kind whose placement claims it follows.
public enum RoomToken {
    public static let algorithm = "HS256"
    public static let publicKeyAlgorithm = "EdDSA"

    public static func mint(claims: RoomTokenClaims, keyID: String, secret: [UInt8]) -> String {
        mint(claims: claims, keyID: keyID, algorithm: algorithm) { HMAC.sha256(key: secret, message: $0) }
    }

    /// With a key held in locked memory (the server's `[keys]`).
    public static func mint(claims: RoomTokenClaims, keyID: String, secret: SecretBytes) -> String {
        mint(claims: claims, keyID: keyID, algorithm: algorithm) { HMAC.sha256(key: secret, message: $0) }
    }

    /// EdDSA: signed with the service's Ed25519 key, verifiable with its public key alone.
    public static func mint(claims: RoomTokenClaims, keyID: String, signingKey: Ed25519PrivateKey) -> String {
        mint(claims: claims, keyID: keyID, algorithm: publicKeyAlgorithm) { signingKey.sign($0) }
    }

    private static func mint(claims: RoomTokenClaims, keyID: String, algorithm: String, sign: ([UInt8]) -> [UInt8]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain strings, bools and integers cannot fail.
        let header = (try? encoder.encode(TokenHeader(alg: algorithm, typ: "JWT", kid: keyID))) ?? Data()
        let payload = (try? encoder.encode(claims)) ?? Data()
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let signature = sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The HS256 signature of a JWS signing input (`BASE64URL(header) '.' BASE64URL(payload)`),
    /// exposed so it can be checked against published test vectors.
    public static func signature(signingInput: String, secret: [UInt8]) -> [UInt8] {
        HMAC.sha256(key: secret, message: Array(signingInput.utf8))
    }
}

/// Verifies room tokens against a set of keys. Checks run in a fixed order — structure,
/// key, signature, then the claims (time, room, grant) — so that nothing in an
/// unauthenticated token is believed, not even to choose the error.
public struct RoomTokenVerifier: Sendable {
    /// Seconds of clock disagreement tolerated on `nbf` and `exp`. Boards without a
    /// battery-backed clock may be a little off after NTP sync; 30 s is too short to matter
    /// for expiry and long enough for skew between the minting backend and the server.
    public static let defaultLeeway = 30
    /// Longer strings are refused before any parsing (a token is a few hundred bytes).
    public static let maxTokenLength = 4096

    /// Key id → secret, in locked memory that is wiped when the verifier goes (a configuration
    /// reload replaces it).
    public let keys: [String: SecretBytes]
    /// Key id → Ed25519 public key, for EdDSA tokens. A key id is looked up only in the table of
    /// the token's algorithm, so a token cannot have an HMAC secret used as anything else.
    public let publicKeys: [String: Ed25519PublicKey]
    public let leeway: Int
    private let clock: @Sendable () -> Int

    /// Seconds since the epoch from the system's wall clock.
    public static let systemClock: @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }

    /// `keys` maps key id (`kid`) to secret. `clock` returns seconds since the epoch; tests
    /// pass a fixed one.
    public init(
        keys: [String: [UInt8]], leeway: Int = RoomTokenVerifier.defaultLeeway,
        clock: @escaping @Sendable () -> Int = RoomTokenVerifier.systemClock
    ) {
        self.init(secretKeys: keys.mapValues { SecretBytes($0) }, leeway: leeway, clock: clock)
    }

    public init(
        secretKeys keys: [String: SecretBytes], publicKeys: [String: Ed25519PublicKey] = [:],
        leeway: Int = RoomTokenVerifier.defaultLeeway,
        clock: @escaping @Sendable () -> Int = RoomTokenVerifier.systemClock
    ) {
        self.keys = keys
        self.publicKeys = publicKeys
        self.leeway = max(0, leeway)
        self.clock = clock
    }

    /// The token's claims if it may join `room` in `wantsRole` (streamer needs publish) and,
    /// when `wantsModerator`, moderate; otherwise the first reason it may not.
    public func verify(
        _ token: String, room: String, wantsRole: RoomRole, wantsModerator: Bool = false
    ) throws(TokenError) -> RoomTokenClaims {
        let claims = try verifySignatureAndTime(token)
        guard claims.room == room else { throw .wrongRoom(expected: room, got: claims.room) }
        if wantsRole == .streamer, !claims.grants.publish { throw .missingGrant(.publish) }
        if wantsModerator, !claims.grants.moderate { throw .missingGrant(.moderate) }
        return claims
    }

    /// The claims of a token without checking its signature or times: what a client (which has
    /// no key) may read to name the room a token is for in an error. Never a reason to trust it;
    /// the server verifies.
    public static func unverifiedClaims(_ token: String) throws(TokenError) -> RoomTokenClaims {
        guard token.utf8.count <= maxTokenLength else { throw .malformed("longer than \(maxTokenLength) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("expected 3 dot-separated parts, found \(parts.count)") }
        guard let payloadBytes = Base64URL.decode(parts[1]) else { throw .malformed("payload is not base64url") }
        return try decode(RoomTokenClaims.self, payloadBytes, part: "claims")
    }

    /// The header's `alg` and `kid`, unverified: which check a token asks for and under which
    /// key id, so an appliance can say why it cannot check one (an HS256 token) before trying.
    public static func unverifiedHeader(_ token: String) throws(TokenError) -> (alg: String, kid: String?) {
        guard token.utf8.count <= maxTokenLength else { throw .malformed("longer than \(maxTokenLength) bytes") }
        guard let first = token.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first,
              let bytes = Base64URL.decode(first) else { throw .malformed("header is not base64url") }
        let header = try decode(TokenHeader.self, bytes, part: "header")
        return (header.alg, header.kid)
    }

    /// Everything but the room and grant checks: for a `refresh_token`, whose room is then
    /// compared with the session's.
    public func verifySignatureAndTime(_ token: String) throws(TokenError) -> RoomTokenClaims {
        guard token.utf8.count <= Self.maxTokenLength else {
            throw .malformed("longer than \(Self.maxTokenLength) bytes")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("expected 3 dot-separated parts, found \(parts.count)") }
        guard let headerBytes = Base64URL.decode(parts[0]) else { throw .malformed("header is not base64url") }
        guard let payloadBytes = Base64URL.decode(parts[1]) else { throw .malformed("payload is not base64url") }
        guard let signature = Base64URL.decode(parts[2]) else { throw .malformed("signature is not base64url") }

        let header = try Self.decode(TokenHeader.self, headerBytes, part: "header")
        // Only HS256 and EdDSA: "none" and every other algorithm are refused, so a token cannot
        // pick a weaker check than the one the server intends (RFC 8725 §3.1).
        guard header.alg == RoomToken.algorithm || header.alg == RoomToken.publicKeyAlgorithm else {
            throw .malformed("header alg \"\(header.alg)\" is not HS256 or EdDSA")
        }
        if let typ = header.typ, typ != "JWT" { throw .malformed("header typ \"\(typ)\" is not JWT") }
        if header.crit != nil { throw .malformed("header has crit extensions") }
        guard let kid = header.kid else { throw .malformed("header has no kid") }

        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        if header.alg == RoomToken.publicKeyAlgorithm {
            guard let key = publicKeys[kid] else { throw .unknownKey(kid) }
            guard signature.count == Ed25519PublicKey.signatureSize else {
                throw .malformed("signature is \(signature.count) bytes, not \(Ed25519PublicKey.signatureSize)")
            }
            guard key.verify(signature: signature, message: signingInput) else { throw .badSignature }
        } else {
            guard let secret = keys[kid] else { throw .unknownKey(kid) }
            guard signature.count == HMAC.sha256Size else {
                throw .malformed("signature is \(signature.count) bytes, not \(HMAC.sha256Size)")
            }
            let expected = HMAC.sha256(key: secret, message: signingInput)
            guard ConstantTime.equal(expected, signature) else { throw .badSignature }
        }

        let claims = try Self.decode(RoomTokenClaims.self, payloadBytes, part: "claims")
        let now = clock()
        if now + leeway < claims.nbf { throw .notYetValid(until: claims.nbf) }
        if now - leeway >= claims.exp { throw .expired(at: claims.exp) }
        return claims
    }

    /// One part of the token (`part`: "header" or "claims"), read strictly: a key twice is
    /// refused (a token must not say one thing to one reader and another to the next).
    private static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], part: String) throws(TokenError) -> T {
        do {
            return try JSONValue.decodeStrictly(type, from: bytes)
        } catch {
            switch error {
            case .duplicateKey(let key): throw .malformed("\(part): key \"\(key)\" twice")
            case .refused(let strict): throw .malformed("\(part): \(strict.message)")
            case .decoding(let error): throw .malformed("\(part): \(reason(error))")
            }
        }
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch SignalMessage.translate(error) {
        case let .invalidField(field, reason): return "\(field): \(reason)"
        case let .malformedJSON(reason): return reason
        case let .unknownType(name): return name
        }
    }
}
