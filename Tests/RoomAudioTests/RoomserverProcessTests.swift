import Foundation
import XCTest

/// roomserver as a process: SIGHUP reads the configuration again instead of ending the
/// process (its default action, which dropped every call without closing the rooms).
final class RoomserverProcessTests: ProcessTestCase {
    func testSIGHUPReloadsAndABadFileChangesNothing() throws {
        let server = try executable("roomserver"), roomd = try executable("roomd"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("hup")
        let (tcp, _, process) = try startServer(server, dir: dir)
        let token = try mintToken(server, config: dir + "/server.conf", room: "hup", user: "a")
        try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--server", "127.0.0.1:\(tcp)", "--token", token,
                           "--role", "audience", "--duration", "30", "--stats-interval", "0", "--config", "none",
                           "--state-dir", "none", "--control-socket", dir + "/a.sock"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "a")], log: dir + "/a.log")
        waitForSocket(dir + "/a.sock")
        XCTAssertEqual(try run(roomctl, ["--socket", dir + "/a.sock", "wait", "joined", "--timeout", "10"]).status, 0)
        func log() -> String { (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? "" }
        func waitForLog(_ text: String) -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while !log().contains(text) && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
            return log().contains(text)
        }

        // A good edit: applied, the process and the call go on.
        let conf = dir + "/server.conf"
        let good = try String(contentsOfFile: conf, encoding: .utf8).replacingOccurrences(of: "speaker_limit = 6", with: "speaker_limit = 4")
        try good.write(toFile: conf, atomically: true, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        XCTAssertTrue(waitForLog("reloaded: applied rooms.speaker_limit"), log())
        XCTAssertTrue(process.isRunning, "SIGHUP must not end roomserver; log: \(log())")

        // A bad edit: refused naming file, line and key; nothing changes.
        try good.replacingOccurrences(of: "top_n = 3", with: "top_n = lots").write(toFile: conf, atomically: true, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        XCTAssertTrue(waitForLog("configuration not reloaded, nothing changed"), log())
        XCTAssertTrue(log().contains("server.conf:"), log())
        XCTAssertTrue(log().contains("rooms.top_n"), log())
        XCTAssertTrue(process.isRunning)
        Thread.sleep(forTimeInterval: 0.3)
        let status = try run(roomctl, ["--socket", dir + "/a.sock", "--json", "status"])
        XCTAssertTrue(status.out.contains("\"joined\":true"), "the call went on: \(status.out)")
        XCTAssertTrue(status.out.contains("\"app\":\"roomd-dev\""), "status names the room's application: \(status.out)")
        XCTAssertFalse(log().contains("participant_left") || log().contains("closing rooms"), log())
    }

    /// Issue 27: the token-signing keys sat in ordinary heap memory (swappable, freed without
    /// being wiped). Now they are locked: the running server has locked memory, a page per key.
    func testTheSigningKeysAreLockedInMemory() throws {
        let server = try executable("roomserver")
        let dir = SimCard.scratch("locked-keys")
        let (_, _, process) = try startServer(server, dir: dir)
        defer { process.terminate(); process.waitUntilExit() }
        let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmLck:") }, status)
        let kB = try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        XCTAssertGreaterThanOrEqual(kB, 4, String(line))
    }
}
