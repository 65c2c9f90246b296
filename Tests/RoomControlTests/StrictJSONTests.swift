import RoomControl
import RoomJSON
import XCTest

/// Issue 10 (9): the control API's JSON is read strictly — duplicate keys, whole numbers
/// written as fractions, invalid UTF-8 and numbers beyond a Double are errors that say what.
final class StrictJSONTests: XCTestCase {
    private func error(_ text: String) -> String? {
        do { _ = try JSONValue.parse(text); return nil } catch { return error.message }
    }

    private func requestError(_ bytes: [UInt8]) -> ControlError? {
        do { _ = try ControlRequest.parse(line: bytes); return nil } catch { return error.error }
    }

    func testDuplicateKeysAreRefusedNotFirstWins() {
        XCTAssertEqual(error(#"{"cmd":"status","cmd":"mute"}"#), #"duplicate key "cmd" at byte 16"#)
        let e = requestError(Array(#"{"id":1,"cmd":"status","cmd":"mute"}"#.utf8))
        XCTAssertEqual(e?.code, .badJSON)
        XCTAssertTrue(e?.message.contains(#"duplicate key "cmd""#) == true, "\(e?.message ?? "")")
        XCTAssertNotNil(error(#"{"args":{"db":1,"db":2}}"#), "nested objects too")
    }

    func testWholeNumbersWrittenAsFractionsAreNotIntegers() throws {
        XCTAssertEqual(try JSONValue.parse("2"), .int(2))
        XCTAssertEqual(try JSONValue.parse("2.0"), .double(2))
        XCTAssertEqual(try JSONValue.parse("2e0"), .double(2))
        XCTAssertEqual(try JSONValue.parse("-0"), .int(0))
        XCTAssertEqual(try JSONValue.parse("1.5e3"), .double(1500))
        XCTAssertEqual(try JSONValue.parse("9223372036854775808"), .double(9223372036854775808), "beyond Int: a number")
        // An integer argument given as 7.0 is the wrong type, named.
        let e = requestError(Array(#"{"id":1,"cmd":"volume","args":{"participant":7.0,"db":-6}}"#.utf8))
        XCTAssertEqual(e?.code, .wrongType)
        XCTAssertEqual(e?.field, "args.participant")
    }

    func testErrorsNameTheProblemAndWhere() {
        XCTAssertEqual(error("1e309"), "number 1e309 at byte 0 is out of range")
        XCTAssertEqual(error("-1e400"), "number -1e400 at byte 0 is out of range")
        let badUTF8: [UInt8] = Array(#"{"cmd":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        XCTAssertEqual((try? JSONValue.parse(badUTF8)) == nil, true)
        do { _ = try JSONValue.parse(badUTF8) } catch { XCTAssertEqual(error.message, "invalid UTF-8 (byte 0xc3) at byte 8") }
        let e = requestError(badUTF8)
        XCTAssertEqual(e?.code, .badJSON)
        XCTAssertTrue(e?.message.contains("invalid UTF-8") == true, "\(e?.message ?? "")")
        // Overlong forms, a surrogate, beyond U+10FFFF, a byte that never starts a sequence.
        for bad in [[0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF]] as [[UInt8]] {
            XCTAssertThrowsError(try JSONValue.parse([0x22] + bad + [0x22]), "\(bad)")
        }
        XCTAssertEqual(error("{\"a\":1,}"), "expected a key string, got '}' at byte 7")
        XCTAssertEqual(error("[1 2]"), "expected ',' or ']', got '2' at byte 3")
        XCTAssertEqual(error("{\"a\":1} x"), "unexpected 'x' after the JSON value at byte 8")
        XCTAssertEqual(error("\"a\u{01}\""), "control character byte 0x1 in a string (escape it) at byte 2")
        XCTAssertEqual(error("01"), "leading zero in a number at byte 1")
        XCTAssertEqual(error(#""\ud800""#), #"unpaired surrogate \ud800 at byte 7"#)
        XCTAssertEqual(error(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)), "nesting deeper than 64 at byte 64")
        XCTAssertNoThrow(try JSONValue.parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)))
    }

    func testValidTextReadsAsBefore() throws {
        let text = #" { "s" : "a\"b\\c\/d\n\u00e9\ud83d\ude00 ☕", "n": null, "t": true, "f": false, "a": [1, -2.5, {}], "e": {} } "#
        let v = try JSONValue.parse(text)
        XCTAssertEqual(v["s"], .string("a\"b\\c/d\né😀 ☕"))
        XCTAssertEqual(v["n"], .null)
        XCTAssertEqual(v["a"], [1, -2.5, [:]])
        XCTAssertEqual(try JSONValue.parse(v.jsonText), v, "what we write, we read")
    }

    /// Random damage to valid requests never traps and always gives a value or an error.
    func testMutationsNeverTrap() {
        var rng = SystemRandomNumberGenerator()
        let seeds = [#"{"id":1,"cmd":"volume","args":{"participant":7,"db":-6.5}}"#, #"{"a":["\u00e9",true,null,{"b":1e3}]}"#]
        for seed in seeds {
            let base = Array(seed.utf8)
            for _ in 0..<3000 {
                var m = base
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    let k = Int.random(in: 0..<m.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: m[k] = UInt8.random(in: 0...255, using: &rng)
                    case 1: m.remove(at: k); if m.isEmpty { m = [0x7B] }
                    default: m.insert(UInt8.random(in: 0...255, using: &rng), at: k)
                    }
                }
                _ = try? JSONValue.parse(m)
                _ = try? ControlRequest.parse(line: m)
            }
        }
    }
}
