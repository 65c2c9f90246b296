import RoomProtocol
import XCTest

/// `SignalFastPath` against the Codable path it stands in for: for every message it takes,
/// the same bytes out and the same value in; for everything else (other forms, bad input) it
/// declines, so `SignalMessage.decode` answers exactly what Codable answers, errors included.
final class SignalFastPathTests: XCTestCase {
    /// SplitMix64: a seeded generator, so a failure names a case that can be run again.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Integers of type T, edges (0, 1, min, max, max - 1, small negatives) half the time.
    static func integer<T: FixedWidthInteger>(_ type: T.Type, in range: ClosedRange<T>? = nil, using g: inout Seeded) -> T {
        let range = range ?? T.min ... T.max
        if Bool.random(using: &g) {
            let edges = [range.lowerBound, range.upperBound, range.upperBound - 1, 0, 1, 10, 127, 128]
                .filter { range.contains($0) }
            return edges.randomElement(using: &g)!
        }
        return T.random(in: range, using: &g)
    }

    /// One random message of each fast-path type per call, with and without `id`.
    static func messages(using g: inout Seeded) -> [SignalMessage] {
        func id() -> Int? { Bool.random(using: &g) ? nil : integer(Int.self, using: &g) }
        let speakers = Int.random(in: 0 ... 6, using: &g)
        let streams = Int.random(in: 0 ... SignalLimits.maxLossReportStreams, using: &g)
        return [
            SignalMessage(id: id(), .ping(t: integer(Int64.self, using: &g))),
            SignalMessage(id: id(), .pong(t: integer(Int64.self, using: &g))),
            SignalMessage(id: id(), .ok(requestID: integer(Int.self, using: &g))),
            SignalMessage(
                id: id(),
                .receiverLoss(.init(
                    lostPermille: integer(UInt16.self, in: 0 ... SignalLimits.maxLossPermille, using: &g),
                    receivers: integer(Int.self, in: 0 ... Int.max, using: &g)))),
            SignalMessage(
                id: id(),
                .lossReport(.init(
                    ssrcs: (0 ..< streams).map { _ in integer(UInt32.self, using: &g) },
                    lostPermille: (0 ..< streams).map { _ in integer(UInt16.self, in: 0 ... SignalLimits.maxLossPermille, using: &g) }))),
            SignalMessage(
                id: id(),
                .activeSpeakers(.init(
                    ids: (0 ..< speakers).map { _ in integer(UInt32.self, using: &g) },
                    levels: (0 ..< speakers).map { _ in integer(UInt8.self, in: 0 ... SignalLimits.maxAudioLevel, using: &g) }))),
        ]
    }

    /// The message's members as JSON texts (key, value), as a peer might write them.
    static func members(_ message: SignalMessage) -> [(String, String)] {
        func list<T: BinaryInteger>(_ values: [T]) -> String { "[" + values.map { "\($0)" }.joined(separator: ",") + "]" }
        var out = [("type", "\"\(message.body.typeName)\"")]
        if let id = message.id { out.append(("id", "\(id)")) }
        switch message.body {
        case let .ping(t), let .pong(t): out.append(("t", "\(t)"))
        case let .ok(requestID): out.append(("request_id", "\(requestID)"))
        case let .receiverLoss(l): out += [("lost_permille", "\(l.lostPermille)"), ("receivers", "\(l.receivers)")]
        case let .lossReport(r): out += [("ssrcs", list(r.ssrcs)), ("lost_permille", list(r.lostPermille))]
        case let .activeSpeakers(s): out += [("ids", list(s.ids)), ("levels", list(s.levels))]
        default: XCTFail("not a fast-path message: \(message)")
        }
        return out
    }

    /// JSON whitespace, sometimes none.
    static func space(using g: inout Seeded) -> String {
        Bool.random(using: &g) ? "" : String((0 ..< Int.random(in: 1 ... 3, using: &g)).map { _ in [" ", "\t", "\n", "\r"].randomElement(using: &g)! })
    }

