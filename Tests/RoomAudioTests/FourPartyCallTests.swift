import Foundation
import RoomTestSupport
import XCTest

/// Issue 27: four talkers on stage with the server forwarding the loudest three (`top_n` 3).
/// The server's deliberate drops read as loss at every listener, which reported it, and every
/// encoder went to SILK with 10 % expected loss at 2-4 s and stayed there for the whole call
/// (0 xruns, a clean loopback network). Now the listeners see no gap where the server chose
/// not to forward, report no loss, and every encoder, once the first clean reports arrive,
/// stays on the transform layer without FEC to the end.
final class FourPartyCallTests: ProcessTestCase {
    func testAFourPartyCallOnACleanNetworkReportsNoLossAndStaysInCELT() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver")
        let run = try Disturbance.rerun("four-party call", disturbed: { $0.xruns > 0 }) { try callOnce(roomd, server) }
        XCTAssertEqual(run.xruns, 0, "xruns in every run the policy allowed; logs in \(run.dir)")
        for (name, statuses) in run.statuses {
            func loss(_ s: [String: Any]) -> Int? { (s["opus_expected_loss_pct"] as? NSNumber)?.intValue }
            func layer(_ s: [String: Any]) -> String? { s["opus_layer"] as? String }
            func lost(_ s: [String: Any]) -> Int { (s["received_lost"] as? NSNumber)?.intValue ?? -1 }
            print("four-party: \(name) expected loss / layer / received lost per second: "
                  + statuses.map { "\(loss($0) ?? -1)/\(layer($0) ?? "-")/\(lost($0))" }.joined(separator: " "))
            let clean = try XCTUnwrap(statuses.firstIndex { loss($0) == 0 && layer($0) == "celt" },
                                      "\(name) never reached the clean-network settings; logs in \(run.dir)")
            XCTAssertLessThanOrEqual(clean, 4, "\(name): clean within the first seconds")
            for s in statuses[clean...] {
                XCTAssertEqual(loss(s), 0, "\(name) at \(s["t"] ?? "?") s: expected loss came back; logs in \(run.dir)")
                XCTAssertEqual(layer(s), "celt", "\(name) at \(s["t"] ?? "?") s; logs in \(run.dir)")
            }
            XCTAssertEqual(statuses.last.map(lost), 0, "\(name) counted packets lost on a clean network; logs in \(run.dir)")
        }
        XCTAssertGreaterThan(run.droppedByServer, 0, "the server dropped packets on purpose (4 talkers, top 3): the case this is about")
    }

    private struct Call {
        var dir: String
        var statuses: [(String, [[String: Any]])]
        var xruns: Int
        var droppedByServer: Int
    }

    private func callOnce(_ roomd: String, _ server: String) throws -> Call {
        let dir = SimCard.scratch("four")
        let (tcp, _, serverProcess) = try startServer(server, dir: dir)
        // Four daemons and the server share this machine's two cores; an audio thread preempted
        // for ~10 ms underran the shipped 5 ms of headroom (a fresh-clone CI had an xrun in each
        // of three runs while its witness saw the test process stall 6-7 ms; under
        // `stress-ng --cpu 2 --cache 1 --vm 1` one period took 13.7 ms). This test is about loss
        // reports, not the board's latency, so its appliances write 20 ms ahead.
        let board = try SimCard.simBoard(in: dir, audioKeys: ["playback_headroom_ms": "20"])
        let names = ["a", "b", "c", "d"]
        var started: [Process] = []
        for (i, name) in names.enumerated() {
            // Each talks all the time, at a level of its own: four active speakers.
            SimCard.writeWAV(dir + "/\(name)-mic.wav", SimCard.speechLike(seconds: 12, seed: 0.3 + 0.17 * Double(i), level: 0.3 - 0.04 * Float(i)))
            let room = try E2E.writeRoom(dir, name, input: dir + "/\(name)-mic.wav", inputEnd: "silence",
                                         extra: ["echo_gain_db = -30", "noise_dbfs = -70"])
            let token = try mintToken(server, config: dir + "/server.conf", room: "four", user: name, ["--publish"])
            started.append(try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", token, "--role", "streamer",
                                              "--duration", "11", "--json", "--stats-interval", "1"],
                                      env: ["ROOMSIM_CONFIG": room], log: dir + "/\(name).log"))
        }
        for p in started { p.waitUntilExit() }
        serverProcess.interrupt()
        serverProcess.waitUntilExit()
        var statuses: [(String, [[String: Any]])] = []
        var xruns = 0
        for name in names {
            let lines = try E2E.jsonLines(dir + "/\(name).log")
            statuses.append((name, lines.filter { $0["summary"] == nil && $0["opus_bitrate"] != nil }))
            if let summary = lines.last(where: { $0["summary"] != nil }) { xruns += E2E.xruns(summary) } else { xruns += 1_000 }
        }
        // "stopped; N joins, M packets forwarded, K datagrams dropped (...)"
        let serverLog = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
        let dropped = serverLog.split(separator: "\n").last { $0.contains("datagrams dropped") }
            .flatMap { line in line.components(separatedBy: " datagrams dropped").first?.split(separator: " ").last.flatMap { Int($0) } } ?? 0
        return Call(dir: dir, statuses: statuses, xruns: xruns, droppedByServer: dropped)
    }
}
