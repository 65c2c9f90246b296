import RoomControl
import RoomJSON
import XCTest

/// Argument validation of every command, driven by the command table.
final class ControlRequestTests: XCTestCase {
    /// A valid value for an argument type.
    static func sample(_ type: ControlArgumentType) -> JSONValue {
        switch type {
        case .integer(let r): .int(max(r.lowerBound, 7))
        case .number: .double(-6.5)
        case .string: "hello"
        case .oneOf(let allowed): .string(allowed.last!)
        case .boolean: true
        case .stringList(let allowed): .array([.string(allowed[0])])
        }
    }

    /// A value of the wrong JSON type for an argument type.
    static func wrong(_ type: ControlArgumentType) -> JSONValue {
        switch type {
        case .integer: "7"
        case .number: "-6"
        case .string, .oneOf: 12
        case .boolean: "yes"
        case .stringList: "connection"
        }
    }

    static func line(_ cmd: String, _ args: [String: JSONValue]?, id: JSONValue = 1) -> String {
        var o: [String: JSONValue] = ["id": id, "cmd": .string(cmd)]
        if let args { o["args"] = .object(args) }
        return JSONValue.object(o).jsonText
    }

    func parse(_ text: String) -> Result<ControlRequest, ControlRequest.Failure> {
        do { return .success(try ControlRequest.parse(line: Array(text.utf8))) } catch { return .failure(error) }
    }

    func testEveryCommandAcceptsGoodArguments() throws {
        for spec in ControlCommands.all {
            var all: [String: JSONValue] = [:]
            var required: [String: JSONValue] = [:]
            for a in spec.arguments {
                all[a.name] = Self.sample(a.type)
                if a.required { required[a.name] = Self.sample(a.type) }
            }
            for args in [all, required] {
                switch parse(Self.line(spec.name, args)) {
                case .success(let r):
                    XCTAssertEqual(r.name, spec.name)
                    XCTAssertEqual(r.id, .int(1))
                    XCTAssertEqual(r.arguments, args)
                case .failure(let f): XCTFail("\(spec.name) \(args): \(f.error)")
                }
            }
        }
    }

    func testEveryArgumentOfTheWrongTypeIsNamed() {
        for spec in ControlCommands.all {
            for a in spec.arguments {
                var args: [String: JSONValue] = [:]
                for other in spec.arguments where other.required { args[other.name] = Self.sample(other.type) }
                args[a.name] = Self.wrong(a.type)
                guard case .failure(let f) = parse(Self.line(spec.name, args)) else {
                    XCTFail("\(spec.name).\(a.name): wrong type accepted"); continue
                }
                XCTAssertEqual(f.id, .int(1))
                XCTAssertEqual(f.error.code, .wrongType, "\(spec.name).\(a.name)")
                XCTAssertEqual(f.error.field, "args.\(a.name)", "\(spec.name)")
                XCTAssertEqual(f.error.expected, a.type.expectedName)
                XCTAssertTrue(f.error.message.contains("args.\(a.name)"), f.error.message)
            }
        }
    }

    func testMissingRequiredAndUnknownArguments() {
        for spec in ControlCommands.all {
            for a in spec.arguments where a.required {
                var args: [String: JSONValue] = [:]
                for other in spec.arguments where other.required && other.name != a.name { args[other.name] = Self.sample(other.type) }
                guard case .failure(let f) = parse(Self.line(spec.name, args)) else { XCTFail("\(spec.name): missing \(a.name) accepted"); continue }
                XCTAssertEqual(f.error.code, .badRequest)
                XCTAssertEqual(f.error.field, "args.\(a.name)")
            }
            var args: [String: JSONValue] = ["bogus": 1]
            for other in spec.arguments where other.required { args[other.name] = Self.sample(other.type) }
            guard case .failure(let f) = parse(Self.line(spec.name, args)) else { XCTFail("\(spec.name): unknown argument accepted"); continue }
            XCTAssertEqual(f.error.code, .badRequest)
            XCTAssertEqual(f.error.field, "args.bogus")
        }
    }