    /// An object from members, keys shuffled and whitespace between every token when asked.
    static func object(_ members: [(String, String)], shuffle: Bool, spaced: Bool, using g: inout Seeded) -> [UInt8] {
        var members = members
        if shuffle { members.shuffle(using: &g) }
        func s() -> String { spaced ? space(using: &g) : "" }
        let body = members.map { key, value in
            // Spaces inside arrays too: "[1, 2]".
            let value = spaced && value.hasPrefix("[") ? value.replacingOccurrences(of: ",", with: "\(s()),\(s())") : value
            return "\(s())\"\(key)\"\(s()):\(s())\(value)\(s())"
        }.joined(separator: ",")
        return Array("\(s()){\(body)}\(s())".utf8)
    }

    static func result(_ body: () throws(SignalMessageError) -> SignalMessage) -> Result<SignalMessage, SignalMessageError> {
        do { return .success(try body()) } catch { return .failure(error) }
    }

    func testEncodesTheBytesJSONEncoderWrites() throws {
        var g = Seeded(state: 1)
        var count = 0
        for _ in 0 ..< 400 {
            for message in Self.messages(using: &g) {
                let fast = try XCTUnwrap(SignalFastPath.encode(message), "\(message)")
                XCTAssertEqual(String(decoding: fast, as: UTF8.self), String(decoding: try message.encodeCodable(), as: UTF8.self))
                XCTAssertEqual(try message.encode(), fast)
                count += 1
            }
        }
        XCTAssertEqual(count, 2400)
        // Extremes JSONEncoder writes in full.
        for t in [Int64.min, Int64.max, -1, 0] {
            XCTAssertEqual(SignalFastPath.encode(SignalMessage(id: Int.min, .ping(t: t))), try SignalMessage(id: Int.min, .ping(t: t)).encodeCodable())
        }
        XCTAssertEqual(String(decoding: SignalFastPath.encode(SignalMessage(id: -3, .pong(t: Int64.min)))!, as: UTF8.self),
                       #"{"id":-3,"t":-9223372036854775808,"type":"pong"}"#)
    }

    func testOtherMessagesAreLeftToCodable() throws {
        for message in SignalMessageTests.samples {
            let fastTypes: Set = ["ping", "pong", "ok", "loss_report", "receiver_loss", "active_speakers"]
            let fast = SignalFastPath.encode(message)
            XCTAssertEqual(fast != nil, fastTypes.contains(message.body.typeName), message.body.typeName)
            let bytes = try message.encodeCodable()
            XCTAssertEqual(SignalFastPath.decode(bytes) != nil, fastTypes.contains(message.body.typeName), message.body.typeName)
            XCTAssertEqual(try message.encode(), bytes)
        }
    }

    /// Any key order and whitespace: the fast path reads it, and reads what Codable reads.
    func testDecodesWhatCodableDecodes() throws {
        var g = Seeded(state: 2)
        for round in 0 ..< 400 {
            for message in Self.messages(using: &g) {
                let bytes = Self.object(Self.members(message), shuffle: round > 0, spaced: round % 2 == 1, using: &g)
                let text = String(decoding: bytes, as: UTF8.self)
                XCTAssertEqual(SignalFastPath.decode(bytes), message, text)
                XCTAssertEqual(try SignalMessage.decodeCodable(bytes), message, text)
                XCTAssertEqual(try SignalMessage.decode(bytes), message, text)
            }
        }
    }

    /// Forms the fast path does not read (escapes, unknown keys, numbers with a fraction or
    /// exponent, null): it declines, and `decode` answers what Codable answers.
    func testOtherFormsGoThroughCodable() throws {
        var g = Seeded(state: 3)
        let unknown = [
            ("note", #""a \"quoted\" \\ line\n""#), ("muted", "true"), ("x", "null"), ("nested", #"{"t":[1,{"a":null}]}"#),
            ("name", #""caf\u00e9 ☕""#), ("big", "1e400"), ("client", #""roomd\/0.1""#),
        ]
        var declined = 0
        for _ in 0 ..< 300 {
            for message in Self.messages(using: &g) {
                var members = Self.members(message)
                switch Int.random(in: 0 ..< 4, using: &g) {
                case 0: members.insert(unknown.randomElement(using: &g)!, at: Int.random(in: 0 ... members.count, using: &g))
                case 1:  // the type name with an escape: the same string to JSON
                    let name = message.body.typeName
                    members[0].1 = "\"\\u00\(String(name.utf8.first!, radix: 16))\(name.dropFirst())\""
                case 2:  // "id": null is an absent id to Codable
                    guard message.id == nil else { continue }
                    members.append(("id", "null"))
                default:  // a whole number written with a fraction
                    guard let index = members.firstIndex(where: { $0.1.first.map { $0.isNumber || $0 == "-" } == true }) else { continue }
                    members[index].1 += ".0"
                }
                let bytes = Self.object(members, shuffle: true, spaced: Bool.random(using: &g), using: &g)
                let text = String(decoding: bytes, as: UTF8.self)
                XCTAssertNil(SignalFastPath.decode(bytes), text)
                XCTAssertEqual(Self.result { () throws(SignalMessageError) in try SignalMessage.decode(bytes) },
                               Self.result { () throws(SignalMessageError) in try SignalMessage.decodeCodable(bytes) }, text)
                declined += 1
            }
        }
        XCTAssertGreaterThan(declined, 1000)
        // Escapes and unknown keys still decode to the message.
        XCTAssertEqual(try SignalMessage.decode(Array(#"{"type":"p\u006fng","t":5,"x":"\"\\"}"#.utf8)), SignalMessage(.pong(t: 5)))
    }

    /// Bad input and odd forms: the fast path declines, and the answer is Codable's — for bad
    /// input the error naming the field.
    func testBadInputGivesTheCodableError() throws {
        let cases: [(String, SignalMessageError?)] = [
            (#"{"type":"active_speakers","ids":[1],"levels":[128]}"#, .invalidField("levels", "levels[0] above 127")),
            (#"{"type":"active_speakers","ids":[1,2],"levels":[3]}"#, .invalidField("levels", "1 levels for 2 ids")),
            (#"{"type":"active_speakers","ids":[4294967296],"levels":[3]}"#, .invalidField("ids[0]", "must be an integer in 0...4294967295")),
            (#"{"type":"active_speakers","ids":[-1],"levels":[3]}"#, .invalidField("ids[0]", "must be an integer in 0...4294967295")),
            (#"{"type":"active_speakers","ids":[1]}"#, .invalidField("levels", "missing")),
            (#"{"type":"loss_report","ssrcs":[5],"lost_permille":[1001]}"#, .invalidField("lost_permille", "lost_permille[0] above 1000")),
            (#"{"type":"loss_report","ssrcs":[5],"lost_permille":7}"#, nil),
            (#"{"type":"receiver_loss","lost_permille":1001,"receivers":1}"#, .invalidField("lost_permille", "above 1000")),
            (#"{"type":"receiver_loss","lost_permille":10,"receivers":-1}"#, .invalidField("receivers", "negative")),
            (#"{"type":"receiver_loss","lost_permille":[10],"receivers":1}"#, nil),
            (#"{"type":"ping","t":"5"}"#, .invalidField("t", "expected an integer")),
            (#"{"type":"ping","t":9223372036854775808}"#, nil),
            (#"{"type":"ping","t":-9223372036854775809}"#, nil),
            (#"{"type":"pong","t":1.5}"#, nil),
            (#"{"type":"pong","t":1e3}"#, nil),
            (#"{"type":"pong","t":01}"#, nil),
            (#"{"type":"pong","t":-0}"#, nil),
            (#"{"type":"pong","t":-}"#, nil),
            (#"{"type":"pong"}"#, .invalidField("t", "missing")),
            (#"{"type":"pong","t":null}"#, nil),
            (#"{"type":"pong","t":5,"t":6}"#, nil),
            (#"{"type":"pong","t":5}x"#, nil),
            (#"{"type":"pong","t":5"#, nil),
            (#"{"type":"pong","t":5,}"#, nil),
            (#"{"type":"ok","request_id":true}"#, .invalidField("request_id", "expected an integer")),
            (#"{"type":"ok"}"#, .invalidField("request_id", "missing")),
            (#"{"type":"ok","request_id":1,"id":"x"}"#, .invalidField("id", "expected an integer")),
            (#"{"type":"pings","t":5}"#, .unknownType("pings")),
            (#"{"t":5}"#, .invalidField("type", "missing")),
            (#"{}"#, .invalidField("type", "missing")),
            ("", nil), ("{", nil), ("[]", .malformedJSON("not a JSON object")),
        ]
        for (json, expected) in cases {
            let bytes = Array(json.utf8)
            XCTAssertNil(SignalFastPath.decode(bytes), json)
            let codable = Self.result { () throws(SignalMessageError) in try SignalMessage.decodeCodable(bytes) }
            XCTAssertEqual(Self.result { () throws(SignalMessageError) in try SignalMessage.decode(bytes) }, codable, json)
            // nil: a form the fast path leaves to Codable, whatever Codable makes of it (it
            // reads 1e3 as 1000, -0 as 0, the first of two keys, a trailing comma).
            if let expected { XCTAssertEqual(codable, .failure(expected), json) }
        }
        // Non-ASCII bytes, valid or not, are left to Codable's UTF-8 check.
        for bytes: [UInt8] in [[0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], Array(#"{"type":"pong","t":5,"ü":1}"#.utf8)] {
            XCTAssertNil(SignalFastPath.decode(bytes))
            XCTAssertEqual(Self.result { () throws(SignalMessageError) in try SignalMessage.decode(bytes) },
                           Self.result { () throws(SignalMessageError) in try SignalMessage.decodeCodable(bytes) })
        }
    }

    /// Random damage to fast-path payloads: never a trap, and `decode` answers what Codable
    /// answers whenever the fast path declines; where it accepts, Codable accepts the same.
    func testMutationsAgreeWithCodable() throws {
        var g = Seeded(state: 4)
        var accepted = 0, declined = 0
        for _ in 0 ..< 3000 {
            let message = Self.messages(using: &g).randomElement(using: &g)!
            var bytes = Self.object(Self.members(message), shuffle: true, spaced: Bool.random(using: &g), using: &g)
            for _ in 0 ..< Int.random(in: 1 ... 3, using: &g) {
                switch Int.random(in: 0 ..< 4, using: &g) {
                case 0: bytes[Int.random(in: 0 ..< bytes.count, using: &g)] = Array("0123456789-.e,:[]{}\" \\x".utf8).randomElement(using: &g)!
                case 1: bytes = Array(bytes.prefix(Int.random(in: 0 ..< bytes.count, using: &g)))
                case 2: bytes.insert(UInt8.random(in: 0x20 ... 0x7E, using: &g), at: Int.random(in: 0 ... bytes.count, using: &g))
                default: if !bytes.isEmpty { bytes.remove(at: Int.random(in: 0 ..< bytes.count, using: &g)) }
                }
                if bytes.isEmpty { break }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let codable = Self.result { () throws(SignalMessageError) in try SignalMessage.decodeCodable(bytes) }
            if let fast = SignalFastPath.decode(bytes) {
                accepted += 1
                XCTAssertEqual(codable, .success(fast), text)
            } else {
                declined += 1
            }
            XCTAssertEqual(Self.result { () throws(SignalMessageError) in try SignalMessage.decode(bytes) }, codable, text)
        }
        XCTAssertGreaterThan(accepted, 100)
        XCTAssertGreaterThan(declined, 1000)
    }
}
