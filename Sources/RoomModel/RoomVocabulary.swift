// The room's vocabulary: the roles, stage states, leave reasons, grants and error codes that the
// wire messages, the tokens, the room state machine (RoomServerKit) and the clients all speak.
//
// Names are prefixed with `Room` so a module never sees two types with the same name as the
// signalling messages' own. Raw values are the wire spellings ("audience", "hand_raised",
// "token_expired", "not_moderator", ...), so the mapping to the protocol is a rename, never a
// translation.

/// A participant's id in one room session. Assigned by the caller (the server), never reused
/// while the participant is present; a reconnecting client gets a new one and names the old
/// one in `RoomJoinRequest.previousParticipantID`.
public typealias RoomParticipantID = UInt32


/// How participants get on stage.
public enum RoomStagePolicy: String, Sendable, Equatable, CaseIterable {
    /// A raise-hand by someone with the publish grant goes on stage at once when there is a
    /// free slot, else waits in a FIFO queue and is promoted when a slot frees.
    case open
    /// Raise-hand asks the moderators, who approve, deny, invite, demote, mute and kick.
    case moderated
}

/// Audience listens only; a streamer is on stage and may send media.
public enum RoomRole: String, Sendable, Equatable, CaseIterable {
    case audience
    case streamer
}

/// Where a participant stands with respect to the stage. Exactly one per participant.
public enum RoomStageState: String, Sendable, Equatable, CaseIterable {
    case off
    case handRaised = "hand_raised"
    case invited
    case onStage = "on_stage"
}

/// Why a participant is no longer in the room.
public enum RoomLeaveReason: String, Sendable, Equatable, CaseIterable {
    /// The participant left on purpose.
    case left
    /// Its connection was lost (keepalive timeout, TCP reset). A reconnect within the
    /// grace period restores its stage state.
    case timeout
    /// A moderator removed it.
    case kicked
    /// The same user joined again (another device or a reconnect).
    case replaced
    /// Its token expired and was not refreshed in time.
    case tokenExpired = "token_expired"
    /// The room was closed (server shutdown or a moderator closed it).
    case roomClosed = "room_closed"

    /// True for reasons the server decides (the participant is told why before its
    /// connection is closed); false for `left` and `timeout`.
    public var isServerInitiated: Bool {
        switch self {
        case .left, .timeout: false
        case .kicked, .replaced, .tokenExpired, .roomClosed: true
        }
    }
}

/// What a participant's token allows.
public struct RoomGrants: Sendable, Equatable, Hashable {
    /// May go on stage (streamer role) and send media.
    public var publish: Bool
    /// May approve, deny, invite, demote, mute and kick others, and close the room.
    public var moderate: Bool

    public init(publish: Bool = false, moderate: Bool = false) {
        self.publish = publish
        self.moderate = moderate
    }

    public static let none = RoomGrants()
    public static let publisher = RoomGrants(publish: true)
    public static let moderator = RoomGrants(publish: true, moderate: true)
}

/// Error codes; the raw values are the wire spellings.
public enum RoomErrorCode: String, Sendable, Equatable, CaseIterable {
    /// A moderator command from a participant without the moderate grant.
    case notModerator = "not_moderator"
    /// A command names a participant that is not in the room (actor, target or recipient).
    case unknownParticipant = "unknown_participant"
    /// The transition is not allowed from the current state (named in the message).
    case invalidState = "invalid_state"
    /// The stage is full.
    case speakerLimit = "speaker_limit"
    /// The streamer role or a raise-hand without the publish grant.
    case missingGrant = "missing_grant"
    /// A room attribute too long, or too many attributes.
    case attributeLimit = "attribute_limit"
    /// The room has been closed; it accepts no more commands.
    case roomClosed = "room_closed"
    /// A `RoomConfig` that cannot work (negative speaker limit, top-N below 1, ...).
    case invalidConfig = "invalid_config"
}
