import RoomCrypto

/// Where a token sends an appliance (docs/scaling.md, "Placement in the token"): the kind of
/// server, the instance, and the room on it. Built only from a token whose EdDSA signature
/// verified against the appliance's `room.placement_key`, so nobody who can only write the
/// token file can point the appliance at a server of their choosing.
public struct TokenPlacement: Sendable, Hashable, CustomStringConvertible {
    /// The kinds of server a token may name; the same words as roomd.conf's `room.backend`.
    public enum Backend: String, Sendable, CaseIterable {
        case roomserver, janus
    }

    public var backend: Backend
    /// `host:port` as the token gives it: roomserver's signalling, or Janus's WebSocket
    /// transport (what `room.server` names for each backend). Its syntax is checked by the
    /// appliance, which owns host:port parsing.
    public var server: String
    /// The token's `room`: roomserver's room name, or (janus) the AudioBridge room number.
    public var room: String
    /// The AudioBridge room number, with `janus`.
    public var janusRoom: UInt64?

    public var description: String { "\(backend.rawValue) \(server) room \(room)" }

    /// The placement claims of `claims` (nil: the token has none, the configuration places the
    /// room), checked field by field. Call only on claims whose signature verified.
    public init?(claims: RoomTokenClaims) throws(PlacementError) {
        switch (claims.backend, claims.server) {
        case (nil, nil): return nil
        case (nil, _?): throw .claim("backend", "missing: \"server\" is given, so the token must say which kind of server it is (roomserver or janus)")
        case (_?, nil): throw .claim("server", "missing: \"backend\" is given, so the token must name the instance (host:port)")
        case let (backendText?, server?):
            guard let backend = Backend(rawValue: backendText) else {
                throw .claim("backend", "\"\(Self.quoted(backendText))\" is not roomserver or janus")
            }
            guard !server.isEmpty, server.utf8.count <= Self.maxServerLength else {
                throw .claim("server", server.isEmpty ? "empty" : "longer than \(Self.maxServerLength) bytes")
            }
            self.backend = backend
            self.server = server
            self.room = claims.room
            if backend == .janus {
                // AudioBridge numbers its rooms; 0 is not a room Janus creates.
                guard let number = UInt64(claims.room), number > 0 else {
                    throw .claim("room", "\"\(Self.quoted(claims.room))\" is not an AudioBridge room number (janus)")
                }
                janusRoom = number
            }
        }
    }

    /// A host name (253) plus ":" and a port, with room to spare; longer is not an address.
    public static let maxServerLength = 300

    /// At most 40 characters of a claim in an error: a token's text does not belong whole in
    /// the journal, and 40 is enough to recognise it.
    public static func quoted(_ text: String) -> String {
        text.count <= 40 ? text : String(text.prefix(40)) + "…"
    }
}

/// Why a token's placement was refused. The appliance refuses it before connecting anywhere
/// and stays where it is; each reason names what to fix.
public enum PlacementError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A placement claim is missing or wrong (the claim's name, the problem).
    case claim(String, String)
    /// The token places the room but is signed with HS256, which only holders of the secret
    /// (roomserver) can check.
    case notPublicKeySigned(alg: String)
    /// The token places the room and the appliance has no key to check it with.
    case noKey
    /// The EdDSA signature does not verify against the appliance's key: tampered, or signed by
    /// another key.
    case signature
    /// The token itself is unreadable, expired or not yet valid.
    case token(TokenError)

    public var description: String {
        switch self {
        case let .claim(name, problem): "token: claim \"\(name)\": \(problem)"
        case let .notPublicKeySigned(alg): "token: placement claims (backend, server) in a token signed with \(TokenPlacement.quoted(alg)), which an appliance cannot check; the service must sign placed tokens with EdDSA (roomserver mint-token --signing-key)"
        case .noKey: "token: the token places the room (claims backend, server) but room.placement_key is not set, so the placement cannot be checked"
        case .signature: "token: placement signature does not verify against room.placement_key"
        case let .token(error): "token: \(error)"
        }
    }
}

/// The appliance's side of placement: reads a token's placement and believes it only when the
/// service's public key verifies the whole token (its room and times included).
public struct PlacementVerifier: Sendable {
    public let key: Ed25519PublicKey?
    private let leeway: Int
    private let clock: @Sendable () -> Int

    public init(key: Ed25519PublicKey?, leeway: Int = RoomTokenVerifier.defaultLeeway,
                clock: @escaping @Sendable () -> Int = RoomTokenVerifier.systemClock) {
        self.key = key
        self.leeway = leeway
        self.clock = clock
    }

    /// With the service's public key as the key file holds it (PEM, `room.placement_key`).
    public init(publicKeyPEM: String) throws(KeyFileError) {
        self.init(key: try Ed25519PublicKey(pem: publicKeyPEM))
    }

    /// The token's checked placement, or nil when it has no placement claims (an old token:
    /// the configuration's `room.server` places the room as before). Nothing in the token is
    /// believed before its signature verifies; the unverified read only decides whether there
    /// is anything to verify.
    public func placement(of token: String) throws(PlacementError) -> TokenPlacement? {
        let unverified: RoomTokenClaims
        let header: (alg: String, kid: String?)
        do {
            unverified = try RoomTokenVerifier.unverifiedClaims(token)
            header = try RoomTokenVerifier.unverifiedHeader(token)
        } catch {
            throw .token(error)
        }
        guard unverified.backend != nil || unverified.server != nil else { return nil }
        guard header.alg == RoomToken.publicKeyAlgorithm else { throw .notPublicKeySigned(alg: header.alg) }
        guard let key else { throw .noKey }
        // The appliance holds one key, the service's: whatever id the token files it under.
        let verifier = RoomTokenVerifier(secretKeys: [:], publicKeys: [header.kid ?? "": key], leeway: leeway, clock: clock)
        let claims: RoomTokenClaims
        do {
            claims = try verifier.verifySignatureAndTime(token)
        } catch .badSignature {
            throw .signature
        } catch {
            throw .token(error)
        }
        return try TokenPlacement(claims: claims)
    }
}
