// The small value types of the room state machine (see Room.swift and docs/room-semantics.md).
//
// Names are prefixed with `Room` so a module that imports both RoomCore and RoomProtocol
// (the server) never sees two types with the same name. Raw values are the wire spellings
// ("audience", "hand_raised", "token_expired", "not_moderator", ...), so the mapping to the
// protocol is a rename, never a translation.

/// A participant's id in one room session. Assigned by the caller (the server), never reused
/// while the participant is present; a reconnecting client gets a new one and names the old
/// one in `RoomJoinRequest.previousParticipantID`.
public typealias RoomParticipantID = UInt32

/// Monotonic time in milliseconds, injected by the caller. The room never reads a clock.
public typealias RoomInstant = Int64

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

/// A refused command. A command that fails changes nothing.
public struct RoomError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: RoomErrorCode
    public var message: String

    public init(_ code: RoomErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Room-wide settings, fixed for the room's life.
public struct RoomConfig: Sendable, Equatable {
    public var policy: RoomStagePolicy
    /// Most participants on stage at once. 0 makes a listen-only room.
    public var speakerLimit: Int
    /// How many streams the forwarder sends to each listener (the loudest N).
    public var topN: Int
    /// Attributes the room starts with (same limits as `setAttribute`).
    public var attributes: [String: String]
    /// `token_will_expire` is sent this long before a token's expiry.
    public var tokenWarningMs: Int64
    /// How long roomserver keeps the seat of a participant whose connection was lost,
    /// unannounced, for it to come back (then `participant_left` reason `timeout`); and, after
    /// that, how long a reconnect naming it still gets its stage state back. An empty room
    /// lives this long too.
    public var reconnectGraceMs: Int64
    /// An active speaker stays in the set at least this long after it entered, and until it
    /// has been silent this long.
    public var speakerHoldMs: Int64
    /// A new speaker displaces the weakest active one only when it is louder by this many dB.
    public var speakerHysteresisDB: Double
    /// A participant counts as talking when its last voiced audio-level report is at most
    /// this old.
    public var voiceWindowMs: Int64
    /// Weight of each new audio-level report in the smoothed level (exponential average).
    public var levelSmoothing: Double
    /// Under contention (more publishers talking than `topN`), one that has waited outside the
    /// set this long takes the place of the speaker that has held its place longest, if that
    /// one has held it this long too, whatever their levels. Levels are the publishers' own
    /// claims (the server does not decode audio), so without turns a publisher claiming to be
    /// the loudest held a place for as long as it liked (docs/room-semantics.md). 0: no turns.
    public var speakerTurnMs: Int64

    public static let maxAttributeKeyBytes = 64
    public static let maxAttributeValueBytes = 1024
    public static let maxAttributes = 64

    public init(policy: RoomStagePolicy = .open, speakerLimit: Int = 6, topN: Int = 3,
                attributes: [String: String] = [:], tokenWarningMs: Int64 = 60_000,
                reconnectGraceMs: Int64 = 20_000, speakerHoldMs: Int64 = 1_000,
                speakerHysteresisDB: Double = 6, voiceWindowMs: Int64 = 300,
                levelSmoothing: Double = 0.25, speakerTurnMs: Int64 = 5_000) {
        self.policy = policy
        self.speakerLimit = speakerLimit
        self.topN = topN
        self.attributes = attributes
        self.tokenWarningMs = tokenWarningMs
        self.reconnectGraceMs = reconnectGraceMs
        self.speakerHoldMs = speakerHoldMs
        self.speakerHysteresisDB = speakerHysteresisDB
        self.voiceWindowMs = voiceWindowMs
        self.levelSmoothing = levelSmoothing
        self.speakerTurnMs = speakerTurnMs
    }

    /// Throws `invalid_config` (or `attribute_limit` for the initial attributes).
    public func validate() throws(RoomError) {
        if speakerLimit < 0 { throw RoomError(.invalidConfig, "speaker_limit must be >= 0, got \(speakerLimit)") }
        if topN < 1 { throw RoomError(.invalidConfig, "top_n must be >= 1, got \(topN)") }
        if tokenWarningMs < 0 { throw RoomError(.invalidConfig, "token_warning_ms must be >= 0") }
        if reconnectGraceMs < 0 { throw RoomError(.invalidConfig, "reconnect_grace_ms must be >= 0") }
        if speakerHoldMs < 0 { throw RoomError(.invalidConfig, "speaker_hold_ms must be >= 0") }
        if !(speakerHysteresisDB >= 0) { throw RoomError(.invalidConfig, "speaker_hysteresis_db must be >= 0") }
        if voiceWindowMs < 0 { throw RoomError(.invalidConfig, "voice_window_ms must be >= 0") }
        if speakerTurnMs < 0 { throw RoomError(.invalidConfig, "speaker_turn_ms must be >= 0") }
        if !(levelSmoothing > 0 && levelSmoothing <= 1) {
            throw RoomError(.invalidConfig, "level_smoothing must be in (0, 1], got \(levelSmoothing)")
        }
        if attributes.count > Self.maxAttributes {
            throw RoomError(.attributeLimit, "\(attributes.count) attributes, at most \(Self.maxAttributes)")
        }
        for key in attributes.keys.sorted() {
            try Self.checkAttribute(key: key, value: attributes[key]!)
        }
    }

    static func checkAttribute(key: String, value: String?) throws(RoomError) {
        if key.utf8.isEmpty { throw RoomError(.attributeLimit, "attribute key is empty") }
        if key.utf8.count > maxAttributeKeyBytes {
            throw RoomError(.attributeLimit, "attribute key is \(key.utf8.count) bytes, at most \(maxAttributeKeyBytes)")
        }
        if let value, value.utf8.count > maxAttributeValueBytes {
            throw RoomError(.attributeLimit,
                            "attribute '\(key)' value is \(value.utf8.count) bytes, at most \(maxAttributeValueBytes)")
        }
    }
}
