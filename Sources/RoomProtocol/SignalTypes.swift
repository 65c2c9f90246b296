import RoomMedia
import RoomModel


// The wire enums are RoomModel's (`RoomRole`, `RoomStageState`, `RoomStagePolicy`,
// `RoomLeaveReason`): their raw values are the wire spellings, so the protocol and the room
// state machine cannot drift apart, and a module importing both sees one type per concept.
// They are coded through `wireEnum` below rather than made Codable here, which would be a
// retroactive conformance of RoomModel's types to a standard protocol. `ParticipantInfo` and
// `ErrorCode` are RoomModel's too (what a room is, whatever serves it); the protocol gives the
// first its wire coding below.


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

/// `ParticipantInfo` on the wire: snake_case keys, roles and stages by their wire spellings.
extension ParticipantInfo: Codable {
    enum CodingKeys: String, CodingKey {
        case id, userID = "user_id", name, role, stage, muted, moderator, ssrc
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.uint32(.id), userID: try c.decode(String.self, forKey: .userID),
                  name: try c.decode(String.self, forKey: .name), role: try c.wireEnum(RoomRole.self, .role),
                  stage: try c.wireEnum(RoomStageState.self, .stage), muted: try c.decode(Bool.self, forKey: .muted),
                  moderator: try c.decode(Bool.self, forKey: .moderator), ssrc: try c.uint32IfPresent(.ssrc))
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
