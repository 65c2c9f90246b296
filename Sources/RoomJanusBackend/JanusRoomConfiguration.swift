import RoomModel
import RoomSystem
import RoomTLS

/// What the appliance needs to join a room on a Janus server (roomd.conf `room.backend =
/// janus`; docs/janus.md).
public struct JanusRoomConfiguration: Sendable {
    /// Janus's WebSocket transport (`room.server`), tried in turn like roomserver's addresses.
    public var endpoints: [HostPort]
    /// nil: plain `ws` (`room.plaintext_signalling = yes`); otherwise `wss` with these checks.
    public var tls: TLSClientSettings?
    /// The AudioBridge room number (`room.janus_room`).
    public var room: UInt64
    /// The room's PIN, when it has one (`room.janus_pin`).
    public var pin: String?
    /// The room's secret (`room.janus_secret`): makes the appliance a moderator — approving a
    /// raised hand unmutes that participant, demoting or muting mutes it, kicking removes it.
    public var secret: String?
    /// A STUN server (`room.stun_server`): the appliance then offers its NAT's address too
    /// (a server-reflexive candidate) besides its host address.
    public var stunServer: HostPort?
    /// The name browsers show (`room.display_name`; default: the host name).
    public var display: String
    /// streamer: joins speaking (unmuted); audience: joins muted, and only a moderator's unmute
    /// puts it on the stage.
    public var role: RoomRole
    public var backoff = RoomBackoff()
    /// Failing for longer than this turns `reconnecting`/`connecting` into `failed` (the LED).
    public var failureTimeout: Duration = .seconds(10)
    /// From the WebSocket connect to the PeerConnection up: longer is a failed attempt.
    public var joinTimeout: Duration = .seconds(10)
    /// How long `leave` waits for its messages to leave before closing.
    public var leaveLinger: Duration = .milliseconds(100)

    public init(endpoints: [HostPort], tls: TLSClientSettings?, room: UInt64, pin: String? = nil, secret: String? = nil,
                display: String, role: RoomRole) {
        self.secret = secret
        self.endpoints = endpoints
        self.tls = tls
        self.room = room
        self.pin = pin
        self.display = display
        self.role = role
    }
}
