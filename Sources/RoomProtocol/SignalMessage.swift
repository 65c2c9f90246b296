import RoomMedia
import RoomModel


/// One signalling message: the JSON object carried by one frame,
/// `{"type": "...", "id": <request id>?, ...fields}` (docs/protocol.md, protocol 1).
///
/// Fields sit flat beside `type` rather than in a nested object so that a message reads the
/// same in a packet capture as in the documentation. Fields a receiver does not know are
/// ignored (a peer may add optional fields without a version bump); unknown `type`s are an
/// error the receiver answers without dropping the connection.
public struct SignalMessage: Sendable, Equatable {
    /// Request id chosen by the client; the server echoes it as `request_id` in the `ok` or
    /// `error` that answers the request. Events carry none.
    public var id: Int?
    public var body: Body

    public init(id: Int? = nil, _ body: Body) {
        self.id = id
        self.body = body
    }

    /// Who may send a message type. A receiver answers a message from the wrong side with
    /// `unexpected_message` instead of acting on it (a client must not forge events).
    public enum Direction: Sendable, Equatable {
        case clientToServer
        case serverToClient
        case both
    }

    public enum Body: Sendable, Equatable {
        // Handshake and answers.
        case hello(Hello)
        case welcome(Welcome)
        case error(ErrorInfo)
        case ok(requestID: Int)

        // Client requests.
        case leave
        case raiseHand
        case lowerHand
        case stepDown
        case acceptInvite
        case declineInvite
        case setMute(muted: Bool)
        case approve(participantID: RoomParticipantID)
        case deny(participantID: RoomParticipantID)
        case invite(participantID: RoomParticipantID)
        case demote(participantID: RoomParticipantID)
        case muteParticipant(participantID: RoomParticipantID)
        case kick(participantID: RoomParticipantID, reason: String?)
        /// Both directions: the server fills in `from` when relaying.
        case appMessage(AppMessage)
        case setAttribute(key: String, value: String?)
        case refreshToken(token: String)
        case ping(t: Int64)
        case lossReport(LossReport)

        // Server events.
        case participantJoined(ParticipantInfo)
        case participantLeft(participantID: RoomParticipantID, reason: RoomLeaveReason)
        case participantUpdated(ParticipantInfo)
        case stageRequest(participantID: RoomParticipantID)
        case invited(by: RoomParticipantID)
        case activeSpeakers(ActiveSpeakers)
        case attributeChanged(key: String, value: String?)
        case tokenWillExpire(expiresAt: Int)
        case removed(reason: RoomLeaveReason, message: String)
        case pong(t: Int64)
        case receiverLoss(ReceiverLoss)
    }
}

extension SignalMessage {
    /// The client's first message. `protocolVersion` comes first on purpose: a server checks
    /// it before anything else (see `SignalMessage.peek`), so a client of another version
    /// gets `unsupported_version` even if the rest of its hello looks different.
    public struct Hello: Sendable, Equatable {
        public var protocolVersion: Int
        /// Software name and version, e.g. "roomd/0.1.0", for logs and diagnostics.
        public var client: String
        public var token: String
        /// The role asked for. `streamer` needs the token's publish grant and puts the
        /// participant on stage if the room has room for one more speaker.
        public var role: RoomRole
        /// The id this client had before a reconnect: the server gives it back, with its
        /// stage state, while it still remembers the participant (same user).
        public var previousParticipantID: RoomParticipantID?

        public init(
            protocolVersion: Int = roomProtocolVersion, client: String, token: String,
            role: RoomRole, previousParticipantID: RoomParticipantID? = nil
        ) {
            self.protocolVersion = protocolVersion
            self.client = client
            self.token = token
            self.role = role
            self.previousParticipantID = previousParticipantID
        }
    }

