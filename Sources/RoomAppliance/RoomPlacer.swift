import RoomModel
import RoomProtocol
import RoomSettings
import RoomSystem

/// The settings' room resolved to a join: the target, the roomserver token it carries, and
/// what placed it.
struct PlacedRoom {
    let target: RoomTarget
    /// The token in use (its content decides whether a reload refreshes it); nil on a Janus
    /// room from the configuration, which takes none.
    let token: String?
    /// What the token placed; nil: `room.server` placed the room.
    let placement: TokenPlacement?
}

/// Decides where the settings' room is (docs/scaling.md, "Placement in the token"): where the
/// token says, once the room service's public key (`room.placement_key`) has verified it, else
/// `room.server` as before. Every refusal is thrown before anything connects, so the appliance
/// stays where it is.
enum RoomPlacer {
    /// `token` is one given with a `roomctl join` (otherwise the settings' token is read). nil
    /// when nothing names a server (no `room.server`, no placement in the token).
    static func place(_ e: EffectiveSettings, token given: String? = nil, role: RoomRole) throws(SystemError) -> PlacedRoom? {
        // A configured Janus room takes no token; its token file is read only to look for placement.
        var token = given
        if token == nil, e.token != nil || e.tokenFile != nil, e.backend == .roomserver || e.placementKey != nil {
            token = try Appliance.readToken(e)
        }
        if let token, let placement = try checkedPlacement(of: token, e) {
            return PlacedRoom(target: try target(placement, token: token, e, role: role), token: token, placement: placement)
        }
        guard !e.servers.isEmpty else { return nil }
        let addresses = try Appliance.addresses(e.servers)
        if e.backend == .janus {
            return PlacedRoom(target: try Appliance.janusTarget(e, addresses: addresses, role: role), token: token, placement: nil)
        }
        guard let token else { throw SystemError("no room token: set room.token_file (or --token-file)") }
        return PlacedRoom(target: .roomserver(servers: addresses, tls: e.signalling.tlsSettings, token: token, role: role),
                          token: token, placement: nil)
    }

    /// The token's placement when it has one that verifies; nil when it has none. Without
    /// `room.placement_key` a token that is not a JWT at all is left to the server to refuse,
    /// exactly as before placement existed.
    private static func checkedPlacement(of token: String, _ e: EffectiveSettings) throws(SystemError) -> TokenPlacement? {
        var verifier = PlacementVerifier(key: nil)
        if let path = e.placementKey {
            do { verifier = try PlacementVerifier(publicKeyPEM: try Files.readText(path)) } catch {
                throw SystemError("room.placement_key \(path): \(error)")
            }
        }
        do {
            return try verifier.placement(of: token)
        } catch .token(.malformed) where verifier.key == nil {
            return nil
        } catch {
            throw SystemError(error.description)
        }
    }

    /// The join a verified placement asks for: its server with the configuration's TLS checks
    /// (`room.tls_*`, or plain), never the configured Janus room's PIN or secret (they belong to
    /// `room.server`).
    private static func target(_ placement: TokenPlacement, token: String, _ e: EffectiveSettings, role: RoomRole) throws(SystemError) -> RoomTarget {
        let address: HostPort
        do { address = try HostPort(parsing: placement.server) } catch {
            throw SystemError(PlacementError.claim("server", "\"\(TokenPlacement.quoted(placement.server))\" is not host:port: \(error)").description)
        }
        switch placement.backend {
        case .roomserver:
            return .roomserver(servers: [address], tls: e.signalling.tlsSettings, token: token, role: role)
        case .janus:
            guard e.opusFrameMilliseconds == 20 else { throw SystemError(Appliance.janusFrameProblem) }
            // TokenPlacement sets the number for every janus placement.
            guard let room = placement.janusRoom else { throw SystemError(PlacementError.claim("room", "no AudioBridge room number").description) }
            return try Appliance.janusTarget(e, addresses: [address], room: room, pin: nil, secret: nil, display: e.displayName, role: role)
        }
    }
}
