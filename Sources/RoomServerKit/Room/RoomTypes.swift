// The room state machine's own value types (see Room.swift and docs/room-semantics.md); the
// vocabulary it shares with the wire (roles, grants, stage states) is RoomProtocol's RoomVocabulary.

import RoomModel
import RoomProtocol

/// Monotonic time in milliseconds, injected by the caller. The room never reads a clock.
public typealias RoomInstant = Int64

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
