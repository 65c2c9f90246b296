import RoomBase
import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

/// How a `RoomSession` joins and recovers (docs/room-client.md has the numbers and why).
public struct RoomSessionConfiguration: Sendable {
    /// Signalling servers, tried in turn (failover): host names are resolved at each attempt,
    /// and the host as given is the name a TLS certificate must carry (unless `tls.serverName`).
    public var endpoints: [HostPort]
    /// The numeric entries of `endpoints` (setting it replaces them all).
    public var servers: [SocketAddress] {
        get { endpoints.compactMap(\.numericAddress) }
        set { endpoints = newValue.map(HostPort.init(address:)) }
    }
    /// Signalling over TLS 1.3 with these checks (docs/security.md); nil: plain TCP. roomd
    /// always sets it unless `plaintext_signalling` is on; the library default is plain only
    /// because most tests run an in-process server on a plain listener.
    public var tls: TLSClientSettings?
    /// The JWT for the room; replace it with `RoomSession.refreshToken(_:)`.
    public var token: String
    /// The role asked for on the first join. Later joins ask for the role held last.
    public var role: RoomRole
    /// Sent in `hello.client`, e.g. "roomd/0.1.0".
    public var clientName: String

    public var backoff: RoomBackoff
    /// Report `.failed` after this many failed attempts in a row …
    public var failureThreshold: Int
    /// … or after this long without a joined connection, whichever comes first.
    public var failureTimeout: Duration
    /// A TCP connect plus `hello` that gets no `welcome` within this time is a failed attempt.
    public var handshakeTimeout: Duration

    /// Signalling keepalive: a `ping` this often (protocol: 5 s).
    public var pingInterval: Duration
    /// Nothing received for this long → the connection is dead, reconnect (protocol: 15 s).
    public var silenceTimeout: Duration
    /// Binding datagram period once the media path answered (protocol: 2 s). Each answer is a
    /// round-trip measurement, and the call-quality warning for a long round trip must come
    /// within 5 s of it (two samples, docs/control-api.md, "Call quality").
    public var bindingInterval: Duration
    /// Until the first answer, binding datagrams are retried after `bindingRetryFirst`, then at
    /// twice the previous wait up to `bindingRetryInterval`: the server drops a participant's
    /// media until it is bound, so a lost first datagram must cost tens of milliseconds of
    /// audio, not a second (it cost ~3 s with a fixed 1 s period checked on a 1 s tick).
    public var bindingRetryFirst: Duration
    /// The longest wait between two binding datagrams before the first answer.
    public var bindingRetryInterval: Duration
    /// No binding answer for this long → report the media path down (protocol: 15 s).
    public var mediaSilenceTimeout: Duration

    /// A `removed {room_closed}` is also what a server sends when it shuts down for a restart.
    /// True (the default): rejoin with the usual back-off, so appliances come back by
    /// themselves after a server restart. False: stop as for `kicked` (docs/protocol.md's
    /// strict reading).
    public var rejoinAfterRoomClosed: Bool
    /// How long `leave()` waits for the server's `ok` before closing anyway.
    public var leaveTimeout: Duration
    /// Signalling frame limit; must match the server's.
    public var maxFrameSize: Int
    /// Refuse plain RTP: a `welcome` without SRTP keys starts no media (logged as an error).
    /// roomd sets it unless `room.plain_media = yes` (development only); the library default
    /// follows the server, for test servers that speak plain RTP.
    public var requireMediaEncryption = false

    public init(
        servers: [SocketAddress], token: String, role: RoomRole = .audience,
        clientName: String = "roomd/\(roomdVersion)",
        backoff: RoomBackoff = RoomBackoff(), failureThreshold: Int = 3, failureTimeout: Duration = .seconds(30),
        handshakeTimeout: Duration = .seconds(10),
        pingInterval: Duration = .seconds(5), silenceTimeout: Duration = .seconds(15),
        bindingInterval: Duration = .seconds(2), bindingRetryFirst: Duration = .milliseconds(20),
        bindingRetryInterval: Duration = .seconds(1),
        mediaSilenceTimeout: Duration = .seconds(15),
        rejoinAfterRoomClosed: Bool = true, leaveTimeout: Duration = .seconds(2),
        maxFrameSize: Int = SignalFraming.defaultMaxFrameSize
    ) {
        self.endpoints = servers.map(HostPort.init(address:))
        self.token = token
        self.role = role
        self.clientName = clientName
        self.backoff = backoff
        self.failureThreshold = failureThreshold
        self.failureTimeout = failureTimeout
        self.handshakeTimeout = handshakeTimeout
        self.pingInterval = pingInterval
        self.silenceTimeout = silenceTimeout
        self.bindingInterval = bindingInterval
        self.bindingRetryFirst = bindingRetryFirst
        self.bindingRetryInterval = bindingRetryInterval
        self.mediaSilenceTimeout = mediaSilenceTimeout
        self.rejoinAfterRoomClosed = rejoinAfterRoomClosed
        self.leaveTimeout = leaveTimeout
        self.maxFrameSize = maxFrameSize
    }
}