    /// The server's answer to an accepted `hello`: everything a newcomer needs to take part,
    /// including the room's state (participants, attributes), so no further query is needed.
    public struct Welcome: Sendable, Equatable {
        public var protocolVersion: Int
        public var participantID: RoomParticipantID
        public var room: String
        /// The SSRC this participant must use for its RTP stream (server-assigned, so SSRCs
        /// never collide within a room).
        public var ssrc: UInt32
        /// The server's UDP port for media and binding datagrams (same host as signalling).
        public var udpPort: UInt16
        /// Authenticates binding datagrams (`BindingDatagram`).
        public var mediaKey: MediaKey
        public var policy: RoomStagePolicy
        /// Most participants on stage at once.
        public var speakerLimit: Int
        /// Everyone in the room, the newcomer included.
        public var participants: [ParticipantInfo]
        public var attributes: [String: String]
        /// The token's `exp`, seconds since the epoch.
        public var tokenExpiresAt: Int
        /// How often the server wants `loss_report`s, in milliseconds; nil: it takes none (an
        /// older server, which would answer the message `unknown_type`).
        public var lossReportIntervalMs: Int?
        /// The SRTP keys of this participant's media (`srtp_profile`, `srtp_uplink_key`,
        /// `srtp_downlink_key`); nil: the server sends and expects plain RTP (a development
        /// server with `[media] srtp = false`, or an older one).
        public var mediaEncryption: MediaEncryption?
        /// The application (tenant) the room belongs to, the token's `app`: one server serves
        /// several, and a room is named by both (docs/protocol.md). nil from an older server.
        public var app: String?

        public init(
            protocolVersion: Int = roomProtocolVersion, participantID: RoomParticipantID, room: String,
            ssrc: UInt32, udpPort: UInt16, mediaKey: MediaKey, policy: RoomStagePolicy,
            speakerLimit: Int, participants: [ParticipantInfo], attributes: [String: String],
            tokenExpiresAt: Int, lossReportIntervalMs: Int? = nil, mediaEncryption: MediaEncryption? = nil,
            app: String? = nil
        ) {
            self.app = app
            self.protocolVersion = protocolVersion
            self.participantID = participantID
            self.room = room
            self.ssrc = ssrc
            self.udpPort = udpPort
            self.mediaKey = mediaKey
            self.policy = policy
            self.speakerLimit = speakerLimit
            self.participants = participants
            self.attributes = attributes
            self.tokenExpiresAt = tokenExpiresAt
            self.lossReportIntervalMs = lossReportIntervalMs
            self.mediaEncryption = mediaEncryption
        }
    }

    public struct ErrorInfo: Sendable, Equatable {
        public var code: ErrorCode
        /// For people; programs switch on `code`.
        public var message: String
        /// The `id` of the request this answers; nil for errors not tied to a request (a
        /// refused hello without id, a frame that could not be parsed far enough).
        public var requestID: Int?

        public init(code: ErrorCode, message: String, requestID: Int? = nil) {
            self.code = code
            self.message = message
            self.requestID = requestID
        }
    }

    public struct AppMessage: Sendable, Equatable {
        /// Set by the server when relaying; whatever a client puts here is overwritten.
        public var from: RoomParticipantID?
        /// One recipient, or nil for everyone else in the room.
        public var to: RoomParticipantID?
        /// Opaque to the server, at most `SignalLimits.maxAppMessageBytes` UTF-8 bytes.
        public var data: String

        public init(from: RoomParticipantID? = nil, to: RoomParticipantID? = nil, data: String) {
            self.from = from
            self.to = to
            self.data = data
        }
    }

    /// Parallel arrays rather than an array of objects: this event is the most frequent
    /// one and a small board parses it several times a second.
    public struct ActiveSpeakers: Sendable, Equatable {
        /// Participant ids, loudest first, at most the room's top-N.
        public var ids: [RoomParticipantID]
        /// RFC 6464 levels (-dBov, 0 loudest, 127 silence), one per id.
        public var levels: [UInt8]

        public init(ids: [RoomParticipantID], levels: [UInt8]) {
            self.ids = ids
            self.levels = levels
        }
    }
}

