/// Bounded exponential back-off between connection attempts (docs/room-client.md).
///
/// The delay before attempt *n* after *n* failures in a row is `initial × multiplier^n`,
/// capped at `maximum`, then shortened at random by up to `jitter` (a fraction) so that many
/// appliances that lost the same server do not come back in lock-step. Jitter only ever
/// shortens a delay, so `maximum` is a hard bound.
public struct RoomBackoff: Sendable, Equatable {
    public var initial: Duration
    public var multiplier: Double
    public var maximum: Duration
    /// 0 … 1: the fraction of a delay that may be taken off at random.
    public var jitter: Double

    public init(
        initial: Duration = .milliseconds(500), multiplier: Double = 2, maximum: Duration = .seconds(10),
        jitter: Double = 0.2
    ) {
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The delay after `failures` failed attempts in a row (0: the first retry after a drop).
    /// `random` is in 0 … 1 (0: no jitter taken off).
    public func delay(afterFailures failures: Int, random: Double) -> Duration {
        let maxSeconds = max(0, maximum.seconds)
        var seconds = max(0, initial.seconds)
        var n = 0
        while n < failures && seconds < maxSeconds {
            seconds *= max(1, multiplier)
            n += 1
        }
        seconds = min(seconds, maxSeconds)
        seconds *= 1 - min(max(jitter, 0), 1) * min(max(random, 0), 1)
        return .nanoseconds(Int64(seconds * 1e9))
    }

    /// The delay used once `.failed` has been reported: the longest one (with jitter).
    public func slowest(random: Double) -> Duration { delay(afterFailures: Int.max, random: random) }
}

/// What the room client is doing.
public enum RoomConnectionState: Sendable, Equatable, CustomStringConvertible {
    /// Created, `start()` not called yet.
    case idle
    /// The first join is under way.
    case connecting
    /// Joined (`welcome` received); media may flow.
    case connected
    /// A joined session was lost (TCP closed, server silent, server restart); trying again.
    case reconnecting
    /// No connection for longer than the failure threshold. The session keeps trying (at the
    /// longest back-off) and goes back to `connected` by itself when a server answers.
    case failed(reason: String)
    /// The session stopped and does not reconnect by itself (see `RoomDisconnectReason`).
    case disconnected(RoomDisconnectReason)

    /// The state without its reason: the control API's `connection` value.
    public var name: String {
        switch self {
        case .idle: "idle"
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting: "reconnecting"
        case .failed: "failed"
        case .disconnected: "disconnected"
        }
    }

    public var description: String {
        switch self {
        case .failed(let reason): "failed (\(reason))"
        case .disconnected(let reason): "disconnected (\(reason))"
        default: name
        }
    }
}

/// Why a session stopped for good (until the daemon acts).
public enum RoomDisconnectReason: Sendable, Equatable, CustomStringConvertible {
    /// `leave()` completed.
    case left
    /// `stop()` was called.
    case stopped
    /// The server removed this participant: `kicked`, `replaced`, or `room_closed` when
    /// `rejoinAfterRoomClosed` is off. Start a new session (or call `start()`) to join again.
    case removed(RoomLeaveReason, message: String)
    /// The token expired (removed with `token_expired`, or a `hello` refused with
    /// `token_expired`). `refreshToken(_:)` with a new token reconnects.
    case tokenExpired(message: String)

    public var description: String {
        switch self {
        case .left: "left"
        case .stopped: "stopped"
        case .removed(let reason, let message): message.isEmpty ? "removed: \(reason.rawValue)" : "removed: \(reason.rawValue): \(message)"
        case .tokenExpired(let message): message.isEmpty ? "token expired" : "token expired: \(message)"
        }
    }
}

/// The room as this client joined it (from `welcome`).
public struct RoomJoinInfo: Sendable, Equatable {
    public var room: String
    public var participantID: RoomParticipantID
    /// The SSRC every outgoing packet is sent with.
    public var ssrc: UInt32
    public var policy: RoomStagePolicy
    public var speakerLimit: Int
    public var participants: [ParticipantInfo]
    public var attributes: [String: String]
    public var tokenExpiresAt: Int
    /// The server gave back the participant id of the previous connection (its stage state
    /// was restored). False on the first join and when the server had forgotten us.
    public var restored: Bool
    /// True for every join after the first one of this session.
    public var isRejoin: Bool
    /// How often the server wants `reportLoss` (nil: it takes no loss reports).
    public var lossReportIntervalMs: Int? = nil
    /// The application (tenant) the room belongs to, as the server said (nil: an older server,
    /// or a backend without tenants, such as Janus).
    public var app: String? = nil

    public init(room: String, participantID: RoomParticipantID, ssrc: UInt32, policy: RoomStagePolicy, speakerLimit: Int,
                participants: [ParticipantInfo], attributes: [String: String], tokenExpiresAt: Int, restored: Bool,
                isRejoin: Bool, lossReportIntervalMs: Int? = nil, app: String? = nil) {
        self.app = app
        self.room = room
        self.participantID = participantID
        self.ssrc = ssrc
        self.policy = policy
        self.speakerLimit = speakerLimit
        self.participants = participants
        self.attributes = attributes
        self.tokenExpiresAt = tokenExpiresAt
        self.restored = restored
        self.isRejoin = isRejoin
        self.lossReportIntervalMs = lossReportIntervalMs
    }
}

/// A request the server refused, or one that could not be sent.
public struct RoomRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server's error code, or a local one: `not_connected` (no joined connection),
    /// `connection_lost` (the connection closed before the answer), `invalid_field` (refused
    /// locally: a limit the server would refuse too), `backpressure` (the server does not read).
    public var code: ErrorCode
    public var message: String

