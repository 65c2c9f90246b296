import Foundation
import XCTest

/// roomd against a Janus that means harm (issue 27): `Tests/Fixtures/hostile_janus.py` takes the
/// appliance through create, attach and join like Janus, then answers with an SDP of its choosing.
/// The attacks are the ones a hostile or broken media server can make before any media flows.
final class HostileJanusProcessTests: ProcessTestCase {
    /// Starts the hostile Janus on a free port with `answer` as its SDP; returns the port and
    /// its log (one JSON line per message received or sent).
    private func hostileJanus(_ dir: String, answer: String) throws -> (port: Int, log: String) {
        let port = E2E.freePort()
        try answer.write(toFile: dir + "/answer.sdp", atomically: true, encoding: .utf8)
        let log = dir + "/janus-messages.jsonl"
        let p = try launch("/usr/bin/python3", [SimCard.repoRoot + "/Tests/Fixtures/hostile_janus.py", "\(port)", dir + "/answer.sdp", log],
                           log: dir + "/janus.out")
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && !E2E.accepts(port: port) && p.isRunning { Thread.sleep(forTimeInterval: 0.05) }
        guard E2E.accepts(port: port) else {
            let out = (try? String(contentsOfFile: dir + "/janus.out", encoding: .utf8)) ?? ""
            throw NSError(domain: "hostile_janus.py did not start: \(out)", code: 1)
        }
        return (port, log)
    }

    /// Item 6: an answer with `a=fmtp:111 =` made roomd exit with SIGILL (an index on an empty
    /// split in the Opus parameters). Now roomd reads it as an empty parameter, stays up and
    /// answers its control socket.
    func testAMalformedAnswerFromJanusDoesNotEndRoomd() throws {
        let roomd = try executable("roomd"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("hostile-janus")
        // The answer that trapped, as the sdp fuzz target keeps it in its corpus.
        let sdp = try String(contentsOfFile: SimCard.repoRoot + "/Tests/Fuzz/corpus/sdp/janus_answer_fmtp_empty_pair", encoding: .utf8)
        let janus = try hostileJanus(dir, answer: sdp)
        let socket = dir + "/ctl.sock"
        let p = try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--backend", "janus", "--server", "127.0.0.1:\(janus.port)",
                                   "--janus-room", "1234", "--plaintext-signalling", "--config", "none", "--state-dir", "none",
                                   "--control-socket", socket, "--duration", "30", "--stats-interval", "0"],
                           env: ["ROOMSIM_CONFIG": ""], log: dir + "/roomd.log")
        let messages = { (try? String(contentsOfFile: janus.log, encoding: .utf8)) ?? "" }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && !messages().contains("a=fmtp:111 =") { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertTrue(messages().contains("a=fmtp:111 ="), "the answer was sent: \(messages())")
        Thread.sleep(forTimeInterval: 1.5)
        let log = (try? String(contentsOfFile: dir + "/roomd.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(p.isRunning, "roomd ended (status \(p.isRunning ? 0 : p.terminationStatus)); log: \(log)")
        let status = try runSeparated(roomctl, ["--socket", socket, "--json", "status"])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.contains("\"backend\":\"janus\""), status.stdout)
        p.terminate()
        p.waitUntilExit()
    }
}
