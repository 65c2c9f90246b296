/// What a room says about its people and its refusals, whatever serves it: a roomserver sends
/// these in its signalling (RoomProtocol codes them), a Janus backend builds them from its
/// plugin's events.

/// Machine-readable error codes in `error` messages. A struct rather than an enum so that a
/// peer speaking a newer minor revision can send codes this build does not know without the
/// whole message failing to decode.
public struct ErrorCode: RawRepresentable, Codable, Sendable, Hashable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    public init(_ code: RoomErrorCode) { self.rawValue = code.rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    // Handshake.
    public static let unsupportedVersion: ErrorCode = "unsupported_version"
    // Token refusals (see `TokenError.code`).
    public static let badSignature: ErrorCode = "bad_signature"
    public static let tokenExpired: ErrorCode = "token_expired"
    public static let tokenNotYetValid: ErrorCode = "token_not_yet_valid"
    public static let wrongRoom: ErrorCode = "wrong_room"
    public static let unknownKey: ErrorCode = "unknown_key"
    public static let missingGrant: ErrorCode = "missing_grant"
    public static let malformedToken: ErrorCode = "malformed_token"
    // Bad frames that keep the connection (see `SignalMessageError.code`).
    public static let malformedMessage: ErrorCode = "malformed_message"
    public static let unknownType: ErrorCode = "unknown_type"
    public static let invalidField: ErrorCode = "invalid_field"
    /// A server-to-client message type sent by a client (or the reverse).
    public static let unexpectedMessage: ErrorCode = "unexpected_message"
    // Requests. The room state machine's refusals use `RoomErrorCode`, whose raw values
    // are these spellings (`ErrorCode(_:)` converts).
    /// Any request other than `hello` before `welcome`.
    public static let notJoined: ErrorCode = "not_joined"
    /// A second `hello` on a joined connection.
    public static let alreadyJoined: ErrorCode = "already_joined"
    public static let notModerator: ErrorCode = "not_moderator"
    public static let unknownParticipant: ErrorCode = "unknown_participant"
    /// The request does not fit the stage state (e.g. `accept_invite` without an invitation).
    public static let invalidState: ErrorCode = "invalid_state"
    public static let speakerLimit: ErrorCode = "speaker_limit"
    public static let attributeLimit: ErrorCode = "attribute_limit"
    public static let roomClosed: ErrorCode = "room_closed"
    public static let rateLimited: ErrorCode = "rate_limited"
    public static let internalError: ErrorCode = "internal_error"
}

/// One participant as others see it: sent in `welcome`, `participant_joined` and
/// `participant_updated`.
public struct ParticipantInfo: Sendable, Hashable {
    /// Server-assigned, unique within the room for the life of the session, never 0 (0 marks
    /// the server in binding datagrams).
    public var id: RoomParticipantID
    /// The token's `sub`: the same user joining twice replaces the older session.
    public var userID: String
    public var name: String
    public var role: RoomRole
    public var stage: RoomStageState
    public var muted: Bool
    public var moderator: Bool
    /// The SSRC of the participant's RTP stream, present once it is a streamer, so receivers
    /// can map RTP streams (and active-speaker ids) to people.
    public var ssrc: UInt32?

    public init(
        id: RoomParticipantID, userID: String, name: String, role: RoomRole, stage: RoomStageState,
        muted: Bool, moderator: Bool, ssrc: UInt32? = nil
    ) {
        self.id = id
        self.userID = userID
        self.name = name
        self.role = role
        self.stage = stage
        self.muted = muted
        self.moderator = moderator
        self.ssrc = ssrc
    }
}
