import FoundationEssentials
import RoomJSON
import RoomMedia
import RoomModel

/// Why a frame's payload is not a usable message. None of these is fatal for the
/// connection: the receiver answers with an `error` (see `code`) and reads the next frame.
public enum SignalMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not UTF-8 JSON, or not a JSON object.
    case malformedJSON(String)
    /// A `type` this protocol version does not define. Kept apart from `invalidField`
    /// because a newer peer may legitimately send it; the receiver just says so.
    case unknownType(String)
    /// A field missing, of the wrong JSON type, or out of range. The first value is the
    /// field's path (`participants[2].stage`), the second says what is wrong.
    case invalidField(String, String)

    /// The code to answer with.
    public var code: ErrorCode {
        switch self {
        case .malformedJSON: .malformedMessage
        case .unknownType: .unknownType
        case .invalidField: .invalidField
        }
    }

    public var description: String {
        switch self {
        case let .malformedJSON(reason): "malformed message: \(reason)"
        case let .unknownType(name): "unknown message type \"\(name)\""
        case let .invalidField(field, reason): "field \(field): \(reason)"
        }
    }
}

/// What can be learned from a payload without decoding it fully, for answering a message
/// that failed to decode: the request id to echo, and the protocol version of a `hello`.
public struct SignalPeek: Sendable, Equatable {
    public var type: String?
    public var id: Int?
    public var protocolVersion: Int?

    public init(type: String? = nil, id: Int? = nil, protocolVersion: Int? = nil) {
        self.type = type
        self.id = id
        self.protocolVersion = protocolVersion
    }
}

extension SignalMessage {
    /// One frame's payload to a message. Bad input from a peer is routine, so this never
    /// traps and every failure is a `SignalMessageError` naming the field at fault.
    /// The messages of a call's steady state take `SignalFastPath`; everything else, and
    /// anything the fast path does not read, Codable.
    public static func decode(_ payload: some Collection<UInt8>) throws(SignalMessageError) -> SignalMessage {
        let bytes = Array(payload)
        if let message = SignalFastPath.decode(bytes) { return message }
        return try decodeCodable(bytes)
    }

    /// `decode` without the fast path (what the fast path is tested against).
    package static func decodeCodable(_ payload: [UInt8]) throws(SignalMessageError) -> SignalMessage {
        do {
            return try JSONValue.decodeStrictly(SignalMessage.self, from: payload)
        } catch {
            switch error {
            case .duplicateKey(let key): throw .malformedJSON("key \"\(key)\" twice in one object")
            case .refused(let strict): throw .malformedJSON(strict.message)
            case .decoding(let error as SignalMessageError): throw error
            case .decoding(let error as DecodingError): throw Self.translate(error)
            case .decoding(let error): throw .malformedJSON(String(describing: error))
            }
        }
    }

    /// The JSON payload, refused locally when it breaks a limit the receiver enforces, so the
    /// sender learns of it with the connection intact.
    public func encode() throws(SignalMessageError) -> [UInt8] {
        try validate()
        if let bytes = SignalFastPath.encode(self) { return bytes }
        return try encodeCodable()
    }

    /// `encode` without the fast path (what the fast path is tested against).
    package func encodeCodable() throws(SignalMessageError) -> [UInt8] {
        try validate()
        do {
            let encoder = JSONEncoder()
            // Sorted keys make the bytes of a message deterministic (JSONEncoder otherwise
            // follows hash order, different on every run), so captures and logs diff cleanly;
            // unescaped slashes keep "roomd/0.1.0" readable.
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return Array(try encoder.encode(self))
        } catch {
            // Only non-finite floats make JSONEncoder fail, and messages hold none.
            throw .malformedJSON("cannot encode: \(error)")
        }
    }

    /// Best effort: nil fields where the payload does not have them in the expected form.
    public static func peek(_ payload: some Collection<UInt8>) -> SignalPeek {
        guard let loose = try? JSONDecoder().decode(LooseEnvelope.self, from: Data(payload)) else { return SignalPeek() }
        return SignalPeek(type: loose.type, id: loose.id, protocolVersion: loose.version)
    }