    public init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public static let notConnected: ErrorCode = "not_connected"
    public static let connectionLost: ErrorCode = "connection_lost"
    public static let backpressure: ErrorCode = "backpressure"

    public var description: String { "\(code.rawValue): \(message)" }
}

/// A failed request, as reported by `RoomSessionEvent.requestFailed` (requests made without
/// a completion closure).
public struct RoomRequestFailure: Sendable, Equatable {
    public var requestID: Int
    /// The request's wire type, e.g. `raise_hand`.
    public var request: String
    public var error: RoomRequestError

    public init(requestID: Int, request: String, error: RoomRequestError) {
        self.requestID = requestID
        self.request = request
        self.error = error
    }
}

public typealias RoomRequestCompletion = (Result<Void, RoomRequestError>) -> Void

/// Everything the session tells the daemon, on the loop thread.
public enum RoomSessionEvent: Sendable, Equatable {
    case stateChanged(RoomConnectionState)
    /// A `welcome`: the local model (`participants`, `attributes`) now holds this state.
    case joined(RoomJoinInfo)
    case participantJoined(ParticipantInfo)
    /// `participant` is the last known info (nil if it was unknown).
    case participantLeft(id: RoomParticipantID, reason: RoomLeaveReason, participant: ParticipantInfo?)
    /// Someone's role, stage or mute changed (this participant included).
    case participantUpdated(ParticipantInfo)
    /// This participant's stage changed (`off`, `hand_raised`, `invited`, `on_stage`).
    case localStageChanged(RoomStageState)
    /// This participant's mute as the server sees it (self mute or a moderator's).
    case localMuteChanged(Bool)
    /// A moderator invites this participant on stage: ring, then `acceptInvite`/`declineInvite`.
    case invited(by: RoomParticipantID)
    /// Moderators: someone raised a hand in a moderated room.
    case stageRequest(participantID: RoomParticipantID)
    case activeSpeakers(ids: [RoomParticipantID], levels: [UInt8])
    case appMessage(from: RoomParticipantID?, to: RoomParticipantID?, data: String)
    /// `value` nil: deleted.
    case attributeChanged(key: String, value: String?)
    /// Refresh before `expiresAt` (seconds since the epoch) with `refreshToken(_:)`.
    case tokenWillExpire(expiresAt: Int)
    /// The server removed this participant; `stateChanged` follows with what happens next.
    case removed(reason: RoomLeaveReason, message: String)
    /// A request without a completion closure failed.
    case requestFailed(RoomRequestFailure)
    /// The worst packet loss the receivers of this participant's stream reported lately
    /// (permille of the packets sent, uplink included), from `receiver_loss`.
    case receiverLoss(lostPermille: Int, receivers: Int)
    /// The UDP media path works both ways (first binding answer) or went silent
    /// (`mediaSilenceTimeout` without a binding answer; binding datagrams keep going).
    case mediaPathChanged(up: Bool)
}

/// Counters for the daemon's status output. All counts since the session was created.
public struct RoomSessionStatistics: Sendable, Equatable {
    /// RTP packets handed to the socket.
    public var packetsSent = 0
    /// Outgoing packets dropped because this participant is not on stage.
    public var droppedNotOnStage = 0
    /// Outgoing packets dropped because this participant is muted (self or moderator).
    public var droppedMuted = 0
    /// Outgoing packets dropped because there is no joined connection / media path.
    public var droppedNotConnected = 0
    /// Outgoing packets dropped by the socket (buffer full, send error) or too large.
    public var droppedSendFailed = 0
    /// RTP packets received and pushed to the incoming ring.
    public var packetsReceived = 0
    /// Received RTP packets dropped because the incoming ring was full.
    public var droppedIncomingRingFull = 0
    /// Datagrams that are neither valid RTP/Opus nor a binding datagram (dropped).
    public var garbageDatagrams = 0
    /// Binding datagrams with a wrong length, magic, MAC or participant id (dropped).
    public var invalidBindingDatagrams = 0
    /// Datagrams from an address other than the server's media port (dropped).
    public var foreignDatagrams = 0
    /// SRTP packets whose tag did not verify with the downlink key (forged or corrupted; dropped).
    public var srtpAuthenticationFailures = 0
    /// SRTP packets refused as replays (an index already received or behind the window; dropped).
    public var srtpReplays = 0
    /// Outgoing packets SRTP refused to protect (counted in `droppedSendFailed` too).
    public var srtpProtectFailures = 0
    public var bindingsSent = 0
    public var bindingAnswers = 0
    /// Server answers saying the address is not proven yet (the next binding echoes the cookie).
    public var bindingChallenges = 0
    /// Signalling frames that did not decode (logged, dropped; the connection stays).
    public var malformedFrames = 0
    /// Connection attempts (TCP connects) made.
    public var connectAttempts = 0
    /// Times a joined connection was lost and recovery started.
    public var reconnects = 0
    /// Successful joins (`welcome`s).
    public var joins = 0
    /// Round trip of the last binding datagram answered (media path), milliseconds.
    public var lastMediaRTTMs: Int?
    /// Round trip of the last `ping`/`pong` (signalling), milliseconds.
    public var lastSignalRTTMs: Int?

    public init() {}
}

extension Duration {
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