extension SignalMessage {
    /// A receiver's packet loss per sender since its previous report, so that each sender can
    /// protect its stream (Opus in-band FEC) only when someone actually loses packets.
    /// Parallel arrays, like `ActiveSpeakers`.
    public struct LossReport: Sendable, Equatable {
        /// The senders' SSRCs.
        public var ssrcs: [UInt32]
        /// Per SSRC, the packets lost as a share of those the sender sent, in permille.
        public var lostPermille: [UInt16]

        public init(ssrcs: [UInt32], lostPermille: [UInt16]) {
            self.ssrcs = ssrcs
            self.lostPermille = lostPermille
        }
    }

    /// To a sender: the worst loss any receiver reported for its stream lately, the uplink's
    /// loss included (the server forwards packets unchanged, so a receiver sees every loss on
    /// the way).
    public struct ReceiverLoss: Sendable, Equatable {
        public var lostPermille: UInt16
        /// Receivers whose reports are counted.
        public var receivers: Int

        public init(lostPermille: UInt16, receivers: Int) {
            self.lostPermille = lostPermille
            self.receivers = receivers
        }
    }
}

extension SignalMessage.Body {
    /// The `type` string on the wire.
    public var typeName: String {
        switch self {
        case .hello: "hello"
        case .welcome: "welcome"
        case .error: "error"
        case .ok: "ok"
        case .leave: "leave"
        case .raiseHand: "raise_hand"
        case .lowerHand: "lower_hand"
        case .stepDown: "step_down"
        case .acceptInvite: "accept_invite"
        case .declineInvite: "decline_invite"
        case .setMute: "set_mute"
        case .approve: "approve"
        case .deny: "deny"
        case .invite: "invite"
        case .demote: "demote"
        case .muteParticipant: "mute_participant"
        case .kick: "kick"
        case .appMessage: "app_message"
        case .setAttribute: "set_attribute"
        case .refreshToken: "refresh_token"
        case .ping: "ping"
        case .lossReport: "loss_report"
        case .participantJoined: "participant_joined"
        case .participantLeft: "participant_left"
        case .participantUpdated: "participant_updated"
        case .stageRequest: "stage_request"
        case .invited: "invited"
        case .activeSpeakers: "active_speakers"
        case .attributeChanged: "attribute_changed"
        case .tokenWillExpire: "token_will_expire"
        case .removed: "removed"
        case .pong: "pong"
        case .receiverLoss: "receiver_loss"
        }
    }

    public var direction: SignalMessage.Direction {
        switch self {
        case .hello, .leave, .raiseHand, .lowerHand, .stepDown, .acceptInvite, .declineInvite, .setMute,
            .approve, .deny, .invite, .demote, .muteParticipant, .kick, .setAttribute, .refreshToken, .ping, .lossReport:
            .clientToServer
        case .welcome, .ok, .participantJoined, .participantLeft, .participantUpdated, .stageRequest,
            .invited, .activeSpeakers, .attributeChanged, .tokenWillExpire, .removed, .pong, .receiverLoss:
            .serverToClient
        case .appMessage, .error:
            .both
        }
    }

    /// Requests a moderator must make (the token's moderate grant).
    public var needsModerator: Bool {
        switch self {
        case .approve, .deny, .invite, .demote, .muteParticipant, .kick: true
        default: false
        }
    }

    /// Every type name of protocol 1, for documentation checks and tests.
    public static let allTypeNames: [String] = [
        "hello", "welcome", "error", "ok", "leave", "raise_hand", "lower_hand", "step_down",
        "accept_invite", "decline_invite", "set_mute", "approve", "deny", "invite", "demote",
        "mute_participant", "kick", "app_message", "set_attribute", "refresh_token", "ping",
        "participant_joined", "participant_left", "participant_updated", "stage_request", "invited",
        "active_speakers", "attribute_changed", "token_will_expire", "removed", "pong",
        "loss_report", "receiver_loss",
    ]
}