    /// The limits that JSON types alone do not express, shared by encode and decode.
    public func validate() throws(SignalMessageError) {
        func check(_ field: String, _ problem: String?) throws(SignalMessageError) {
            if let problem { throw .invalidField(field, problem) }
        }
        switch body {
        case let .appMessage(message):
            try check("data", SignalLimits.checkAppData(message.data))
        case let .setAttribute(key, value), let .attributeChanged(key, value):
            try check("key", SignalLimits.checkAttributeKey(key))
            if let value { try check("value", SignalLimits.checkAttributeValue(value)) }
        case let .welcome(welcome):
            for (key, value) in welcome.attributes {
                try check("attributes", SignalLimits.checkAttributeKey(key).map { "key \"\(key)\": \($0)" })
                try check("attributes.\(key)", SignalLimits.checkAttributeValue(value))
            }
            if welcome.speakerLimit < 0 { throw .invalidField("speaker_limit", "negative") }
            if let interval = welcome.lossReportIntervalMs, interval <= 0 {
                throw .invalidField("loss_report_interval_ms", "not positive")
            }
        case let .activeSpeakers(speakers):
            if speakers.ids.count != speakers.levels.count {
                throw .invalidField("levels", "\(speakers.levels.count) levels for \(speakers.ids.count) ids")
            }
            if let index = speakers.levels.firstIndex(where: { $0 > SignalLimits.maxAudioLevel }) {
                throw .invalidField("levels[\(index)]", "above \(SignalLimits.maxAudioLevel)")
            }
        case let .lossReport(report):
            if let problem = SignalLimits.checkLossReport(ssrcs: report.ssrcs.count, permille: report.lostPermille) {
                throw .invalidField(problem.field, problem.reason)
            }
        case let .receiverLoss(loss):
            if loss.lostPermille > SignalLimits.maxLossPermille {
                throw .invalidField("lost_permille", "above \(SignalLimits.maxLossPermille)")
            }
            if loss.receivers < 0 { throw .invalidField("receivers", "negative") }
        default:
            break
        }
    }

    static func translate(_ error: DecodingError) -> SignalMessageError {
        func path(_ keys: [any CodingKey]) -> String {
            var out = ""
            for key in keys {
                if let index = key.intValue, key.stringValue.hasPrefix("Index") || key.stringValue == "\(index)" {
                    out += "[\(index)]"
                } else {
                    out += out.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return out
        }
        switch error {
        case let .keyNotFound(key, context):
            return .invalidField(path(context.codingPath + [key]), "missing")
        case let .valueNotFound(_, context):
            return .invalidField(path(context.codingPath), "must not be null")
        case let .typeMismatch(type, context):
            if context.codingPath.isEmpty { return .malformedJSON("not a JSON object") }
            return .invalidField(path(context.codingPath), "expected \(jsonTypeName(type))")
        case let .dataCorrupted(context):
            if context.codingPath.isEmpty { return .malformedJSON("not valid UTF-8 JSON") }
            return .invalidField(path(context.codingPath), context.debugDescription)
        @unknown default:
            return .malformedJSON(String(describing: error))
        }
    }

    private static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is any BinaryInteger.Type: "an integer"
        case is [String: String].Type: "an object of strings"
        default:
            String(describing: type).hasPrefix("Array") ? "an array" : String(describing: type).hasPrefix("Dictionary") ? "an object" : "\(type)"
        }
    }
}

/// Lenient reading of the envelope for `SignalMessage.peek`: every field optional, wrong
/// types read as absent.
private struct LooseEnvelope: Decodable {
    var type: String?
    var id: Int?
    var version: Int?
    enum CodingKeys: String, CodingKey { case type, id, version = "protocol" }
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try? c.decodeIfPresent(String.self, forKey: .type)
        id = try? c.decodeIfPresent(Int.self, forKey: .id)
        version = try? c.decodeIfPresent(Int.self, forKey: .version)
    }
}

/// Every field name of protocol 1, flat in the envelope.
enum SignalKey: String, CodingKey {
    case type, id
    case `protocol`, client, token, role, previousParticipantID = "previous_participant_id"
    case participantID = "participant_id", room, ssrc, udpPort = "udp_port", mediaKey = "media_key"
    case policy, speakerLimit = "speaker_limit", participants, attributes
    case tokenExpiresAt = "token_expires_at"
    case code, message, requestID = "request_id"
    case muted, reason, to, from, data, key, value, t
    case participant, by, ids, levels, expiresAt = "expires_at"
    case ssrcs, lostPermille = "lost_permille", receivers, lossReportIntervalMs = "loss_report_interval_ms"
    case srtpProfile = "srtp_profile", srtpUplinkKey = "srtp_uplink_key", srtpDownlinkKey = "srtp_downlink_key"
    case app
}

