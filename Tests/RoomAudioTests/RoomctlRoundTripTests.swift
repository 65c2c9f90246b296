import Foundation
import RoomControl
import RoomTestSupport
import XCTest

/// Every command of the control API, through roomctl, against running roomd processes in a
/// moderated room: A is a moderator, B an audience member it acts on. Each command must succeed
/// (exit 0) and, where it is cheap to see, have its effect. The table of commands is the
/// source: a command added without a round trip here fails the coverage check at the end.
final class RoomctlRoundTripTests: ProcessTestCase {
    func testEveryCommandRoundTripsAgainstRunningDaemons() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("roundtrip")
        let (tcp, _, _) = try startServer(server, dir: dir, replacing: ["policy = open": "policy = moderated"])
        SimCard.useRoom(dir, ["echo": "on", "noise_dbfs": "-70"])
        for (name, role, grants) in [("a", "streamer", ["--publish", "--moderate"]), ("b", "audience", ["--publish"])] {
            let token = try mintToken(server, config: dir + "/server.conf", room: "rt", user: name, grants)
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--server", "127.0.0.1:\(tcp)", "--token", token,
                               "--role", role, "--duration", "40", "--stats-interval", "0", "--config", "none",
                               "--state-dir", dir + "/\(name)-state", "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": dir + "/room.conf"], log: dir + "/\(name).log")
        }
        var exercised = Set<String>()
        @discardableResult
        func ctl(_ who: String, _ args: [String], expect: Int32 = 0, againOnDeviceError: Bool = false,
                 file: StaticString = #filePath, line: UInt = #line) throws -> String {
            let r = try Disturbance.rerun("roomctl \(args.joined(separator: " "))", disturbed: {
                againOnDeviceError && $0.status != 0 && $0.stdout.contains("\"device_error\"")
            }) { try runSeparated(roomctl, ["--socket", dir + "/\(who).sock", "--json"] + args) }
            XCTAssertEqual(r.status, expect, "\(who): roomctl \(args.joined(separator: " ")): \(r.stdout) \(r.stderr)", file: file, line: line)
            if let sub = args.first(where: { !$0.hasPrefix("-") }) { exercised.insert(sub.replacingOccurrences(of: "-", with: "_")) }
            return r.stdout
        }
        func result(_ text: String) throws -> [String: Any] {
            try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["result"] as? [String: Any], text)
        }
        for who in ["a", "b"] {
            waitForSocket(dir + "/\(who).sock")
            try ctl(who, ["wait", "joined", "--timeout", "5"])
        }
        let b = try XCTUnwrap(try result(try ctl("b", ["status"]))["participant"] as? Int)

        // Reading.
        XCTAssertEqual(try result(try ctl("a", ["version"]))["api"] as? Int, controlAPIVersion)
        XCTAssertEqual((try result(try ctl("a", ["participants"]))["participants"] as? [Any])?.count, 2)
        XCTAssertNotNil(try result(try ctl("a", ["stats"]))["periods"] as? Int)

        // Settings.
        try ctl("a", ["log-level", "debug"])
        try ctl("a", ["volume", "-6"])
        XCTAssertEqual(try result(try ctl("a", ["status"]))["volume_db"] as? Double, -6)
        try ctl("a", ["volume", "\(b)", "-10"])
        try ctl("a", ["profile", "music"])
        try ctl("a", ["profile", "speech"])
        try ctl("a", ["reload"])  // --config none: nothing to apply, still an answer
        // A second room, listened to beside this one, and left again (ListenToASecondRoomTests
        // has what it plays).
        let listenToken = dir + "/listen.token"
        try mintToken(server, config: dir + "/server.conf", room: "rt2", user: "a-listens").write(toFile: listenToken, atomically: true, encoding: .utf8)
        try ctl("a", ["listen", "rt2", "--token-file", listenToken, "--gain", "-6"])
        XCTAssertEqual((try result(try ctl("a", ["status"]))["listening"] as? [String: Any])?["room"] as? String, "rt2")
        try ctl("a", ["listen", "other-room", "--token-file", listenToken], expect: 1)   // the token names rt2
        try ctl("a", ["unlisten"])
        XCTAssertNil(try result(try ctl("a", ["status"]))["listening"])

        // Calls without a SIP account: each call command is refused with call_error, nothing changes
        // (CallLinkProcessTests place real calls).
        for args in [["call", "sip:200@127.0.0.1:5060"], ["answer"], ["decline"], ["hangup"], ["hold"], ["resume"],
                     ["dtmf", "12#"], ["bridge"], ["unbridge"]] {
            let out = try ctl("a", args, expect: 1)
            XCTAssertTrue(out.contains("call_error"), "\(args): \(out)")
        }
        XCTAssertNil(try result(try ctl("a", ["status"]))["call"], "no [sip]: no call in status")

        // Messages and attributes.
        try ctl("a", ["send-message", "--to", "\(b)", "hello B"])
        try ctl("a", ["send-message", "hello room"])
        try ctl("a", ["set-attribute", "topic", "budget"])
        try ctl("a", ["set-attribute", "topic"])

        // Stage: raise/lower, deny, approve, step down, invite/decline/accept, mute, demote.
        try ctl("b", ["raise-hand"])
        try ctl("b", ["lower-hand"])
        try ctl("b", ["raise-hand"])
        try ctl("a", ["deny", "\(b)"])
        try ctl("b", ["raise-hand"])
        try ctl("a", ["approve", "\(b)"])
        try ctl("b", ["wait", "on-stage", "--timeout", "3"])
        try ctl("b", ["step-down"])
        try ctl("a", ["invite", "\(b)"])
        try ctl("b", ["decline-invite"])
        try ctl("a", ["invite", "\(b)"])
        try ctl("b", ["accept-invite"])
        try ctl("b", ["wait", "on-stage", "--timeout", "3"])
        try ctl("a", ["mute-participant", "\(b)"])
        try ctl("b", ["wait", "muted", "--timeout", "3"])
        try ctl("a", ["demote", "\(b)"])

        // Own mute.
        try ctl("a", ["mute"])
        try ctl("a", ["wait", "muted", "--timeout", "3"])
        try ctl("a", ["unmute"])
        try ctl("a", ["toggle-mute"])
        try ctl("a", ["wait", "muted", "--timeout", "3"])
        try ctl("a", ["events", "--event", "mute", "--count", "1", "--timeout", "0.5"], expect: Roomctl.Exit.timeout)

        // A join naming a server that is not host:port is refused with the field, nothing changes.
        let refused = try runSeparated(roomctl, ["--socket", dir + "/b.sock", "--json", "join", "--server", "roomserver_local:7700"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stdout.contains("\"field\":\"args.server\"") && refused.stdout.contains("bad_request"), refused.stdout)

        // Leaving and joining again; kicked at the end.
        try ctl("b", ["leave"])
        try ctl("b", ["join"])
        try ctl("b", ["wait", "joined", "--timeout", "5"])
        let b2 = try XCTUnwrap(try result(try ctl("b", ["status"]))["participant"] as? Int)
        try ctl("a", ["kick", "\(b2)", "--reason", "test over"])
        // Removed: in no room, so no role in one (issue 10: it said "audience"); levels are
        // tenths as written (issue 10: -69.9000015258789).
        let statusText = try ctl("b", ["status"])
        let removed = try result(statusText)
        XCTAssertEqual(removed["joined"] as? Bool, false, statusText)
        XCTAssertEqual(removed["role"] as? String, "none", statusText)
        let mic = try XCTUnwrap(statusText.range(of: #""mic_dbfs":-?[0-9.]+"#, options: .regularExpression).map { String(statusText[$0]) })
        let decimals = mic.contains(".") ? mic.split(separator: ".").last?.count ?? 0 : 0
        XCTAssertLessThanOrEqual(decimals, 1, "one decimal at most: \(mic)")

        // The self-test last, seconds after the daemons started and after the profile switches
        // above: three attempts in a row, each within 5 s of start and right after two profile
        // changes, all ended in device_error in one fresh-clone CI run (not reproduced in
        // three runs here). An xrun during the self-test makes roomd refuse the result with
        // `device_error`, "run it again": so the test does, through the suite's one policy, as
        // people and the HIL rig do.
        let selftest = try result(try ctl("a", ["selftest"], againOnDeviceError: true))
        XCTAssertEqual((selftest["mics"] as? [Any])?.count, 4)

        exercised.insert("subscribe")  // `wait` and `events` subscribe
        let missing = Set(ControlCommands.all.map(\.name)).subtracting(exercised)
        XCTAssertEqual(missing, [], "commands without a round trip against roomd")
    }
}
