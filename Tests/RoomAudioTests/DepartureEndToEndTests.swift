import Foundation
import XCTest

/// A publisher's roomd killed in the middle of a call, with a real roomserver and a listening
/// roomd (issue 10, items 8 and 10): killed and restarted within the server's reconnect grace,
/// the listener sees neither `participant_left` nor `participant_joined`; killed for good, it
/// sees `participant_left {reason: "timeout"}` only after the grace, and then the stream is
/// gone from its `roomctl stats` (and from the top-level `jitter_delay_ms`).
final class DepartureEndToEndTests: ProcessTestCase {
    func testKilledPublisherIsAnnouncedAfterTheGraceAndLeavesTheListenersStats() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("departure")
        // Long enough for a killed roomd to be started again and join on a loaded machine.
        let graceSeconds = 8.0
        let (tcp, _, _) = try startServer(server, dir: dir,
                                          replacing: ["reconnect_grace_ms = 20000": "reconnect_grace_ms = \(Int(graceSeconds * 1000))"])
        SimCard.writeWAV(dir + "/a-mic.wav", SimCard.speechLike(seconds: 3, seed: 0.4, level: 0.25))
        let board = SimCard.repoRoot + "/board/sim"
        let tokenA = try mintToken(server, config: dir + "/server.conf", room: "dep", user: "a", ["--publish"])
        let tokenB = try mintToken(server, config: dir + "/server.conf", room: "dep", user: "b")
        func startA(_ n: Int) throws -> Process {
            try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", tokenA, "--role", "streamer",
                               "--duration", "60", "--stats-interval", "0", "--config", "none", "--state-dir", "none",
                               "--control-socket", dir + "/a\(n).sock"],
                       env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "a\(n)", input: dir + "/a-mic.wav", inputEnd: "loop")],
                       log: dir + "/a\(n).log")
        }
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", tokenB, "--role", "audience",
                           "--duration", "60", "--stats-interval", "0", "--config", "none", "--state-dir", "none",
                           "--control-socket", dir + "/b.sock"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "b")], log: dir + "/b.log")
        var a = try startA(1)
        func ctl(_ socket: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try runSeparated(roomctl, ["--socket", dir + "/" + socket, "--json"] + args)
        }
        func stats() throws -> [String: Any] {
            let r = try ctl("b.sock", ["stats"])
            let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
            return try XCTUnwrap(object?["result"] as? [String: Any], r.stdout + r.stderr)
        }
        func streams() throws -> [[String: Any]] { try XCTUnwrap(try stats()["streams"] as? [[String: Any]]) }
        for socket in ["a1.sock", "b.sock"] {
            waitForSocket(dir + "/" + socket)
            XCTAssertEqual(try ctl(socket, ["wait", "joined", "--timeout", "10"]).status, 0, socket)
        }
        // B plays A's stream.
        var ssrc: Int?
        let deadline = Date().addingTimeInterval(10)
        while ssrc == nil && Date() < deadline {
            ssrc = try streams().first { ($0["received"] as? Int ?? 0) > 20 }?["ssrc"] as? Int
            if ssrc == nil { Thread.sleep(forTimeInterval: 0.2) }
        }
        let aSSRC = try XCTUnwrap(ssrc, "B never received A's stream; logs in \(dir)")

        // 1. Killed and back within the grace: B hears of nothing.
        let quiet = try launch(roomctl, ["--socket", dir + "/b.sock", "--json", "events", "--event", "participant_left",
                                         "--event", "participant_joined", "--count", "1", "--timeout", "\(graceSeconds + 4)"],
                               log: dir + "/events1.log")
        Thread.sleep(forTimeInterval: 0.5)   // subscribed
        kill(a.processIdentifier, SIGKILL)
        a.waitUntilExit()
        a = try startA(2)
        waitForSocket(dir + "/a2.sock")
        XCTAssertEqual(try ctl("a2.sock", ["wait", "joined", "--timeout", "10"]).status, 0)
        quiet.waitUntilExit()
        let heard = try String(contentsOfFile: dir + "/events1.log", encoding: .utf8)
        XCTAssertEqual(quiet.terminationStatus, 3, "B saw \(heard) for a restart within the grace; logs in \(dir)")
        let aStatus = try ctl("a2.sock", ["status"]).stdout
        XCTAssertTrue(aStatus.contains("\"role\":\"streamer\"") || aStatus.contains("\"role\": \"streamer\""),
                      "A has its seat on stage back: \(aStatus)")

        // 2. Killed for good: announced after the grace, reason timeout, and the stream goes.
        let left = try launch(roomctl, ["--socket", dir + "/b.sock", "--json", "events", "--event", "participant_left",
                                        "--count", "1", "--timeout", "\(graceSeconds + 15)"],
                              log: dir + "/events2.log")
        Thread.sleep(forTimeInterval: 0.5)
        let killed = Date()
        kill(a.processIdentifier, SIGKILL)
        a.waitUntilExit()
        left.waitUntilExit()
        let waited = Date().timeIntervalSince(killed)
        let event = try String(contentsOfFile: dir + "/events2.log", encoding: .utf8)
        XCTAssertEqual(left.terminationStatus, 0, "no participant_left: \(event); logs in \(dir)")
        XCTAssertTrue(event.contains("timeout"), event)
        // A lower bound only (the server cannot announce before its grace; a loaded machine
        // may make it later): the old server announced at once.
        XCTAssertGreaterThan(waited, graceSeconds / 2, "announced \(waited) s after the kill, grace \(graceSeconds) s")

        var listed = try streams().compactMap { $0["ssrc"] as? Int }
        let gone = Date().addingTimeInterval(5)
        while listed.contains(aSSRC) && Date() < gone {
            Thread.sleep(forTimeInterval: 0.2)
            listed = try streams().compactMap { $0["ssrc"] as? Int }
        }
        XCTAssertFalse(listed.contains(aSSRC), "the departed publisher's stream is still in B's stats: \(listed)")
        XCTAssertEqual(try stats()["jitter_delay_ms"] as? Int, 0, "no stream plays: nothing buffered")
    }
}
