import Foundation
import Glibc
import XCTest

/// Placement in the token end to end (docs/scaling.md, "Placement in the token"; issue 30):
/// two roomserver instances and two Janus instances, appliances configured with nothing but a
/// token file and the service's public key, placed by `roomserver mint-token` from its
/// `[placement]` table. A tampered token is refused while the appliance stays (and keeps its
/// audio); an instance is killed and the room moved by new tokens, with the time until the
/// listener hears the talker again measured. One test method, every instance shared, to keep
/// the suite's time small.
final class TokenPlacementProcessTests: ProcessTestCase {
    private var roomctl = ""
    private var janus: [JanusFixture] = []

    override func tearDown() {
        for j in janus { j.remove() }
        janus = []
        super.tearDown()
    }

    private func controlStatus(_ socket: String) -> [String: Any] {
        guard let r = try? runSeparated(roomctl, ["--socket", socket, "--json", "status"]),
              let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any] else { return [:] }
        return object["result"] as? [String: Any] ?? [:]
    }

    /// Polls every 50 ms: the move's timing is read from it.
    private func within(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return condition()
    }

    private func placedServer(_ socket: String) -> String? {
        (controlStatus(socket)["placement"] as? [String: Any])?["server"] as? String
    }

    private func connectedWithMedia(_ socket: String) -> Bool {
        let s = controlStatus(socket)
        return s["connection"] as? String == "connected" && s["media_path"] as? Bool == true
    }

    private func speaker(_ socket: String) -> Double { controlStatus(socket)["speaker_dbfs"] as? Double ?? -120 }

    func testTokensPlaceAppliancesAndMoveARoomWhenAnInstanceDies() throws {
        let server = try executable("roomserver"), roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("placement")
        let started = Date()

        // The service's Ed25519 key, made the way docs/security.md tells an installer to.
        let openssl = "/usr/bin/openssl"
        guard FileManager.default.isExecutableFile(atPath: openssl) else { throw XCTSkip("openssl is not installed") }
        XCTAssertEqual(try run(openssl, ["genpkey", "-algorithm", "ed25519", "-out", dir + "/service.key"]).status, 0)
        XCTAssertEqual(try run(openssl, ["pkey", "-in", dir + "/service.key", "-pubout", "-out", dir + "/service.pub"]).status, 0)

        // Two roomserver instances that accept the service's EdDSA tokens, two Janus instances
        // (both with AudioBridge rooms 1234 and 5678).
        let publicKeys = ["# [public_keys]\n# svc = roomd-dev:service.pub": "[public_keys]\nsvc = roomd-dev:\(dir)/service.pub"]
        for name in ["rs1", "rs2"] { try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true) }
        let rs1 = try startServer(server, dir: dir + "/rs1", replacing: publicKeys)
        let rs2 = try startServer(server, dir: dir + "/rs2", replacing: publicKeys)
        janus = try ["j1", "j2"].map { try JanusFixture(directory: dir + "/" + $0) }
        for j in janus { try j.start() }
        let j1 = janus[0].port, j2 = janus[1].port

        // The room service: roomserver's configuration plus the placement table mint-token reads.
        let serviceBase = try String(contentsOfFile: dir + "/rs1/server.conf", encoding: .utf8)
        func place(standup: Int, audioBridge: (room: Int, port: Int)) throws {
            try (serviceBase + "\n[placement]\nstandup = roomserver 127.0.0.1:\(standup)\n\(audioBridge.room) = janus 127.0.0.1:\(audioBridge.port)\n")
                .write(toFile: dir + "/service.conf", atomically: true, encoding: .utf8)
        }
        func mint(_ room: String, _ user: String, into file: String) throws {
            let r = try runSeparated(server, ["mint-token", "--config", dir + "/service.conf", "--key", "svc", "--signing-key", dir + "/service.key",
                                              "--room", room, "--user", user, "--publish"])
            XCTAssertEqual(r.status, 0, r.stderr)
            try r.stdout.write(toFile: file, atomically: true, encoding: .utf8)
        }
        try place(standup: rs1.tcp, audioBridge: (1234, j1))
        try mint("standup", "talker", into: dir + "/t.token")
        try mint("standup", "listener", into: dir + "/l.good-token")
        try mint("1234", "janus-board", into: dir + "/j.token")
        /// `file`'s token with its server claim changed to roomserver 2 and its signature kept.
        func tamper(_ file: String) throws -> String {
            let good = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let parts = good.split(separator: ".").map(String.init)
            let payload = String(decoding: try XCTUnwrap(Data(base64URL: parts[1])), as: UTF8.self)
            let forged = payload.replacingOccurrences(of: "127.0.0.1:\(rs1.tcp)", with: "127.0.0.1:\(rs2.tcp)")
            XCTAssertNotEqual(forged, payload)
            return [parts[0], Data(forged.utf8).base64URL, parts[2]].joined(separator: ".")
        }
        // L starts with a tampered token: it must come up without a room and say why.
        try tamper(dir + "/l.good-token").write(toFile: dir + "/l.token", atomically: true, encoding: .utf8)
        // Without --signing-key a placed room's token is refused: it could not be checked.
        let unsigned = try runSeparated(server, ["mint-token", "--config", dir + "/service.conf", "--key", "dev", "--room", "standup", "--user", "x"])
        XCTAssertEqual(unsigned.status, 2)
        XCTAssertTrue(unsigned.stderr.contains("sign them with --signing-key"), unsigned.stderr)

        // The appliances know no server: a token file and the service's public key. T talks
        // (speech-like sound, looped), L listens; J is in a Janus room.
        SimCard.writeWAV(dir + "/speech.wav", SimCard.speechLike(seconds: 4, seed: 0.3, level: 0.25))
        let appliances: [(name: String, room: String, conf: String)] = [
            ("t", try E2E.writeRoom(dir, "t", input: dir + "/speech.wav", inputEnd: "loop", extra: ["echo_gain_db = -30", "noise_dbfs = -70"]),
             "[room]\ntoken_file = t.token\nplacement_key = service.pub\nrole = streamer\n"),
            ("l", try E2E.writeRoom(dir, "l", extra: ["echo_gain_db = -30", "noise_dbfs = -70"]),
             "[room]\ntoken_file = l.token\nplacement_key = service.pub\nrole = audience\n"),
            ("j", try E2E.writeRoom(dir, "j", extra: ["echo_gain_db = -30", "noise_dbfs = -70"]),
             "[room]\ntoken_file = j.token\nplacement_key = service.pub\nrole = audience\nplaintext_signalling = yes\n[audio]\nopus_frame_ms = 20\n"),
        ]
        for a in appliances {
            try a.conf.write(toFile: dir + "/\(a.name)-roomd.conf", atomically: true, encoding: .utf8)
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--config", dir + "/\(a.name)-roomd.conf", "--duration", "60",
                               "--stats-interval", "0", "--state-dir", "none", "--control-socket", dir + "/\(a.name).sock"],
                       env: ["ROOMSIM_CONFIG": a.room], log: dir + "/\(a.name).log")
        }
        let t = dir + "/t.sock", l = dir + "/l.sock", j = dir + "/j.sock"
        for s in [t, l, j] { waitForSocket(s) }
        // Subscribed long before the tampered token arrives: the refusal is an event too.
        let refusedEvent = try launch(roomctl, ["--socket", t, "--json", "events", "--event", "room_refused", "--count", "1", "--timeout", "40"],
                                      log: dir + "/t-events.log")
        func log(_ name: String) -> String { ((try? String(contentsOfFile: dir + "/\(name).log", encoding: .utf8)) ?? "").suffix(1500).description }

        // L, started with the tampered token, runs without a room and shows the refusal; its
        // good token and a reload join it.
        XCTAssertTrue(within(10) { (controlStatus(l)["room_refused"] as? String ?? "").contains("placement signature does not verify") },
                      "L: \(controlStatus(l))\n\(log("l"))")
        XCTAssertEqual(controlStatus(l)["connection"] as? String, "idle")
        XCTAssertNil(controlStatus(l)["placement"])
        try FileManager.default.removeItem(atPath: dir + "/l.token")
        try FileManager.default.copyItem(atPath: dir + "/l.good-token", toPath: dir + "/l.token")
        let joined = try runSeparated(roomctl, ["--socket", l, "reload"])
        XCTAssertEqual(joined.status, 0, joined.stdout + joined.stderr)

        // Placed by their tokens: T and L on roomserver 1, J on Janus 1's room 1234.
        XCTAssertTrue(within(15) { [t, l, j].allSatisfy(connectedWithMedia) },
                      "T: \(controlStatus(t))\nL: \(controlStatus(l))\nJ: \(controlStatus(j))\n\(log("t"))\n\(log("j"))")
        XCTAssertEqual(placedServer(t), "127.0.0.1:\(rs1.tcp)")
        XCTAssertEqual(placedServer(l), "127.0.0.1:\(rs1.tcp)")
        XCTAssertEqual(controlStatus(l)["room"] as? String, "standup")
        XCTAssertEqual(placedServer(j), "127.0.0.1:\(j1)")
        XCTAssertEqual(controlStatus(j)["room"] as? String, "janus:1234")
        XCTAssertEqual(controlStatus(j)["backend"] as? String, "janus")
        XCTAssertTrue(within(5) { speaker(l) > -45 }, "L hears T through roomserver 1: \(controlStatus(l))")

        // A tampered token: the server claim changed to roomserver 2, the signature kept. The
        // reload is refused with the reason, and T stays where it was, still heard by L.
        try tamper(dir + "/t.token").write(toFile: dir + "/t.token", atomically: true, encoding: .utf8)
        let refused = try runSeparated(roomctl, ["--socket", t, "reload"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue((refused.stdout + refused.stderr).contains("token: placement signature does not verify"), refused.stdout + refused.stderr)
        let afterRefusal = controlStatus(t)
        XCTAssertTrue((afterRefusal["room_refused"] as? String ?? "").contains("placement signature does not verify"), "\(afterRefusal)")
        XCTAssertEqual(placedServer(t), "127.0.0.1:\(rs1.tcp)", "T stays put")
        XCTAssertTrue(connectedWithMedia(t), "\(controlStatus(t))")
        XCTAssertTrue(log("t").contains("placement signature does not verify"), log("t"))
        XCTAssertGreaterThan(speaker(l), -45, "L still hears T")
        XCTAssertTrue(within(3) { !refusedEvent.isRunning }, "no room_refused event")
        let event = (try? String(contentsOfFile: dir + "/t-events.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(event.contains("room_refused") && event.contains("placement signature does not verify"), event)

        // Roomserver 1 dies. The service places the room on roomserver 2 and issues new tokens;
        // each appliance reloads (its token file rewritten, as a token refresh does) and moves.
        kill(rs1.process.processIdentifier, SIGKILL)
        XCTAssertTrue(within(8) { speaker(l) < -60 && controlStatus(t)["connection"] as? String != "connected" },
                      "the room went silent with its instance: \(controlStatus(l))")
        try place(standup: rs2.tcp, audioBridge: (5678, j2))
        try mint("standup", "talker", into: dir + "/t.token")
        try mint("standup", "listener", into: dir + "/l.token")
        let moveStart = Date()
        for s in [t, l] {
            let r = try runSeparated(roomctl, ["--socket", s, "reload"])
            XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        }
        XCTAssertTrue(within(10) { speaker(l) > -45 }, "L hears T again through roomserver 2: \(controlStatus(l))\n\(log("l"))")
        let audioBack = Date().timeIntervalSince(moveStart)
        XCTAssertEqual(placedServer(t), "127.0.0.1:\(rs2.tcp)")
        XCTAssertEqual(placedServer(l), "127.0.0.1:\(rs2.tcp)")
        XCTAssertNil(controlStatus(t)["room_refused"], "a good token clears the refusal")
        XCTAssertLessThan(audioBack, 5, "audio back within 5 s of the new tokens")

        // Janus 1 dies too: J's room moves to Janus 2's room 5678 by a new token.
        janus[0].stop(crash: true)
        XCTAssertTrue(within(8) { controlStatus(j)["connection"] as? String != "connected" }, "\(controlStatus(j))")
        try mint("5678", "janus-board", into: dir + "/j.token")
        let janusMoveStart = Date()
        let r = try runSeparated(roomctl, ["--socket", j, "reload"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(within(10) { connectedWithMedia(j) && controlStatus(j)["room"] as? String == "janus:5678" },
                      "J in Janus 2's room 5678: \(controlStatus(j))\n\(log("j"))")
        let janusBack = Date().timeIntervalSince(janusMoveStart)
        XCTAssertEqual(placedServer(j), "127.0.0.1:\(j2)")

        print("placement: roomserver move, audio back after \(Int(audioBack * 1000)) ms; Janus move, media path up after \(Int(janusBack * 1000)) ms; test \(Int(Date().timeIntervalSince(started) * 1000)) ms")
    }
}

private extension Data {
    init?(base64URL text: String) {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        self.init(base64Encoded: s)
    }

    var base64URL: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
