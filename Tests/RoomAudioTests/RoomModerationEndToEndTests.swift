import Foundation
import XCTest

/// Real processes: roomserver (moderated room) and three roomd on simulated cards, driven with
/// roomctl the way the rig drives them. B talks all the time; what A and C hear is measured in
/// windows between the commands.
final class RoomModerationEndToEndTests: ProcessTestCase {
    /// RMS of a listener's speaker output between two monotonic instants.
    private func rms(_ dir: String, _ name: String, from t0: Int64, to t1: Int64) throws -> Double {
        let start = try E2E.startNanoseconds(dir + "/\(name).status", stream: "playback")
        let samples = try SimCard.readWAV(dir + "/\(name)-speaker.wav").floatSamples
        let a = max(0, Int((t0 - start) / 20_833)), b = min(samples.count, Int((t1 - start) / 20_833))  // 48 kHz
        guard b > a + 4800 else { XCTFail("window too short for \(name): \(a)..\(b) of \(samples.count)"); return 0 }
        return sqrt(samples[a..<b].reduce(0) { $0 + Double($1 * $1) } / Double(b - a))
    }

    func testAudienceIsHeardOnlyAfterApprovalAndUntilMutedThenKicked() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("moderation")
        let (tcp, _, _) = try startServer(server, dir: dir, replacing: ["policy = open": "policy = moderated"])