extension SignalMessage: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: SignalKey.self)
        let type = try c.decode(String.self, forKey: .type)
        id = try c.integerIfPresent(Int.self, .id)

        func participantID() throws -> RoomParticipantID { try c.uint32(.participantID) }
        func attributeKey() throws -> String {
            let key = try c.decode(String.self, forKey: .key)
            if let problem = SignalLimits.checkAttributeKey(key) { throw c.fieldError(.key, problem) }
            return key
        }
        func attributeValue() throws -> String? {
            guard let value = try c.decodeIfPresent(String.self, forKey: .value) else { return nil }
            if let problem = SignalLimits.checkAttributeValue(value) { throw c.fieldError(.value, problem) }
            return value
        }

        /// All three `srtp_*` fields or none; a profile this side does not speak is an error (the
        /// media would not decrypt), not a reason to fall back to plain RTP.
        func mediaEncryption() throws -> MediaEncryption? {
            guard let profile = try c.decodeIfPresent(String.self, forKey: .srtpProfile) else {
                if c.contains(.srtpUplinkKey) || c.contains(.srtpDownlinkKey) {
                    throw c.fieldError(.srtpProfile, "missing while SRTP keys are present")
                }
                return nil
            }
            guard profile == MediaEncryption.profileName else {
                throw c.fieldError(.srtpProfile, "\"\(profile)\" is not supported (only \(MediaEncryption.profileName))")
            }
            return MediaEncryption(
                uplink: try c.decode(SRTPMasterKey.self, forKey: .srtpUplinkKey),
                downlink: try c.decode(SRTPMasterKey.self, forKey: .srtpDownlinkKey))
        }

        /// The server's own word, shown to people (`roomctl status`): bounded like a name.
        func welcomeApp() throws -> String? {
            guard let app = try c.decodeIfPresent(String.self, forKey: .app) else { return nil }
            if app.isEmpty || app.utf8.count > 256 { throw c.fieldError(.app, "must be 1-256 bytes") }
            return app
        }

        func lossReportInterval() throws -> Int? {
            guard let interval = try c.integerIfPresent(Int.self, .lossReportIntervalMs) else { return nil }
            if interval <= 0 { throw c.fieldError(.lossReportIntervalMs, "not positive") }
            return interval
        }

        switch type {
        case "hello":
            body = .hello(
                Hello(
                    protocolVersion: try c.int(.protocol),
                    client: try c.decode(String.self, forKey: .client),
                    token: try c.decode(String.self, forKey: .token),
                    role: try c.wireEnum(RoomRole.self, .role),
                    previousParticipantID: try c.uint32IfPresent(.previousParticipantID)))
        case "welcome":
            let speakerLimit = try c.int(.speakerLimit)
            if speakerLimit < 0 { throw c.fieldError(.speakerLimit, "negative") }
            let attributes = try c.decode([String: String].self, forKey: .attributes)
            for (key, value) in attributes {
                if let problem = SignalLimits.checkAttributeKey(key) {
                    throw c.fieldError(.attributes, "key \"\(key)\": \(problem)")
                }
                if let problem = SignalLimits.checkAttributeValue(value) {
                    throw c.fieldError(.attributes, "value of \"\(key)\": \(problem)")
                }
            }
            body = .welcome(
                Welcome(
                    protocolVersion: try c.int(.protocol),
                    participantID: try participantID(),
                    room: try c.decode(String.self, forKey: .room),
                    ssrc: try c.uint32(.ssrc),
                    udpPort: try c.integer(UInt16.self, .udpPort),
                    mediaKey: try c.decode(MediaKey.self, forKey: .mediaKey),
                    policy: try c.wireEnum(RoomStagePolicy.self, .policy),
                    speakerLimit: speakerLimit,
                    participants: try c.decode([ParticipantInfo].self, forKey: .participants),
                    attributes: attributes,
                    tokenExpiresAt: try c.int(.tokenExpiresAt),
                    lossReportIntervalMs: try lossReportInterval(),
                    mediaEncryption: try mediaEncryption(),
                    app: try welcomeApp()))
        case "error":
            body = .error(
                ErrorInfo(
                    code: try c.decode(ErrorCode.self, forKey: .code),
                    message: try c.decode(String.self, forKey: .message),
                    requestID: try c.integerIfPresent(Int.self, .requestID)))
        case "ok": body = .ok(requestID: try c.int(.requestID))
        case "leave": body = .leave
        case "raise_hand": body = .raiseHand
        case "lower_hand": body = .lowerHand
        case "step_down": body = .stepDown
        case "accept_invite": body = .acceptInvite
        case "decline_invite": body = .declineInvite
        case "set_mute": body = .setMute(muted: try c.decode(Bool.self, forKey: .muted))
        case "approve": body = .approve(participantID: try participantID())
        case "deny": body = .deny(participantID: try participantID())
        case "invite": body = .invite(participantID: try participantID())
        case "demote": body = .demote(participantID: try participantID())
        case "mute_participant": body = .muteParticipant(participantID: try participantID())
        case "kick":
            body = .kick(
                participantID: try participantID(), reason: try c.decodeIfPresent(String.self, forKey: .reason))
        case "app_message":
            let data = try c.decode(String.self, forKey: .data)
            if let problem = SignalLimits.checkAppData(data) { throw c.fieldError(.data, problem) }
            body = .appMessage(AppMessage(from: try c.uint32IfPresent(.from), to: try c.uint32IfPresent(.to), data: data))
        case "set_attribute": body = .setAttribute(key: try attributeKey(), value: try attributeValue())
        case "refresh_token": body = .refreshToken(token: try c.decode(String.self, forKey: .token))
        case "ping": body = .ping(t: try c.integer(Int64.self, .t))
        case "loss_report":
            let ssrcs = try c.integers(UInt32.self, .ssrcs)
            let permille = try c.integers(UInt16.self, .lostPermille)
            if let problem = SignalLimits.checkLossReport(ssrcs: ssrcs.count, permille: permille) {
                throw c.fieldError(problem.field == "ssrcs" ? .ssrcs : .lostPermille, problem.reason)
            }
            body = .lossReport(LossReport(ssrcs: ssrcs, lostPermille: permille))
        case "receiver_loss":
            let permille = try c.integer(UInt16.self, .lostPermille)
            if permille > SignalLimits.maxLossPermille {
                throw c.fieldError(.lostPermille, "above \(SignalLimits.maxLossPermille)")
            }
            let receivers = try c.int(.receivers)
            if receivers < 0 { throw c.fieldError(.receivers, "negative") }
            body = .receiverLoss(ReceiverLoss(lostPermille: permille, receivers: receivers))
        case "participant_joined":
            body = .participantJoined(try c.decode(ParticipantInfo.self, forKey: .participant))
        case "participant_left":
            body = .participantLeft(
                participantID: try participantID(), reason: try c.wireEnum(RoomLeaveReason.self, .reason))
        case "participant_updated":
            body = .participantUpdated(try c.decode(ParticipantInfo.self, forKey: .participant))
        case "stage_request": body = .stageRequest(participantID: try participantID())
        case "invited": body = .invited(by: try c.uint32(.by))
        case "active_speakers":
            let ids = try c.integers(UInt32.self, .ids)
            let levels = try c.integers(UInt8.self, .levels)
            if levels.count != ids.count {
                throw c.fieldError(.levels, "\(levels.count) levels for \(ids.count) ids")
            }
            if let index = levels.firstIndex(where: { $0 > SignalLimits.maxAudioLevel }) {
                throw c.fieldError(.levels, "levels[\(index)] above \(SignalLimits.maxAudioLevel)")
            }
            body = .activeSpeakers(ActiveSpeakers(ids: ids, levels: levels))
        case "attribute_changed": body = .attributeChanged(key: try attributeKey(), value: try attributeValue())
        case "token_will_expire": body = .tokenWillExpire(expiresAt: try c.int(.expiresAt))
        case "removed":
            body = .removed(
                reason: try c.wireEnum(RoomLeaveReason.self, .reason),
                message: try c.decode(String.self, forKey: .message))
        case "pong": body = .pong(t: try c.integer(Int64.self, .t))
        default:
            throw SignalMessageError.unknownType(type)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: SignalKey.self)
        try c.encode(body.typeName, forKey: .type)
        try c.encodeIfPresent(id, forKey: .id)
        switch body {
        case let .hello(hello):
            try c.encode(hello.protocolVersion, forKey: .protocol)
            try c.encode(hello.client, forKey: .client)
            try c.encode(hello.token, forKey: .token)
            try c.encode(hello.role.rawValue, forKey: .role)
            try c.encodeIfPresent(hello.previousParticipantID, forKey: .previousParticipantID)
        case let .welcome(w):
            try c.encode(w.protocolVersion, forKey: .protocol)
            try c.encode(w.participantID, forKey: .participantID)
            try c.encode(w.room, forKey: .room)
            try c.encode(w.ssrc, forKey: .ssrc)
            try c.encode(w.udpPort, forKey: .udpPort)
            try c.encode(w.mediaKey, forKey: .mediaKey)
            try c.encode(w.policy.rawValue, forKey: .policy)
            try c.encode(w.speakerLimit, forKey: .speakerLimit)
            try c.encode(w.participants, forKey: .participants)
            try c.encode(w.attributes, forKey: .attributes)
            try c.encode(w.tokenExpiresAt, forKey: .tokenExpiresAt)
            try c.encodeIfPresent(w.lossReportIntervalMs, forKey: .lossReportIntervalMs)
            try c.encodeIfPresent(w.app, forKey: .app)
            if let keys = w.mediaEncryption {
                try c.encode(MediaEncryption.profileName, forKey: .srtpProfile)
                try c.encode(keys.uplink, forKey: .srtpUplinkKey)
                try c.encode(keys.downlink, forKey: .srtpDownlinkKey)
            }
        case let .error(e):
            try c.encode(e.code, forKey: .code)
            try c.encode(e.message, forKey: .message)
            try c.encodeIfPresent(e.requestID, forKey: .requestID)
        case let .ok(requestID):
            try c.encode(requestID, forKey: .requestID)
        case .leave, .raiseHand, .lowerHand, .stepDown, .acceptInvite, .declineInvite:
            break
        case let .setMute(muted):
            try c.encode(muted, forKey: .muted)
        case let .approve(p), let .deny(p), let .invite(p), let .demote(p), let .muteParticipant(p),
            let .stageRequest(p):
            try c.encode(p, forKey: .participantID)
        case let .kick(p, reason):
            try c.encode(p, forKey: .participantID)
            try c.encodeIfPresent(reason, forKey: .reason)
        case let .appMessage(m):
            try c.encodeIfPresent(m.from, forKey: .from)
            try c.encodeIfPresent(m.to, forKey: .to)
            try c.encode(m.data, forKey: .data)
        case let .setAttribute(key, value), let .attributeChanged(key, value):
            try c.encode(key, forKey: .key)
            try c.encodeIfPresent(value, forKey: .value)
        case let .refreshToken(token):
            try c.encode(token, forKey: .token)
        case let .ping(t), let .pong(t):
            try c.encode(t, forKey: .t)
        case let .participantJoined(p), let .participantUpdated(p):
            try c.encode(p, forKey: .participant)
        case let .participantLeft(p, reason):
            try c.encode(p, forKey: .participantID)
            try c.encode(reason.rawValue, forKey: .reason)
        case let .invited(by):
            try c.encode(by, forKey: .by)
        case let .activeSpeakers(s):
            try c.encode(s.ids, forKey: .ids)
            try c.encode(s.levels, forKey: .levels)
        case let .lossReport(r):
            try c.encode(r.ssrcs, forKey: .ssrcs)
            try c.encode(r.lostPermille, forKey: .lostPermille)
        case let .receiverLoss(l):
            try c.encode(l.lostPermille, forKey: .lostPermille)
            try c.encode(l.receivers, forKey: .receivers)
        case let .tokenWillExpire(expiresAt):
            try c.encode(expiresAt, forKey: .expiresAt)
        case let .removed(reason, message):
            try c.encode(reason.rawValue, forKey: .reason)
            try c.encode(message, forKey: .message)
        }
    }
}

extension FrameEncoder {
    /// A complete frame for `message`. Throws `SignalMessageError` when the message breaks a
    /// protocol limit and `FrameError.payloadTooLarge` when its JSON exceeds the frame limit.
    public func encode(_ message: SignalMessage) throws -> [UInt8] {
        try frame(message.encode())
    }
}
