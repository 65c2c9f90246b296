import Foundation
import XCTest

/// A display name is whatever the token issuer put in it. Through real roomserver and roomd
/// processes, a name built to forge a log line (`\n<0>…`, which journald reads as a new line at
/// emergency priority) and to drive the operator's terminal (ANSI escapes) must reach the logs
/// as visible text (issue 11, "Untrusted text is inert").
final class UntrustedTextEndToEndTests: ProcessTestCase {
    func testANameCannotForgeALogLineOrReachTheTerminalRaw() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver")
        let dir = SimCard.scratch("untrusted")
        let (tcp, _, _) = try startServer(server, dir: dir)
        let evil = "Eve\n<0>roomserver: disk on fire\u{1B}[2J\u{1B}[31m"
        let mint = try run(server, ["mint-token", "--config", dir + "/server.conf", "--key", "dev", "--room", "r",
                                    "--user", "eve\n<0>x", "--name", evil])
        XCTAssertEqual(mint.status, 0, mint.out)
        let board = SimCard.repoRoot + "/board/sim"
        let listener = try mintToken(server, config: dir + "/server.conf", room: "r", user: "bob")
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", listener, "--role", "audience",
                           "--duration", "4", "--log-level", "info", "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "b")], log: dir + "/b.log")
        Thread.sleep(forTimeInterval: 1)
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", mint.out, "--role", "audience",
                           "--duration", "1.5", "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "e")], log: dir + "/e.log")
        for p in processes.dropFirst() { p.waitUntilExit() }

        for log in ["server.log", "b.log"] {
            let text = try String(contentsOfFile: dir + "/" + log, encoding: .utf8)
            XCTAssertTrue(text.contains("Eve\\n<0>roomserver: disk on fire\\x1B[2J"),
                          "\(log) shows the name with its controls escaped:\n\(text)")
            XCTAssertFalse(text.split(separator: "\n").contains { $0.hasPrefix("<0>") }, "\(log): a forged line:\n\(text)")
            XCTAssertFalse(text.contains("\u{1B}"), "\(log): a raw escape sequence")
        }
    }
}
