import Foundation
import XCTest

/// Two real roomd processes in one Janus AudioBridge room (`room.backend = janus`, issue 12),
/// with Janus from Debian run by `scripts/janus-dev`: the talker's voice reaches the listener
/// through Janus's mixer over ICE + DTLS-SRTP; mute, stepping down and the raised hand are seen
/// by the other side (as Janus reports them to every participant, browsers included); a Janus
/// restart is survived by both appliances; leaving is seen. Skipped when janus is not installed
/// (scripts/setup installs it for the suite).
final class JanusRoomProcessTests: ProcessTestCase {
    private var roomctl = ""

    private func json(_ socket: String, _ command: [String]) -> [String: Any] {
        guard let r = try? runSeparated(roomctl, ["--socket", socket, "--json"] + command) else { return [:] }
        let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any]
        return (object?["result"] as? [String: Any]) ?? object ?? [:]
    }

    private func status(_ socket: String) -> [String: Any] { json(socket, ["status"]) }

    private func participants(_ socket: String) -> [[String: Any]] {
        json(socket, ["participants"])["participants"] as? [[String: Any]] ?? []
    }

    /// Polls `condition` every 100 ms for up to `seconds`.
    @discardableResult
    private func eventually(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return condition()
    }

    private func inRoomWithMedia(_ socket: String) -> Bool {
        let s = status(socket)
        return s["connection"] as? String == "connected" && s["media_path"] as? Bool == true
    }

    private var fixtures: [JanusFixture] = []

    override func tearDown() {
        for f in fixtures { f.remove() }
        fixtures = []
        super.tearDown()
    }

    /// A Janus of this test's own (scripts/janus-dev through `JanusFixture`), started.
    private func startJanus(_ dir: String) throws -> JanusFixture {
        let janus = try JanusFixture(directory: dir)
        fixtures.append(janus)
        try janus.start()
        return janus
    }

    func testTwoAppliancesTalkThroughJanusAndSurviveItsRestart() throws {
        let roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("janus-room")
        let janus = try startJanus(dir + "/janus")
        let port = janus.port

        // A talks without pause (speech-like sound, looped); B listens and records its speaker.
        SimCard.writeWAV(dir + "/a-mic.wav", SimCard.speechLike(seconds: 4, seed: 0.4, level: 0.25))
        let talker = try E2E.writeRoom(dir, "a", input: dir + "/a-mic.wav", inputEnd: "loop", extra: ["echo_gain_db = -10", "noise_dbfs = -70"])
        let listener = try E2E.writeRoom(dir, "b", extra: ["echo_gain_db = -10", "noise_dbfs = -70"])
        func appliance(_ name: String, _ room: String, _ extra: [String]) throws {
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--backend", "janus", "--janus-room", "1234",
                               "--server", "127.0.0.1:\(port)", "--plaintext-signalling", "--duration", "60",
                               "--stats-interval", "0", "--config", "none", "--state-dir", "none",
                               "--control-socket", dir + "/\(name).sock"] + extra,
                       env: ["ROOMSIM_CONFIG": room], log: dir + "/\(name).log")
        }
        try appliance("b", listener, ["--role", "audience", "--display-name", "Listener B"])
        try appliance("a", talker, ["--role", "streamer", "--display-name", "Room 4.12"])
        let a = dir + "/a.sock", b = dir + "/b.sock"
        waitForSocket(a)
        waitForSocket(b)
        func log(_ name: String) -> String { ((try? String(contentsOfFile: dir + "/\(name).log", encoding: .utf8)) ?? "").suffix(1500).description }

        XCTAssertTrue(eventually(10) { inRoomWithMedia(a) && inRoomWithMedia(b) }, "A: \(status(a))\nB: \(status(b))\n\(log("a"))\n\(log("b"))")
        XCTAssertEqual(status(a)["backend"] as? String, "janus")
        XCTAssertEqual(status(a)["room"] as? String, "janus:1234")
        XCTAssertEqual(status(b)["stage"] as? String, "off", "an audience appliance joins muted, off stage")

        // B hears A through Janus's mix.
        XCTAssertTrue(eventually(5) { (status(b)["speaker_dbfs"] as? Double ?? -100) > -45 }, "B's speaker: \(status(b))")
        func seenByB() -> [String: Any]? { participants(b).first { $0["name"] as? String == "Room 4.12" } }
        XCTAssertEqual(seenByB()?["muted"] as? Bool, false, "\(participants(b))")

        // A's mute button: Janus mutes A for the room; B sees it and hears nothing.
        _ = json(a, ["mute"])
        XCTAssertTrue(eventually(3) { seenByB()?["muted"] as? Bool == true }, "\(participants(b))")
        XCTAssertTrue(eventually(3) { (status(b)["speaker_dbfs"] as? Double ?? 0) < -60 }, "B still hears A: \(status(b))")
        _ = json(a, ["unmute"])
        XCTAssertTrue(eventually(3) { seenByB()?["muted"] as? Bool == false }, "\(participants(b))")
        XCTAssertTrue(eventually(3) { (status(b)["speaker_dbfs"] as? Double ?? -100) > -45 }, "\(status(b))")

        // Janus restarts on the same port: both appliances join again by themselves, and B
        // hears A again.
        janus.stop()
        XCTAssertTrue(eventually(5) { status(a)["connection"] as? String != "connected" }, "A did not notice Janus going away: \(status(a))")
        try janus.start()
        XCTAssertTrue(eventually(15) { inRoomWithMedia(a) && inRoomWithMedia(b) }, "after the restart:\nA: \(status(a))\nB: \(status(b))\n\(log("a"))")
        XCTAssertTrue(eventually(3) { seenByB() != nil }, "B sees A again: \(participants(b))")
        XCTAssertTrue(eventually(5) { (status(b)["speaker_dbfs"] as? Double ?? -100) > -45 }, "B hears A after the restart: \(status(b))")

        // Off the stage and a raised hand: Janus mutes A and shows the hand in its name (an
        // AudioBridge has no hand; docs/janus.md).
        _ = json(a, ["step_down"])
        XCTAssertTrue(eventually(3) { seenByB()?["muted"] as? Bool == true }, "\(participants(b))")
        _ = json(a, ["raise_hand"])
        XCTAssertEqual(status(a)["stage"] as? String, "hand_raised")
        // roomd reads the name back as a raised hand (browsers see the text).
        XCTAssertTrue(eventually(3) { seenByB()?["stage"] as? String == "hand_raised" }, "\(participants(b))")
        XCTAssertEqual(seenByB()?["name"] as? String, "Room 4.12")
        _ = json(a, ["lower_hand"])
        XCTAssertTrue(eventually(3) { seenByB().map { $0["stage"] as? String != "hand_raised" } ?? false }, "\(participants(b))")

        // A leaves: B sees it go.
        _ = json(a, ["leave"])
        XCTAssertTrue(eventually(3) { seenByB() == nil }, "\(participants(b))")
        XCTAssertEqual(status(a)["connection"] as? String, "disconnected")
        XCTAssertTrue(inRoomWithMedia(b), "B stays: \(status(b))")
    }

    /// Scale-out (docs/scaling.md): two Janus instances, a room on each, two appliances in each
    /// room. Each listener hears its own room's talker, through its own Janus, and nobody from
    /// the other room; each instance carries only its own room's participants.
    func testTwoJanusInstancesCarryTheirOwnRooms() throws {
        let roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("janus-two")
        let port1 = try startJanus(dir + "/j1").port
        let port2 = try startJanus(dir + "/j2").port
        XCTAssertNotEqual(port1, port2)
        // Both talkers say the same sound: the rooms are told apart by who is in them and by
        // muting one talker.
        SimCard.writeWAV(dir + "/speech.wav", SimCard.speechLike(seconds: 4, seed: 0.7, level: 0.25))
        let placements = [("a1", port1, 1234, "streamer", dir + "/speech.wav"), ("b1", port1, 1234, "audience", nil),
                          ("a2", port2, 5678, "streamer", dir + "/speech.wav"), ("b2", port2, 5678, "audience", nil)]
        for (name, port, room, role, input) in placements {
            let conf = try E2E.writeRoom(dir, name, input: input, inputEnd: "loop", extra: ["echo_gain_db = -30", "noise_dbfs = -70"])
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--backend", "janus", "--janus-room", "\(room)",
                               "--server", "127.0.0.1:\(port)", "--plaintext-signalling", "--duration", "40",
                               "--stats-interval", "0", "--config", "none", "--state-dir", "none", "--role", role,
                               "--display-name", "appliance-\(name)", "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": conf], log: dir + "/\(name).log")
        }
        for (name, _, _, _, _) in placements { waitForSocket(dir + "/\(name).sock") }
        let socks = placements.map { dir + "/\($0.0).sock" }
        XCTAssertTrue(eventually(15) { socks.allSatisfy(inRoomWithMedia) }, socks.map { "\($0): \(status($0))" }.joined(separator: "\n"))
        for (sock, room) in [(socks[1], 1234), (socks[3], 5678)] {
            XCTAssertEqual(status(sock)["room"] as? String, "janus:\(room)")
            XCTAssertTrue(eventually(5) { (status(sock)["speaker_dbfs"] as? Double ?? -100) > -45 }, "\(sock) hears its talker: \(status(sock))")
        }
        // Each room has exactly its two appliances: nobody crossed instances.
        let names1 = Set(participants(socks[1]).compactMap { $0["name"] as? String })
        let names2 = Set(participants(socks[3]).compactMap { $0["name"] as? String })
        XCTAssertEqual(names1, ["appliance-a1", "appliance-b1"])
        XCTAssertEqual(names2, ["appliance-a2", "appliance-b2"])
        // Silencing room 1's talker silences room 1's listener only.
        _ = json(socks[0], ["mute"])
        XCTAssertTrue(eventually(3) { (status(socks[1])["speaker_dbfs"] as? Double ?? 0) < -60 }, "\(status(socks[1]))")
        XCTAssertGreaterThan(status(socks[3])["speaker_dbfs"] as? Double ?? -100, -45, "room 2 still hears its talker")
    }

    /// Moderation with the room's secret (`room.janus_secret`): an audience appliance raises its
    /// hand, the moderator appliance sees the request and approves it (AudioBridge `unmute`),
    /// the raised appliance is then on stage and unmuted; demoting (AudioBridge `mute`) is a
    /// moderator mute on the other side. Without the secret, approving is refused locally.
    func testAModeratorApprovesARaisedHandAndMutesIt() throws {
        let roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("janus-moderation")
        let port = try startJanus(dir + "/janus").port
        func appliance(_ name: String, role: String, secret: String?) throws {
            var conf = "[room]\nbackend = janus\nserver = 127.0.0.1:\(port)\njanus_room = 1234\nplaintext_signalling = yes\n"
            conf += "role = \(role)\ndisplay_name = appliance-\(name)\n"
            if let secret { conf += "janus_secret = \(secret)\n" }
            try conf.write(toFile: dir + "/\(name)-roomd.conf", atomically: true, encoding: .utf8)
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--config", dir + "/\(name)-roomd.conf", "--duration", "40",
                               "--stats-interval", "0", "--state-dir", "none", "--control-socket", dir + "/\(name).sock"],
                       env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, name)], log: dir + "/\(name).log")
        }
        try appliance("m", role: "streamer", secret: "roomd-dev-secret")
        try appliance("b", role: "audience", secret: nil)
        let m = dir + "/m.sock", b = dir + "/b.sock"
        waitForSocket(m)
        waitForSocket(b)
        XCTAssertTrue(eventually(10) { inRoomWithMedia(m) && inRoomWithMedia(b) }, "M: \(status(m))\nB: \(status(b))")
        func bAsSeenByM() -> [String: Any]? { participants(m).first { $0["name"] as? String == "appliance-b" } }
        XCTAssertTrue(eventually(3) { bAsSeenByM() != nil }, "\(participants(m))")
        let bID = try XCTUnwrap(bAsSeenByM()?["id"] as? Int)
        XCTAssertEqual(participants(m).first { $0["name"] as? String == "appliance-m" }?["moderator"] as? Bool, true)

        // Without the secret B cannot approve anyone.
        let refused = try runSeparated(roomctl, ["--socket", b, "approve", "1"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue((refused.stdout + refused.stderr).contains("room.janus_secret"), refused.stdout + refused.stderr)

        // B muted itself before raising its hand: the approval puts it on stage, and its own
        // mute stays (privacy wins over a moderator's unmute) until B unmutes.
        _ = json(b, ["mute"])
        _ = json(b, ["raise_hand"])
        XCTAssertTrue(eventually(3) { bAsSeenByM()?["stage"] as? String == "hand_raised" }, "\(participants(m))")
        let approve = try runSeparated(roomctl, ["--socket", m, "approve", "\(bID)"])
        XCTAssertEqual(approve.status, 0, approve.stdout + approve.stderr)
        XCTAssertTrue(eventually(3) { status(b)["stage"] as? String == "on_stage" }, "\(status(b))")
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(status(b)["muted"] as? Bool, true, "B's own mute survives the approval: \(status(b))")
        XCTAssertTrue(eventually(3) { bAsSeenByM()?["muted"] as? Bool == true }, "and Janus shows B muted again: \(participants(m))")
        _ = json(b, ["unmute"])
        XCTAssertTrue(eventually(3) { status(b)["muted"] as? Bool == false }, "\(status(b))")
        XCTAssertTrue(eventually(3) { bAsSeenByM()?["stage"] as? String == "on_stage" && bAsSeenByM()?["muted"] as? Bool == false },
                      "M sees B on stage, its hand gone from its name: \(participants(m))")

        let demote = try runSeparated(roomctl, ["--socket", m, "demote", "\(bID)"])
        XCTAssertEqual(demote.status, 0, demote.stdout + demote.stderr)
        XCTAssertTrue(eventually(3) { status(b)["muted"] as? Bool == true && status(b)["self_muted"] as? Bool == false },
                      "a moderator's mute, not B's own: \(status(b))")
        XCTAssertTrue(eventually(3) { bAsSeenByM()?["muted"] as? Bool == true }, "\(participants(m))")

        // Kicked: B leaves the room and stays out (no rejoin), as with roomserver's kick.
        let kick = try runSeparated(roomctl, ["--socket", m, "kick", "\(bID)"])
        XCTAssertEqual(kick.status, 0, kick.stdout + kick.stderr)
        XCTAssertTrue(eventually(3) { status(b)["connection"] as? String == "disconnected" }, "\(status(b))")
        XCTAssertTrue(eventually(3) { bAsSeenByM() == nil }, "\(participants(m))")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertEqual(status(b)["connection"] as? String, "disconnected", "a kicked appliance does not join again by itself")
    }

    /// A reload that moves the appliance to another Janus room (room.janus_room changed in the
    /// file): it leaves the first room properly and joins the second; a bad value is refused
    /// with its line and changes nothing.
    func testAReloadMovesTheApplianceToAnotherRoom() throws {
        let roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("janus-reload")
        let port = try startJanus(dir + "/janus").port
        func write(room: String) throws {
            try "[room]\nbackend = janus\nserver = 127.0.0.1:\(port)\njanus_room = \(room)\nplaintext_signalling = yes\nrole = audience\n"
                .write(toFile: dir + "/roomd.conf", atomically: true, encoding: .utf8)
        }
        try write(room: "1234")
        try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--config", dir + "/roomd.conf", "--duration", "30",
                           "--stats-interval", "0", "--state-dir", "none", "--control-socket", dir + "/a.sock"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "a")], log: dir + "/a.log")
        let a = dir + "/a.sock"
        waitForSocket(a)
        XCTAssertTrue(eventually(10) { inRoomWithMedia(a) && status(a)["room"] as? String == "janus:1234" }, "\(status(a))")

        try write(room: "twelve")
        let bad = try runSeparated(roomctl, ["--socket", a, "reload"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue((bad.stdout + bad.stderr).contains("roomd.conf:4: room.janus_room"), bad.stdout + bad.stderr)
        XCTAssertEqual(status(a)["room"] as? String, "janus:1234", "nothing changed")

        try write(room: "5678")
        let good = try runSeparated(roomctl, ["--socket", a, "reload"])
        XCTAssertEqual(good.status, 0, good.stdout + good.stderr)
        XCTAssertTrue(eventually(10) { inRoomWithMedia(a) && status(a)["room"] as? String == "janus:5678" }, "\(status(a))")

        // Two reloads in a row, the second while the first is still leaving: the newest wins.
        try write(room: "1234")
        XCTAssertEqual(try runSeparated(roomctl, ["--socket", a, "reload"]).status, 0)
        try write(room: "5678")
        XCTAssertEqual(try runSeparated(roomctl, ["--socket", a, "reload"]).status, 0)
        XCTAssertTrue(eventually(10) { inRoomWithMedia(a) && status(a)["room"] as? String == "janus:5678" }, "\(status(a))")
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertEqual(status(a)["room"] as? String, "janus:5678", "and stays: \(status(a))")
    }
}
