import FoundationEssentials
import RoomBase
import RoomMedia
import RoomModel
import RoomProtocol
import XCTest

final class SignalMessageTests: XCTestCase {
    static let alice = ParticipantInfo(
        id: 7, userID: "u-alice", name: "Alice", role: .streamer, stage: .onStage, muted: false,
        moderator: true, ssrc: 0xDEAD_BEEF)
    static let bob = ParticipantInfo(
        id: 8, userID: "u-bob", name: "Bob", role: .audience, stage: .handRaised, muted: true, moderator: false)

    /// One instance of every message type, with optional fields both set and unset.
    static let samples: [SignalMessage] = [
        SignalMessage(id: 1, .hello(.init(client: "roomd/0.1.0", token: "a.b.c", role: .audience))),
        SignalMessage(.hello(.init(client: "roomd/0.1.0", token: "t", role: .streamer, previousParticipantID: 9))),
        SignalMessage(
            .welcome(
                .init(
                    participantID: 7, room: "standup", ssrc: 0xFFFF_FFFF, udpPort: 40000,
                    mediaKey: MediaKey(bytes: Array(0 ..< 16))!, policy: .moderated, speakerLimit: 3,
                    participants: [alice, bob], attributes: ["topic": "Q3", "slide": "4"],
                    tokenExpiresAt: 1_900_000_000))),
        SignalMessage(.error(.init(code: .unsupportedVersion, message: "protocol 2 not supported"))),
        SignalMessage(.error(.init(code: .notModerator, message: "moderators only", requestID: 12))),
        SignalMessage(.ok(requestID: 3)),
        SignalMessage(id: 2, .leave),
        SignalMessage(id: 3, .raiseHand),
        SignalMessage(.lowerHand),
        SignalMessage(.stepDown),
        SignalMessage(.acceptInvite),
        SignalMessage(.declineInvite),
        SignalMessage(id: 4, .setMute(muted: true)),
        SignalMessage(.approve(participantID: 8)),
        SignalMessage(.deny(participantID: 8)),
        SignalMessage(.invite(participantID: 8)),
        SignalMessage(.demote(participantID: 7)),
        SignalMessage(.muteParticipant(participantID: 7)),
        SignalMessage(.kick(participantID: 8, reason: "spam")),
        SignalMessage(.kick(participantID: 8, reason: nil)),
        SignalMessage(.appMessage(.init(to: 8, data: "{\"slide\":5}"))),
        SignalMessage(.appMessage(.init(from: 7, data: "hello all ☕"))),
        SignalMessage(.setAttribute(key: "topic", value: "Q4")),
        SignalMessage(.setAttribute(key: "topic", value: nil)),
        SignalMessage(.refreshToken(token: "x.y.z")),
        SignalMessage(.ping(t: 1_700_000_000_123)),
        SignalMessage(.participantJoined(bob)),
        SignalMessage(.participantLeft(participantID: 8, reason: .tokenExpired)),
        SignalMessage(.participantUpdated(alice)),
        SignalMessage(.stageRequest(participantID: 8)),
        SignalMessage(.invited(by: 7)),
        SignalMessage(.activeSpeakers(.init(ids: [7, 9], levels: [12, 127]))),
        SignalMessage(.attributeChanged(key: "slide", value: "5")),
        SignalMessage(.attributeChanged(key: "slide", value: nil)),
        SignalMessage(.tokenWillExpire(expiresAt: 1_900_000_000)),
        SignalMessage(.removed(reason: .replaced, message: "joined from another device")),
        SignalMessage(.pong(t: -5)),
        SignalMessage(
            .welcome(
                .init(
                    participantID: 9, room: "standup", ssrc: 5, udpPort: 40000,
                    mediaKey: MediaKey(bytes: Array(0 ..< 16))!, policy: .open, speakerLimit: 3,
                    participants: [], attributes: [:], tokenExpiresAt: 1_900_000_000, lossReportIntervalMs: 1000))),
        SignalMessage(.lossReport(.init(ssrcs: [0xDEAD_BEEF, 7], lostPermille: [0, 1000]))),
        SignalMessage(.receiverLoss(.init(lostPermille: 52, receivers: 3))),
    ]

