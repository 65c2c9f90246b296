import RoomCore

// The wire enums are RoomCore's (`RoomRole`, `RoomStageState`, `RoomStagePolicy`,
// `RoomLeaveReason`): their raw values are the wire spellings, so the protocol and the room
// state machine cannot drift apart, and a module importing both sees one type per concept.
// They are coded through `wireEnum` below rather than made Codable here, which would be a
// retroactive conformance of RoomCore's types to a standard protocol.

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

/// Size limits checked on both encode and decode, so a client learns of a violation
/// locally, with the connection intact, instead of from the server.
public enum SignalLimits {
    /// `app_message.data`, in UTF-8 bytes.
    public static let maxAppMessageBytes = 8 * 1024
    /// Attribute keys, in UTF-8 bytes (and never empty).
    public static let maxAttributeKeyBytes = 64
    /// Attribute values, in UTF-8 bytes.
    public static let maxAttributeValueBytes = 1024
    /// Audio levels are RFC 6464 values: -dBov, 0 (loudest) to 127 (silence).
    public static let maxAudioLevel: UInt8 = 127
    /// Loss is carried in permille of the packets a sender sent (0 … 1000): integers on the
    /// wire, and finer than the whole percent libopus takes.
    public static let maxLossPermille: UInt16 = 1000
    /// Streams in one `loss_report`: a receiver hears at most the room's top-N plus a spare.
    public static let maxLossReportStreams = 16

    /// A `loss_report`'s arrays: as many values as SSRCs, each a permille, not too many.
    static func checkLossReport(ssrcs: Int, permille: [UInt16]) -> (field: String, reason: String)? {
        if ssrcs > maxLossReportStreams { return ("ssrcs", "more than \(maxLossReportStreams) streams") }
        if permille.count != ssrcs { return ("lost_permille", "\(permille.count) values for \(ssrcs) ssrcs") }
        if let index = permille.firstIndex(where: { $0 > maxLossPermille }) {
            return ("lost_permille", "lost_permille[\(index)] above \(maxLossPermille)")
        }
        return nil
    }

    static func checkAppData(_ data: String) -> String? {
        data.utf8.count <= maxAppMessageBytes ? nil : "longer than \(maxAppMessageBytes) bytes"
    }

    static func checkAttributeKey(_ key: String) -> String? {
        if key.isEmpty { return "empty" }
        return key.utf8.count <= maxAttributeKeyBytes ? nil : "longer than \(maxAttributeKeyBytes) bytes"
    }

    static func checkAttributeValue(_ value: String) -> String? {
        value.utf8.count <= maxAttributeValueBytes ? nil : "longer than \(maxAttributeValueBytes) bytes"
    }
}

/// One participant as others see it: sent in `welcome`, `participant_joined` and
/// `participant_updated`.
public struct ParticipantInfo: Sendable, Hashable, Codable {
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

    enum CodingKeys: String, CodingKey {
        case id, userID = "user_id", name, role, stage, muted, moderator, ssrc
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.uint32(.id)
        userID = try c.decode(String.self, forKey: .userID)
        name = try c.decode(String.self, forKey: .name)
        role = try c.wireEnum(RoomRole.self, .role)
        stage = try c.wireEnum(RoomStageState.self, .stage)
        muted = try c.decode(Bool.self, forKey: .muted)
        moderator = try c.decode(Bool.self, forKey: .moderator)
        ssrc = try c.uint32IfPresent(.ssrc)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(userID, forKey: .userID)
        try c.encode(name, forKey: .name)
        try c.encode(role.rawValue, forKey: .role)
        try c.encode(stage.rawValue, forKey: .stage)
        try c.encode(muted, forKey: .muted)
        try c.encode(moderator, forKey: .moderator)
        try c.encodeIfPresent(ssrc, forKey: .ssrc)
    }
}

/// A key that travels in JSON as standard padded base64 of an exact length: `welcome`'s
/// binding key and SRTP keys share one decoder, so a wrong length is refused the same way.
protocol Base64JSONKey: Codable {
    init?(base64 text: String)
    var base64: String { get }
    /// What the base64 must hold, for the error ("16 bytes").
    static var expectedContent: String { get }
}

extension Base64JSONKey {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let key = Self(base64: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not base64 of \(Self.expectedContent)")
        }
        self = key
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(base64)
    }
}

extension SRTPMasterKey: Base64JSONKey {
    static var expectedContent: String { "\(size) bytes (key and salt)" }
}

extension MediaKey: Base64JSONKey {
    static var expectedContent: String { "\(size) bytes" }
}

// Integer decoding that always names the field. JSONDecoder reports a fractional or
// out-of-range number with an internal error that only becomes a DecodingError ("not valid
// JSON", empty coding path) at the top level; decoding through these helpers turns any
// such failure into an error on the right key with the accepted range. Type mismatches and
// missing keys pass through unchanged.
extension KeyedDecodingContainer {
    func fieldError(_ key: Key, _ reason: String) -> DecodingError {
        DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: reason)
    }

    func integer<T: FixedWidthInteger & Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        do {
            return try decode(T.self, forKey: key)
        } catch let error as DecodingError {
            guard case .dataCorrupted = error else { throw error }
            throw fieldError(key, rangeReason(T.self))
        } catch {
            throw fieldError(key, rangeReason(T.self))
        }
    }

    func integerIfPresent<T: FixedWidthInteger & Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        do {
            return try decodeIfPresent(T.self, forKey: key)
        } catch let error as DecodingError {
            guard case .dataCorrupted = error else { throw error }
            throw fieldError(key, rangeReason(T.self))
        } catch {
            throw fieldError(key, rangeReason(T.self))
        }
    }

    /// A string that must be one of `T`'s raw values; an unknown value names the field and
    /// lists the allowed ones.
    func wireEnum<T: RawRepresentable & CaseIterable>(_ type: T.Type, _ key: Key) throws -> T
    where T.RawValue == String {
        let text = try decode(String.self, forKey: key)
        guard let value = T(rawValue: text) else {
            let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw fieldError(key, "unknown value \"\(text)\" (expected one of: \(allowed))")
        }
        return value
    }

    func int(_ key: Key) throws -> Int { try integer(Int.self, key) }
    func uint32(_ key: Key) throws -> UInt32 { try integer(UInt32.self, key) }
    func uint32IfPresent(_ key: Key) throws -> UInt32? { try integerIfPresent(UInt32.self, key) }

    /// Integers inside an array, each named by index.
    func integers<T: FixedWidthInteger & Decodable>(_ type: T.Type, _ key: Key) throws -> [T] {
        var array = try nestedUnkeyedContainer(forKey: key)
        var out: [T] = []
        while !array.isAtEnd {
            do {
                out.append(try array.decode(T.self))
            } catch let error as DecodingError {
                guard case .dataCorrupted = error else { throw error }
                throw DecodingError.dataCorruptedError(in: array, debugDescription: rangeReason(T.self))
            } catch {
                throw DecodingError.dataCorruptedError(in: array, debugDescription: rangeReason(T.self))
            }
        }
        return out
    }
}

private func rangeReason<T: FixedWidthInteger>(_ type: T.Type) -> String {
    "must be an integer in \(T.min)...\(T.max)"
}