        func token(_ user: String, _ grants: [String]) throws -> String {
            try mintToken(server, config: dir + "/server.conf", room: "mod", user: user, grants)
        }
        SimCard.writeWAV(dir + "/b-mic.wav", SimCard.speechLike(seconds: 3, seed: 1.3, level: 0.25))
        func room(_ name: String, input: String?) throws -> String {
            try E2E.writeRoom(dir, name, input: input, inputEnd: "loop", extra: ["noise_dbfs = -70"])
        }
        let board = SimCard.repoRoot + "/board/sim"
        let people: [(String, String, [String], String?)] = [
            ("a", "streamer", ["--publish", "--moderate"], nil),   // moderator, listens
            ("b", "audience", ["--publish"], dir + "/b-mic.wav"),    // talks all the time
            ("c", "audience", [], nil),                              // listens
        ]
        for (name, role, grants, input) in people {
            try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token(name, grants),
                               "--role", role, "--duration", "16", "--stats-interval", "0",
                               "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": try room(name, input: input)], log: dir + "/\(name).log")
        }
        func ctl(_ who: String, _ args: [String]) throws -> (status: Int32, out: String) {
            try run(roomctl, ["--socket", dir + "/\(who).sock"] + args)
        }
        for who in ["a", "b", "c"] {
            waitForSocket(dir + "/\(who).sock")
            XCTAssertEqual(try ctl(who, ["wait", "joined", "--timeout", "5"]).status, 0, "\(who) joins")
        }

        // B's engine encodes only while the room takes its audio (docs/audio-engine.md).
        func encoded(_ who: String) throws -> Int {
            let out = try ctl(who, ["--json", "stats"]).out
            let result = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])?["result"] as? [String: Any], out)
            return try XCTUnwrap(result["packets_encoded"] as? Int, out)
        }
        // 1. B is audience: nobody hears it, and it encodes nothing.
        let t1 = E2E.monotonicNanoseconds()
        let audienceEncoded = try encoded("b")
        Thread.sleep(forTimeInterval: 2)
        XCTAssertEqual(try encoded("b"), audienceEncoded, "audience: the encoder idles")
        // 2. B raises its hand, the moderator approves: A and C hear it.
        let t2 = E2E.monotonicNanoseconds()
        XCTAssertEqual(try ctl("b", ["raise-hand"]).status, 0)
        let status = try ctl("b", ["--json", "status"]).out
        let bID = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any])?["result"] as? [String: Any])["participant"] as? Int
        let id = try XCTUnwrap(bID)
        XCTAssertEqual(try ctl("a", ["approve", "\(id)"]).status, 0)
        XCTAssertEqual(try ctl("b", ["wait", "on-stage", "--timeout", "3"]).status, 0)
        let t3 = E2E.monotonicNanoseconds()
        let onStageEncoded = try encoded("b")
        Thread.sleep(forTimeInterval: 2.5)
        XCTAssertGreaterThan(try encoded("b") - onStageEncoded, 150, "on stage: B encodes again (10 ms frames)")
        // Per-stream receive statistics name B's stream.
        let stats = try ctl("c", ["--json", "stats"]).out
        let result = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any])?["result"] as? [String: Any])
        let streams = try XCTUnwrap(result["streams"] as? [[String: Any]], stats)
        let bStream = try XCTUnwrap(streams.first { ($0["participant"] as? Int) == id }, "C's stats name B's stream: \(stats)")
        XCTAssertGreaterThan(bStream["received"] as? Int ?? 0, 100, "B's packets counted per stream: \(bStream)")
        XCTAssertNotNil(bStream["delay_ms"] as? Double)
        XCTAssertGreaterThanOrEqual(bStream["target_ms"] as? Double ?? -1, 0, "the jitter buffer's target: \(bStream)")
        for counter in ["skipped", "stretched", "backlog"] { XCTAssertNotNil(bStream[counter] as? Int, "\(counter): \(bStream)") }
        XCTAssertNotNil(bStream["shed_ms"] as? Double, "\(bStream)")
        // 3. A turns B down by 20 dB on its own speaker only.
        let t4 = E2E.monotonicNanoseconds()
        XCTAssertEqual(try ctl("a", ["volume", "\(id)", "-20"]).status, 0)
        let t4a = E2E.monotonicNanoseconds()
        Thread.sleep(forTimeInterval: 1.5)
        let t4b = E2E.monotonicNanoseconds()
        // 4. B mutes itself: silent again.
        XCTAssertEqual(try ctl("b", ["mute"]).status, 0)
        XCTAssertEqual(try ctl("b", ["wait", "muted", "--timeout", "3"]).status, 0)
        let t5 = E2E.monotonicNanoseconds()
        let mutedEncoded = try encoded("b")
        Thread.sleep(forTimeInterval: 2)
        XCTAssertEqual(try encoded("b"), mutedEncoded, "muted: the encoder idles")
        let t6 = E2E.monotonicNanoseconds()
        // 5. The moderator kicks B: B is out and says why.
        XCTAssertEqual(try ctl("a", ["kick", "\(id)", "--reason", "test"]).status, 0)
        Thread.sleep(forTimeInterval: 0.5)
        let bStatus = try ctl("b", ["--json", "status"]).out
        XCTAssertTrue(bStatus.contains("\"connection\":\"disconnected\"") && bStatus.contains("kicked"), bStatus)
        let participants = try ctl("a", ["--json", "participants"]).out
        // By the list's ids, not by text: the answer's own request id is `"id":1,` too, and B
        // is participant 1 whenever it joins first.
        let listed = ((try JSONSerialization.jsonObject(with: Data(participants.utf8)) as? [String: Any])?["result"] as? [String: Any])?["participants"] as? [[String: Any]]
        XCTAssertNotNil(listed, participants)
        XCTAssertFalse((listed ?? []).contains { $0["id"] as? Int == id }, "B is gone from the room: \(participants)")
        _ = t2
        for p in processes.dropFirst() { p.waitUntilExit() }

        let aQuiet = try rms(dir, "a", from: t4a + 300_000_000, to: t4b)
        let cLoud = try rms(dir, "c", from: t4a + 300_000_000, to: t4b)
        print("moderation e2e: B at -20 dB on A's speaker: A \(aQuiet), C \(cLoud)")
        XCTAssertLessThan(aQuiet, cLoud * 0.3, "A's per-participant volume applies on A only")
        XCTAssertGreaterThan(aQuiet, cLoud * 0.03, "turned down, not off")
        for listener in ["a", "c"] {
            let before = try rms(dir, listener, from: t1 + 300_000_000, to: t2)
            let onStage = try rms(dir, listener, from: t3 + 300_000_000, to: t4)
            let muted = try rms(dir, listener, from: t5 + 300_000_000, to: t6)
            print("moderation e2e: \(listener) hears B: audience \(before), on stage \(onStage), muted \(muted)")
            XCTAssertLessThan(before, 0.002, "\(listener) must not hear B while B is audience")
            XCTAssertGreaterThan(onStage, 0.02, "\(listener) must hear B on stage")
            XCTAssertLessThan(muted, 0.002, "\(listener) must not hear B muted")
        }
    }

    /// The server restarts under the appliances: both come back by themselves and audio flows
    /// again; a token that expires removes its holder with the reason.
    func testServerRestartIsSurvivedAndTokenExpiryRemoves() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("restart")
        let (tcp, _, firstServer) = try startServer(server, dir: dir, replacing: ["[server]": "[server]\ntoken_leeway = 0"], log: "server1.log")
        func token(_ user: String, _ extra: [String]) throws -> String {
            try mintToken(server, config: dir + "/server.conf", room: "r", user: user, extra)
        }
        SimCard.writeWAV(dir + "/a-mic.wav", SimCard.speechLike(seconds: 3, seed: 0.2, level: 0.25))
        for name in ["a", "b", "c"] {
            _ = try E2E.writeRoom(dir, name, input: name == "a" ? dir + "/a-mic.wav" : nil, inputEnd: "loop")
        }
        let board = SimCard.repoRoot + "/board/sim"
        let args: [(String, String, [String])] = [("a", "streamer", ["--publish"]), ("b", "audience", []), ("c", "audience", ["--ttl", "4"])]
        for (name, role, grants) in args {
            try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token(name, grants),
                               "--role", role, "--duration", "16", "--stats-interval", "0", "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": dir + "/\(name).conf"], log: dir + "/\(name).log")
        }
        func ctl(_ who: String, _ a: [String]) throws -> (status: Int32, out: String) { try run(roomctl, ["--socket", dir + "/\(who).sock"] + a) }
        for who in ["a", "b", "c"] {
            waitForSocket(dir + "/\(who).sock")
            XCTAssertEqual(try ctl(who, ["wait", "joined", "--timeout", "5"]).status, 0, "\(who) joins")
        }

        // C's token expires after 4 s (token_leeway 0); it is removed with the reason and
        // cannot rejoin after the restart.
        Thread.sleep(forTimeInterval: 1.5)
        let before0 = E2E.monotonicNanoseconds()
        Thread.sleep(forTimeInterval: 1.5)
        let before1 = E2E.monotonicNanoseconds()
        firstServer.terminate()
        firstServer.waitUntilExit()
        XCTAssertEqual(firstServer.terminationStatus, 0)
        Thread.sleep(forTimeInterval: 1)
        try launch(server, ["--config", dir + "/server.conf"], log: dir + "/server2.log")
        XCTAssertEqual(try ctl("b", ["wait", "joined", "--timeout", "8"]).status, 0, "B rejoins by itself")
        XCTAssertEqual(try ctl("a", ["wait", "on-stage", "--timeout", "8"]).status, 0, "A is back on stage")
        Thread.sleep(forTimeInterval: 0.5)
        let after0 = E2E.monotonicNanoseconds()
        Thread.sleep(forTimeInterval: 2)
        let after1 = E2E.monotonicNanoseconds()
        let cStatus = try ctl("c", ["--json", "status"]).out
        // The speaker files are complete WAVs once the appliances have stopped.
        for p in processes where p.arguments?.contains("--board") == true { p.waitUntilExit() }
        let heardBefore = try rms(dir, "b", from: before0, to: before1)
        let heardAfter = try rms(dir, "b", from: after0, to: after1)
        print("restart e2e: B hears A before \(heardBefore), after the restart \(heardAfter)")
        XCTAssertGreaterThan(heardBefore, 0.02)
        XCTAssertGreaterThan(heardAfter, 0.02, "audio flows again after the server restart")
        XCTAssertTrue(cStatus.contains("\"connection\":\"disconnected\"") || cStatus.contains("failed"), "C's token expired: \(cStatus)")
        XCTAssertTrue(try String(contentsOfFile: dir + "/c.log", encoding: .utf8).contains("token"), "C's log says why")
        // The engine heard of every change of the sending state through an event, the lost
        // connection included (RoomLink's one-second check found none to correct).
        for who in ["a", "b"] {
            let log = try String(contentsOfFile: dir + "/\(who).log", encoding: .utf8)
            XCTAssertFalse(log.contains("without an event"), "\(who): \(log)")
        }
    }

    /// Open room: an audience member with the publish grant goes on stage at once when it raises
    /// its hand, and the others start receiving it without anyone approving.
    func testOpenRoomRaiseHandGoesOnStageAtOnce() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("open")
        let (tcp, _, _) = try startServer(server, dir: dir)
        SimCard.writeWAV(dir + "/b-mic.wav", SimCard.speechLike(seconds: 3, seed: 2.7, level: 0.25))
        try "input = \(dir)/b-mic.wav\ninput_end = loop\necho = off\n".write(toFile: dir + "/b.conf", atomically: true, encoding: .utf8)
        try "echo = off\n".write(toFile: dir + "/a.conf", atomically: true, encoding: .utf8)
        for (name, grants) in [("a", [String]()), ("b", ["--publish"])] {
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--server", "127.0.0.1:\(tcp)",
                               "--token", try mintToken(server, config: dir + "/server.conf", room: "open", user: name, grants),
                               "--role", "audience", "--duration", "8", "--stats-interval", "0", "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": dir + "/\(name).conf"], log: dir + "/\(name).log")
        }
        func ctl(_ who: String, _ a: [String]) throws -> (status: Int32, out: String) { try run(roomctl, ["--socket", dir + "/\(who).sock"] + a) }
        for who in ["a", "b"] {
            waitForSocket(dir + "/\(who).sock")
            XCTAssertEqual(try ctl(who, ["wait", "joined", "--timeout", "5"]).status, 0)
        }
        Thread.sleep(forTimeInterval: 1)
        func receivedByA() throws -> Int {
            let out = try ctl("a", ["--json", "stats"]).out
            let result = (try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])?["result"] as? [String: Any]
            return ((result?["streams"] as? [[String: Any]]) ?? []).reduce(0) { $0 + ($1["received"] as? Int ?? 0) }
        }
        XCTAssertEqual(try receivedByA(), 0, "an audience member sends nothing")
        XCTAssertEqual(try ctl("b", ["raise-hand"]).status, 0)
        XCTAssertEqual(try ctl("b", ["wait", "on-stage", "--timeout", "2"]).status, 0, "open room: on stage without approval")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertGreaterThan(try receivedByA(), 10, "A receives B once B is on stage (the VAD gate holds back pauses)")
    }

    /// The simulated panel: pressing the buttons through their FIFOs changes the room state, and
    /// the LEDs follow every change, also one made through roomctl.
    func testButtonsAndLEDsOnTheSimulatedPanel() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("panel")
        let gpio = dir + "/gpio"
        try FileManager.default.createDirectory(atPath: gpio, withIntermediateDirectories: true)
        let (tcp, _, _) = try startServer(server, dir: dir)
        try "echo = off\n".write(toFile: dir + "/room.conf", atomically: true, encoding: .utf8)
        try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--server", "127.0.0.1:\(tcp)",
                           "--token", try mintToken(server, config: dir + "/server.conf", room: "panel", user: "p", ["--publish"]),
                           "--role", "audience", "--duration", "8", "--stats-interval", "0", "--control-socket", dir + "/p.sock"],
                   env: ["ROOMSIM_CONFIG": dir + "/room.conf", "ROOMD_SIM_GPIO_DIR": gpio], log: dir + "/roomd.log")
        func ctl(_ a: [String]) throws -> Int32 { try run(roomctl, ["--socket", dir + "/p.sock"] + a).status }
        func leds() -> String { ((try? String(contentsOfFile: gpio + "/leds", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        func press(_ button: String) throws {
            for word in ["press", "release"] {
                let h = try XCTUnwrap(FileHandle(forWritingAtPath: gpio + "/" + button), "no FIFO for \(button) in \(gpio)")
                h.write(Data((word + "\n").utf8))
                try h.close()
                Thread.sleep(forTimeInterval: 0.15)
            }
        }
        waitForSocket(dir + "/p.sock")
        XCTAssertEqual(try ctl(["wait", "joined", "--timeout", "5"]), 0)
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertEqual(leds(), "mute=0 hand=0 stage=0")
        try press("mute")
        XCTAssertEqual(try ctl(["wait", "muted", "--timeout", "3"]), 0, "the mute button mutes")
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(leds(), "mute=1 hand=0 stage=0")
        XCTAssertEqual(try ctl(["unmute"]), 0)
        XCTAssertEqual(try ctl(["wait", "unmuted", "--timeout", "3"]), 0)
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(leds(), "mute=0 hand=0 stage=0", "the LED follows a mute change made through roomctl")
        try press("hand")
        XCTAssertEqual(try ctl(["wait", "on-stage", "--timeout", "3"]), 0, "open room: the hand button puts us on stage")
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(leds(), "mute=0 hand=0 stage=1")
    }
}