    private func decode(_ json: String) throws(SignalMessageError) -> SignalMessage {
        try SignalMessage.decode(Array(json.utf8))
    }

    private func assertError(
        _ json: String, _ expected: SignalMessageError, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let message = try decode(json)
            XCTFail("decoded \(message)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    private func assertInvalidField(
        _ json: String, _ field: String, reasonContains: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let message = try decode(json)
            XCTFail("decoded \(message)", file: file, line: line)
        } catch {
            guard case let .invalidField(name, reason) = error else {
                return XCTFail("\(error)", file: file, line: line)
            }
            XCTAssertEqual(name, field, file: file, line: line)
            XCTAssertTrue(reason.contains(reasonContains), "reason: \(reason)", file: file, line: line)
        }
    }

    func testEveryTypeRoundTrips() throws {
        for message in Self.samples {
            let bytes = try message.encode()
            XCTAssertEqual(try SignalMessage.decode(bytes), message, String(decoding: bytes, as: UTF8.self))
        }
        let covered = Set(Self.samples.map(\.body.typeName))
        XCTAssertEqual(covered, Set(SignalMessage.Body.allTypeNames))
        XCTAssertEqual(SignalMessage.Body.allTypeNames.count, 33)
    }

    func testWireFieldNamesAreSnakeCaseAndFlat() throws {
        let hello = SignalMessage(
            id: 1, .hello(.init(client: "roomd/0.1.0", token: "tok", role: .streamer, previousParticipantID: 4)))
        let object = try JSONSerializationLite.object(hello.encode())
        XCTAssertEqual(
            object,
            [
                "type": "hello", "id": "1", "protocol": "1", "client": "roomd/0.1.0", "token": "tok",
                "role": "streamer", "previous_participant_id": "4",
            ])
        XCTAssertEqual(
            try JSONSerializationLite.text(hello.encode()),
            #"{"client":"roomd/0.1.0","id":1,"previous_participant_id":4,"protocol":1,"role":"streamer","token":"tok","type":"hello"}"#)
        let welcome = try JSONSerializationLite.object(Self.samples[2].encode())
        XCTAssertEqual(welcome["media_key"], Base64.encode(Array(0 ..< 16)))
        XCTAssertEqual(welcome["udp_port"], "40000")
        XCTAssertEqual(welcome["ssrc"], "4294967295")
        XCTAssertEqual(welcome["token_expires_at"], "1900000000")
        XCTAssertNotNil(welcome["speaker_limit"])
        // Absent optionals are omitted, not null.
        let kick = try JSONSerializationLite.object(SignalMessage(.kick(participantID: 8, reason: nil)).encode())
        XCTAssertEqual(kick, ["type": "kick", "participant_id": "8"])
    }

    func testHandWrittenJSONDecodes() throws {
        let message = try decode(
            #"{"type":"participant_joined","participant":{"id":8,"user_id":"u-bob","name":"Bob","role":"audience","stage":"hand_raised","muted":true,"moderator":false}}"#
        )
        XCTAssertEqual(message, SignalMessage(.participantJoined(Self.bob)))
        // null for an optional means absent: a null attribute value is a deletion.
        XCTAssertEqual(
            try decode(#"{"type":"set_attribute","key":"k","value":null,"id":5}"#),
            SignalMessage(id: 5, .setAttribute(key: "k", value: nil)))
        // Unknown fields are ignored, so optional additions need no version bump.
        XCTAssertEqual(try decode(#"{"type":"raise_hand","future":{"x":[1,2]}}"#), SignalMessage(.raiseHand))
    }

    func testUnknownTypeIsItsOwnError() {
        assertError(#"{"type":"teleport","id":4,"to":"mars"}"#, .unknownType("teleport"))
        XCTAssertEqual(SignalMessageError.unknownType("x").code, .unknownType)
        // The caller can still answer the request by id.
        let peek = SignalMessage.peek(Array(#"{"type":"teleport","id":4}"#.utf8))
        XCTAssertEqual(peek, SignalPeek(type: "teleport", id: 4, protocolVersion: nil))
    }

    func testMissingAndMistypedFieldsAreNamed() {
        assertInvalidField(#"{"id":1}"#, "type", reasonContains: "missing")
        assertInvalidField(#"{"type":7}"#, "type", reasonContains: "string")
        assertInvalidField(#"{"type":"approve"}"#, "participant_id", reasonContains: "missing")
        assertInvalidField(#"{"type":"set_mute","muted":"yes"}"#, "muted", reasonContains: "boolean")
        assertInvalidField(#"{"type":"set_mute","muted":null}"#, "muted", reasonContains: "boolean")
        assertInvalidField(#"{"type":"leave","id":"seven"}"#, "id", reasonContains: "integer")
        assertInvalidField(#"{"type":"hello","protocol":1,"client":"c","token":"t","role":"admin"}"#, "role", reasonContains: "audience, streamer")
        assertInvalidField(#"{"type":"participant_left","participant_id":3,"reason":"bored"}"#, "reason", reasonContains: "room_closed")
        assertInvalidField(#"{"type":"ping","t":1.5}"#, "t", reasonContains: "integer")
        assertInvalidField(#"{"type":"approve","participant_id":-1}"#, "participant_id", reasonContains: "0...4294967295")
        assertInvalidField(#"{"type":"approve","participant_id":4294967296}"#, "participant_id", reasonContains: "0...4294967295")
        assertInvalidField(#"{"type":"approve","participant_id":1e30}"#, "participant_id", reasonContains: "integer")
    }

    func testNestedFieldPathsAreNamed() throws {
        var welcome = try JSONSerializationLite.text(Self.samples[2].encode())
        welcome = welcome.replacingOccurrences(of: #""hand_raised""#, with: #""dancing""#)
        assertInvalidField(welcome, "participants[1].stage", reasonContains: "on_stage")

        let badKey = try JSONSerializationLite.text(Self.samples[2].encode())
            .replacingOccurrences(of: Base64.encode(Array(0 ..< 16)), with: Base64.encode(Array(0 ..< 15)))
        assertInvalidField(badKey, "media_key", reasonContains: "16 bytes")

        let badPort = try JSONSerializationLite.text(Self.samples[2].encode())
            .replacingOccurrences(of: "40000", with: "70000")
        assertInvalidField(badPort, "udp_port", reasonContains: "0...65535")

        assertInvalidField(
            #"{"type":"participant_updated","participant":{"id":1,"user_id":"u","name":"n","role":"audience","stage":"off","muted":false}}"#,
            "participant.moderator", reasonContains: "missing")
        assertInvalidField(#"{"type":"active_speakers","ids":[1,-2],"levels":[0,0]}"#, "ids[1]", reasonContains: "integer")
    }

    func testLimitsAreCheckedOnDecodeAndEncode() throws {
        let limit = String(repeating: "é", count: 4096)  // 8192 UTF-8 bytes
        XCTAssertNoThrow(try SignalMessage(.appMessage(.init(data: limit))).encode())
        let over = SignalMessage(.appMessage(.init(data: limit + "x")))
        XCTAssertThrowsError(try over.encode()) {
            XCTAssertEqual($0 as? SignalMessageError, .invalidField("data", "longer than 8192 bytes"))
        }
        assertInvalidField(#"{"type":"app_message","data":"\#(limit)x"}"#, "data", reasonContains: "8192")

        let key64 = String(repeating: "k", count: 64)
        XCTAssertNoThrow(try SignalMessage(.setAttribute(key: key64, value: String(repeating: "v", count: 1024))).encode())
        XCTAssertThrowsError(try SignalMessage(.setAttribute(key: key64 + "k", value: nil)).encode())
        XCTAssertThrowsError(try SignalMessage(.setAttribute(key: "", value: nil)).encode())
        XCTAssertThrowsError(try SignalMessage(.attributeChanged(key: "k", value: String(repeating: "v", count: 1025))).encode())
        assertInvalidField(#"{"type":"set_attribute","key":"\#(key64)k"}"#, "key", reasonContains: "64")
        assertInvalidField(#"{"type":"set_attribute","key":""}"#, "key", reasonContains: "empty")
        assertInvalidField(
            #"{"type":"attribute_changed","key":"k","value":"\#(String(repeating: "v", count: 1025))"}"#, "value",
            reasonContains: "1024")

        XCTAssertThrowsError(try SignalMessage(.activeSpeakers(.init(ids: [1, 2], levels: [3]))).encode()) {
            XCTAssertEqual($0 as? SignalMessageError, .invalidField("levels", "1 levels for 2 ids"))
        }
        assertInvalidField(#"{"type":"active_speakers","ids":[1,2],"levels":[3]}"#, "levels", reasonContains: "1 levels for 2 ids")
        assertInvalidField(#"{"type":"active_speakers","ids":[1],"levels":[128]}"#, "levels", reasonContains: "127")
        assertInvalidField(#"{"type":"active_speakers","ids":[1],"levels":[300]}"#, "levels[0]", reasonContains: "0...255")
    }

    func testLossMessagesAreChecked() throws {
        XCTAssertEqual(
            try decode(#"{"type":"loss_report","ssrcs":[5,6],"lost_permille":[12,0]}"#),
            SignalMessage(.lossReport(.init(ssrcs: [5, 6], lostPermille: [12, 0]))))
        assertInvalidField(#"{"type":"loss_report","ssrcs":[5,6],"lost_permille":[12]}"#, "lost_permille", reasonContains: "1 values for 2 ssrcs")
        assertInvalidField(#"{"type":"loss_report","ssrcs":[5],"lost_permille":[1001]}"#, "lost_permille", reasonContains: "above 1000")
        assertInvalidField(#"{"type":"loss_report","ssrcs":[5],"lost_permille":[-1]}"#, "lost_permille[0]", reasonContains: "0...65535")
        assertInvalidField(#"{"type":"loss_report","ssrcs":[5],"lost_permille":[0.5]}"#, "lost_permille[0]", reasonContains: "integer")
        assertInvalidField(#"{"type":"loss_report","lost_permille":[]}"#, "ssrcs", reasonContains: "missing")
        let many = "[" + (1...17).map(String.init).joined(separator: ",") + "]"
        assertInvalidField(#"{"type":"loss_report","ssrcs":\#(many),"lost_permille":\#(many)}"#, "ssrcs", reasonContains: "more than 16")
        XCTAssertThrowsError(try SignalMessage(.lossReport(.init(ssrcs: [1], lostPermille: [2000]))).encode()) {
            XCTAssertEqual($0 as? SignalMessageError, .invalidField("lost_permille", "lost_permille[0] above 1000"))
        }
        assertInvalidField(#"{"type":"receiver_loss","lost_permille":1001,"receivers":1}"#, "lost_permille", reasonContains: "above 1000")
        assertInvalidField(#"{"type":"receiver_loss","lost_permille":10,"receivers":-1}"#, "receivers", reasonContains: "negative")
        assertInvalidField(#"{"type":"receiver_loss","lost_permille":10}"#, "receivers", reasonContains: "missing")
        XCTAssertThrowsError(try SignalMessage(.receiverLoss(.init(lostPermille: 1001, receivers: 1))).encode())

        // welcome: the interval is optional (an older server sends none) and must be positive.
        let welcome = try JSONSerializationLite.text(Self.samples[2].encode())
        XCTAssertFalse(welcome.contains("loss_report_interval_ms"))
        let withInterval = welcome.replacingOccurrences(of: #""type":"welcome""#, with: #""type":"welcome","loss_report_interval_ms":0"#)
        assertInvalidField(withInterval, "loss_report_interval_ms", reasonContains: "not positive")
        guard case .welcome(var w) = Self.samples[2].body else { return XCTFail() }
        w.lossReportIntervalMs = -5
        XCTAssertThrowsError(try SignalMessage(.welcome(w)).encode()) {
            XCTAssertEqual($0 as? SignalMessageError, .invalidField("loss_report_interval_ms", "not positive"))
        }
    }

    /// The SRTP keys (docs/protocol.md, "Media encryption"): all three fields or none, only the
    /// one profile, keys of exactly 28 bytes; redacted when printed.
    func testWelcomeCarriesSRTPKeys() throws {
        guard case .welcome(var w) = Self.samples[2].body else { return XCTFail() }
        XCTAssertNil(w.mediaEncryption)
        let plain = try JSONSerializationLite.text(SignalMessage(.welcome(w)).encode())
        XCTAssertFalse(plain.contains("srtp"), "no keys, no srtp fields")
        let keys = MediaEncryption(uplink: SRTPMasterKey(bytes: Array(0 ..< 28))!, downlink: SRTPMasterKey(bytes: Array(100 ..< 128))!)
        w.mediaEncryption = keys
        let encoded = try SignalMessage(.welcome(w)).encode()
        let object = try JSONSerializationLite.object(encoded)
        XCTAssertEqual(object["srtp_profile"], "AEAD_AES_128_GCM")
        XCTAssertEqual(object["srtp_uplink_key"], Base64.encode(Array(0 ..< 28)))
        XCTAssertEqual(object["srtp_downlink_key"], Base64.encode(Array(100 ..< 128)))
        guard case let .welcome(back) = try SignalMessage.decode(encoded).body else { return XCTFail() }
        XCTAssertEqual(back.mediaEncryption, keys)
        XCTAssertFalse("\(back)".contains(Base64.encode(Array(0 ..< 28))), "keys are redacted when printed")

        let text = JSONSerializationLite.text(encoded)
        assertInvalidField(text.replacingOccurrences(of: #""AEAD_AES_128_GCM""#, with: #""AES_CM_128_NULL_AUTH""#),
                           "srtp_profile", reasonContains: "not supported")
        assertInvalidField(text.replacingOccurrences(of: #""srtp_profile":"AEAD_AES_128_GCM","#, with: ""),
                           "srtp_profile", reasonContains: "missing")
        assertInvalidField(text.replacingOccurrences(of: Base64.encode(Array(0 ..< 28)), with: Base64.encode(Array(0 ..< 16))),
                           "srtp_uplink_key", reasonContains: "28 bytes")
    }

    func testMalformedPayloads() {
        assertError("not json", .malformedJSON("not valid UTF-8 JSON"))
        assertError("[1,2]", .malformedJSON("not a JSON object"))
        assertError("\"leave\"", .malformedJSON("not a JSON object"))
        XCTAssertThrowsError(try SignalMessage.decode([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D])) {
            guard case .malformedJSON = $0 as? SignalMessageError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(SignalMessage.peek(Array("garbage".utf8)), SignalPeek())
    }

    func testPeekFindsTheVersionOfAForeignHello() {
        // A future client's hello may have fields we cannot decode; the server still
        // answers unsupported_version because it reads `protocol` first.
        let hello = Array(#"{"type":"hello","id":1,"protocol":2,"auth":{"kind":"oidc"}}"#.utf8)
        XCTAssertThrowsError(try SignalMessage.decode(hello))
        XCTAssertEqual(SignalMessage.peek(hello), SignalPeek(type: "hello", id: 1, protocolVersion: 2))
    }

    func testRoomErrorCodesKeepTheirSpelling() throws {
        for code in RoomErrorCode.allCases {
            let message = SignalMessage(.error(.init(code: ErrorCode(code), message: "m", requestID: 1)))
            let object = try JSONSerializationLite.object(message.encode())
            XCTAssertEqual(object["code"], code.rawValue)
        }
        // A code this build does not know still decodes: errors are forward compatible.
        XCTAssertEqual(
            try decode(#"{"type":"error","code":"quota_exceeded","message":"later"}"#),
            SignalMessage(.error(.init(code: "quota_exceeded", message: "later"))))
    }

    func testDirections() {
        XCTAssertEqual(SignalMessage.Body.raiseHand.direction, .clientToServer)
        XCTAssertEqual(SignalMessage.Body.pong(t: 1).direction, .serverToClient)
        XCTAssertEqual(SignalMessage.Body.participantLeft(participantID: 1, reason: .left).direction, .serverToClient)
        XCTAssertEqual(SignalMessage.Body.appMessage(.init(data: "")).direction, .both)
        XCTAssertEqual(SignalMessage.Body.lossReport(.init(ssrcs: [], lostPermille: [])).direction, .clientToServer)
        XCTAssertEqual(SignalMessage.Body.receiverLoss(.init(lostPermille: 0, receivers: 0)).direction, .serverToClient)
        XCTAssertTrue(SignalMessage.Body.kick(participantID: 1, reason: nil).needsModerator)
        XCTAssertFalse(SignalMessage.Body.raiseHand.needsModerator)
    }

    func testFramedMessagesSurviveTheStream() throws {
        let encoder = FrameEncoder()
        let stream = try Self.samples.flatMap { try encoder.encode($0) }
        var decoder = FrameDecoder()
        var decoded: [SignalMessage] = []
        for byte in stream {
            for payload in try decoder.feed([byte]) { decoded.append(try SignalMessage.decode(payload)) }
        }
        XCTAssertEqual(decoded, Self.samples)
        // A message too big for the peer's frame limit is refused before sending.
        XCTAssertThrowsError(try FrameEncoder(maxFrameSize: 100).encode(Self.samples[2])) {
            guard case .payloadTooLarge = $0 as? FrameError else { return XCTFail("\($0)") }
        }
    }

    /// Mutated and truncated versions of valid messages: decoding must return or throw,
    /// never trap, and a successful decode must re-encode.
    func testMutationsNeverTrap() throws {
        var generator = SystemRandomNumberGenerator()
        let payloads = try Self.samples.map { try $0.encode() }
        var decodedCount = 0
        for _ in 0 ..< 20_000 {
            var bytes = payloads.randomElement(using: &generator)!
            switch Int.random(in: 0 ..< 3, using: &generator) {
            case 0: bytes[Int.random(in: 0 ..< bytes.count, using: &generator)] = UInt8.random(in: 0 ... 255, using: &generator)
            case 1: bytes = Array(bytes.prefix(Int.random(in: 0 ..< bytes.count, using: &generator)))
            default: bytes.insert(UInt8.random(in: 0x20 ... 0x7E, using: &generator), at: Int.random(in: 0 ... bytes.count, using: &generator))
            }
            if let message = try? SignalMessage.decode(bytes) {
                decodedCount += 1
                XCTAssertNoThrow(try message.encode())
            }
        }
        XCTAssertGreaterThan(decodedCount, 0)
    }
}

/// Flattens a JSON object's top level to strings so tests can compare wire spellings.
enum JSONSerializationLite {
    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    static func object(_ bytes: [UInt8]) throws -> [String: String] {
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] ?? [:]
        return object.mapValues { value in
            if let string = value as? String { return string }
            if let number = value as? NSNumber { return number.stringValue }
            return "\(value)"
        }
    }

    /// Issue 27: duplicate keys are refused in signalling frames as in tokens (JSONDecoder would
    /// keep one silently); nested objects and arrays keep their own keys.
    func testAKeyTwiceInOneObjectIsRefused() {
        for text in [#"{"type":"ping","t":1,"t":2}"#, #"{"type":"app_message","data":"a","da\u0074a":"b"}"#,
                     #"{"type":"hello","type":"ping","t":1}"#] {
            XCTAssertThrowsError(try SignalMessage.decode(Array(text.utf8)), text) { error in
                XCTAssertTrue("\(error)".contains("twice"), "\(error)")
            }
        }
        XCTAssertNoThrow(try SignalMessage.decode(Array(#"{"type":"loss_report","ssrcs":[1,2],"lost_permille":[3,4]}"#.utf8)))
    }

    /// What JSONDecoder would take but the strict reader refuses is refused too: a key twice
    /// behind 65 levels of nesting must not slip past the check by being deeper than it reads.
    func testWhatTheStrictReaderRefusesIsNeverDecoded() {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let text = #"{"type":"ping","t":1,"x":"# + deep + "}"
        XCTAssertThrowsError(try SignalMessage.decode(Array(text.utf8))) { error in
            XCTAssertEqual(error as? SignalMessageError, .malformedJSON("nesting deeper than 64 at byte 89"), "\(error)")
        }
        let shallow = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        XCTAssertNoThrow(try SignalMessage.decode(Array((#"{"type":"ping","t":1,"x":"# + shallow + "}").utf8)),
                         "unknown keys are ignored, so the depth alone decides")
    }
}