    func testRangesAndAllowedValues() {
        let cases: [(String, [String: JSONValue], String)] = [
            ("kick", ["participant": 0], "args.participant"),
            ("kick", ["participant": .int(Int(UInt32.max) + 1)], "args.participant"),
            ("kick", ["participant": 7.5], "args.participant"),
            ("volume", ["db": 30], "args.db"),
            ("profile", ["name": "karaoke"], "args.name"),
            ("log_level", ["level": "loud"], "args.level"),
            ("join", ["role": "moderator"], "args.role"),
            ("subscribe", ["events": ["connection", "nonsense"]], "args.events[1]"),
            ("subscribe", ["events": ["connection", 3]], "args.events[1]"),
            ("send_message", ["data": .string(String(repeating: "x", count: 8193))], "args.data"),
        ]
        for (cmd, args, field) in cases {
            guard case .failure(let f) = parse(Self.line(cmd, args)) else { XCTFail("\(cmd) \(args) accepted"); continue }
            XCTAssertEqual(f.error.field, field, "\(cmd) \(args): \(f.error)")
            XCTAssertTrue([.badRequest, .wrongType].contains(f.error.code))
        }
        // Integers are accepted where numbers are expected.
        guard case .success(let r) = parse(Self.line("volume", ["db": -6])) else { return XCTFail() }
        XCTAssertEqual(r.command, .volume(participant: nil, dB: -6))
    }

    func testTypedCommands() throws {
        func command(_ cmd: String, _ args: [String: JSONValue] = [:]) throws -> ControlCommand {
            try ControlRequest.parse(line: Array(Self.line(cmd, args).utf8)).command
        }
        XCTAssertEqual(try command("kick", ["participant": 7, "reason": "spam"]), .moderate(.kick, participant: 7, reason: "spam"))
        XCTAssertEqual(try command("mute_participant", ["participant": 3]), .moderate(.muteParticipant, participant: 3, reason: nil))
        XCTAssertEqual(try command("volume", ["participant": 7, "db": -6.5]), .volume(participant: 7, dB: -6.5))
        XCTAssertEqual(try command("toggle_mute"), .toggleMute)
        XCTAssertEqual(try command("set_attribute", ["key": "topic"]), .setAttribute(key: "topic", value: nil))
        XCTAssertEqual(try command("profile", ["name": "music"]), .profile(.music))
        XCTAssertEqual(try command("subscribe", ["events": ["mute"], "levels": true]), .subscribe(events: ["mute"], levels: true))
        XCTAssertEqual(try command("join", ["role": "audience"]), .join(server: nil, token: nil, role: "audience"))
    }

    func testEnvelopeErrors() {
        func error(_ text: String) -> ControlError? {
            if case .failure(let f) = parse(text) { return f.error }
            return nil
        }
        XCTAssertEqual(error("{not json")?.code, .badJSON)
        XCTAssertEqual(error("[1,2]")?.code, .badJSON)
        XCTAssertEqual(error("\"status\"")?.code, .badJSON)
        XCTAssertEqual(error(#"{"id":1,"cmd":"launch_rockets"}"#)?.code, .unknownCommand)
        XCTAssertEqual(error(#"{"id":1}"#)?.field, "cmd")
        XCTAssertEqual(error(#"{"id":1,"cmd":5}"#)?.code, .wrongType)
        XCTAssertEqual(error(#"{"id":[1],"cmd":"status"}"#)?.field, "id")
        XCTAssertEqual(error(#"{"id":1,"cmd":"mute","args":[]}"#)?.field, "args")
        XCTAssertEqual(error(#"{"id":1,"cmd":"mute","arg":{}}"#)?.field, "arg")
        // Ids: integers, strings, or none.
        if case .success(let r) = parse(#"{"id":"abc","cmd":"status"}"#) { XCTAssertEqual(r.id, .string("abc")) } else { XCTFail() }
        if case .success(let r) = parse(#"{"cmd":"status"}"#) { XCTAssertNil(r.id) } else { XCTFail() }
        // The id is echoed even when the command is refused.
        if case .failure(let f) = parse(#"{"id":"x7","cmd":"nope"}"#) { XCTAssertEqual(f.id, .string("x7")) } else { XCTFail() }
    }

    func testAccessTable() {
        let read = ControlCommands.all.filter { !$0.changesConfiguration }.map(\.name).sorted()
        XCTAssertEqual(read, ["participants", "stats", "status", "subscribe", "version"])
        XCTAssertEqual(Set(ControlCommands.all.map(\.name)).count, ControlCommands.all.count)
    }

    func testResponseLines() throws {
        let ok = try JSONValue.parse(ControlResponse.success(id: .int(3), result: ["muted": true]).dropLast())
        XCTAssertEqual(ok, ["id": 3, "ok": true, "result": ["muted": true]])
        let line = ControlResponse.failure(id: nil, error: .room(code: "not_moderator", "only moderators can kick"))
        XCTAssertEqual(line.last, 0x0A)
        let bad = try JSONValue.parse(line.dropLast())
        XCTAssertEqual(bad, ["id": nil, "ok": false, "error": ["code": "room_error", "message": "only moderators can kick", "room_code": "not_moderator"]])
        XCTAssertEqual(ControlError(json: bad["error"]!)?.roomCode, "not_moderator")
    }
}
