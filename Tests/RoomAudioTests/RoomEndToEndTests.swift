import Foundation
import XCTest

/// Real processes on loopback: one roomserver and three roomd on their own simulated sound
/// cards. What A's microphones hear must come out of B's and C's speakers, and not out of A's.
final class RoomEndToEndTests: ProcessTestCase {
    func testSpeechFromAReachesBAndCButNotA() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver")
        let dir = SimCard.scratch("e2e")
        let (tcp, _, _) = try startServer(server, dir: dir)

        func token(_ user: String, publish: Bool) throws -> String {
            try mintToken(server, config: dir + "/server.conf", room: "e2e", user: user, publish ? ["--publish"] : [])
        }
        // A talks (speech-like signal from the beamformer's look direction); B and C listen.
        let speech = SimCard.speechLike(seconds: 6, seed: 0.9, level: 0.25)
        SimCard.writeWAV(dir + "/a-mic.wav", speech)
        func room(_ name: String, input: String?) throws -> String {
            try E2E.writeRoom(dir, name, input: input, inputEnd: "silence", extra: ["echo_gain_db = -10", "noise_dbfs = -70"])
        }
        let seconds = "9"
        let board = SimCard.repoRoot + "/board/sim"
        for (name, role, publish) in [("b", "audience", false), ("c", "audience", false)] {
            try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token(name, publish: publish),
                               "--role", role, "--duration", seconds],
                       env: ["ROOMSIM_CONFIG": try room(name, input: nil)], log: dir + "/\(name).log")
        }
        Thread.sleep(forTimeInterval: 0.5)
        // A starts last so its speech begins after the listeners joined; it starts 1 s into its
        // run, the time the join takes, because the mic file starts when A's capture does.
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token("a", publish: true),
                           "--role", "streamer", "--duration", seconds, "--json", "--stats-interval", "1"],
                   env: ["ROOMSIM_CONFIG": try room("a", input: dir + "/a-mic.wav")], log: dir + "/a.log")
        for p in processes.dropFirst() { p.waitUntilExit(); XCTAssertEqual(p.terminationStatus, 0) }

        let a = E2E.envelope(speech)
        let micStart = try E2E.startNanoseconds(dir + "/a.status", stream: "capture")
        for name in ["b", "c"] {
            let out = try SimCard.readWAV(dir + "/\(name)-speaker.wav").floatSamples
            let e = E2E.envelope(out)
            let (corr, lag) = E2E.bestCorrelation(a, e, maxLag: 400)
            XCTAssertGreaterThan(corr, 0.6, "\(name)'s speaker must carry A's speech (best lag \(lag * 10) ms); logs in \(dir)")
            // Sample 0 of A's mic and sample lag×480 of the listener's speaker, on one clock:
            // the mouth-to-ear delay, to 10 ms (the envelope's resolution).
            let speakerStart = try E2E.startNanoseconds(dir + "/\(name).status", stream: "playback")
            let delayMs = (Double(speakerStart) - Double(micStart)) / 1e6 + Double(lag * 10)
            print("e2e: A's mic → \(name)'s speaker: envelope correlation \(corr), delay \(delayMs) ms")
            XCTAssertGreaterThan(delayMs, 0, "sound cannot arrive before it was spoken")
            XCTAssertLessThan(delayMs, 250, "loose sanity bound; scripts/bench measures it properly")
        }
        let own = try SimCard.readWAV(dir + "/a-speaker.wav").floatSamples
        let ownRMS = sqrt(own.reduce(0) { $0 + Double($1 * $1) } / Double(max(own.count, 1)))
        XCTAssertLessThan(ownRMS, 0.001, "A must not hear itself from the server")

        // Loss-driven FEC: A protects its stream until its listeners report, then — nobody
        // losing anything on loopback — drops the FEC copy and takes the clean-network bitrate.
        let statuses = try E2E.jsonLines(dir + "/a.log").filter { $0["summary"] == nil && $0["opus_bitrate"] != nil }
        func loss(_ s: [String: Any]?) -> Int? { (s?["opus_expected_loss_pct"] as? NSNumber)?.intValue }
        func bitrate(_ s: [String: Any]?) -> Int? { (s?["opus_bitrate"] as? NSNumber)?.intValue }
        print("e2e: A's expected loss / bitrate per second: " + statuses.map { "\(loss($0) ?? -1)/\(bitrate($0) ?? -1)" }.joined(separator: " "))
        XCTAssertEqual(loss(statuses.first), 5, "FEC is on before any report; logs in \(dir)")
        XCTAssertEqual(bitrate(statuses.first), 96000)
        XCTAssertEqual(loss(statuses.last), 0, "clean reports switch the FEC copy off; logs in \(dir)")
        XCTAssertEqual(bitrate(statuses.last), 96000)
        // ... and the layer follows: SILK (FEC) first, the transform layer once clean.
        func layer(_ s: [String: Any]?) -> String? { s?["opus_layer"] as? String }
        XCTAssertEqual(layer(statuses.first { layer($0) != nil }), "silk", "logs in \(dir)")
        XCTAssertEqual(layer(statuses.last), "celt", "logs in \(dir)")
        // ... and so does the encoder coding it: the transform layer alone, 4 ms less look-ahead.
        func lookahead(_ s: [String: Any]?) -> Double? { (s?["opus_lookahead_ms"] as? NSNumber)?.doubleValue }
        XCTAssertEqual(lookahead(statuses.first), 6.5, "protecting: VOIP's look-ahead; logs in \(dir)")
        XCTAssertEqual(lookahead(statuses.last), 2.5, "clean: the low-delay encoder; logs in \(dir)")
    }
}
