import Foundation
import RoomTestSupport
import XCTest

/// The receive path as a listener hears it, with real processes on loopback (roomserver and
/// two roomd on simulated cards): the listener follows whatever frame size the talker sends,
/// and a backlog burst after a stall of the server is shed within seconds (issue 9).
final class ReceivePathEndToEndTests: ProcessTestCase {
    /// A talker with 20 ms Opus frames, a listener with the default 10 ms: the listener must
    /// play the talker's speech (it used to receive every packet and play only zeros).
    func testTwentyMillisecondSenderIsHeardByTenMillisecondReceiver() throws {
        let run = try talkAndListenUndisturbed(name: "frame20", seconds: 7, senderOptions: ["--opus-frame", "20"], stall: nil)
        let received = run.lastStatus("rtp_received")
        print("receive path: A --opus-frame 20 → B (10 ms): B rtp_received \(received), speaker RMS \(fmt(run.speakerRMS)), "
              + "envelope correlation \(fmt(run.correlation)) at \(run.lag * 10) ms; logs in \(run.dir)")
        XCTAssertGreaterThan(received, 100, "B must receive A's 20 ms packets; logs in \(run.dir)")
        XCTAssertGreaterThan(run.speakerRMS, 0.005, "B's speaker must not be silent; logs in \(run.dir)")
        XCTAssertGreaterThan(run.correlation, 0.6, "B's speaker must carry A's speech; logs in \(run.dir)")
    }

    /// roomserver stops for 3 s (SIGSTOP) while A talks, then forwards its backlog at once. B's
    /// jitter buffer must not keep that backlog as delay: within 2 s of the server resuming, B's
    /// buffer delay is back near what it was before the stall, and so is the mouth-to-ear delay.
    /// (Before: 17 → 207–220 ms, mouth-to-ear 55 → 245 ms, falling ~20 ms per second.)
    func testBacklogAfterServerStallIsShedWithinTwoSeconds() throws {
        let run = try talkAndListenUndisturbed(name: "stall", seconds: 15, senderOptions: [], stall: (at: 5, seconds: 3))
        guard let resumed = run.resumedNs, let stopped = run.stoppedNs else { return XCTFail("no stall happened") }
        // B's status lines (every 0.25 s) on the monotonic clock.
        let lines = run.statuses.compactMap { s -> (t: Int64, delay: Int)? in
            guard let t = (s["monotonic_ns"] as? NSNumber)?.int64Value ?? run.statusTime(s),
                  let d = (s["jitter_delay_ms"] as? NSNumber)?.intValue,
                  ((s["rtp_received"] as? NSNumber)?.intValue ?? 0) > 0 else { return nil }
            return (t, d)
        }
        let before = lines.filter { $0.t > stopped - 2_500_000_000 && $0.t < stopped }.map(\.delay)
        let burst = lines.filter { $0.t > resumed && $0.t < resumed + 2_000_000_000 }.map(\.delay)
        let after = lines.filter { $0.t >= resumed + 2_000_000_000 }.map(\.delay)
        let baseline = before.sorted().dropFirst(before.count / 2).first ?? -1
        print("receive path: server stalled 3 s: B jitter_delay_ms before \(before), first 2 s after \(burst), later \(after); "
              + "mouth-to-ear before \(run.delayBeforeMs.map(fmt) ?? "?") ms (corr \(fmt(run.corrBefore))), "
              + "after \(run.delayAfterMs.map(fmt) ?? "?") ms (corr \(fmt(run.corrAfter))); logs in \(run.dir)")
        XCTAssertGreaterThan(before.count, 4, "B reported before the stall; logs in \(run.dir)")
        XCTAssertGreaterThan(after.count, 8, "B reported after the stall; logs in \(run.dir)")
        // The buffer is back within a margin of its pre-stall delay 2 s after the server resumed,
        // and stays there.
        XCTAssertLessThanOrEqual(after.max() ?? .max, max(baseline, 10) + 30,
                                 "jitter-buffer delay 2 s after the stall (before: \(before)); logs in \(run.dir)")
        // What the listener hears: the mouth-to-ear delay after the stall is close to before.
        XCTAssertGreaterThan(run.corrAfter, 0.5, "B hears A after the stall; logs in \(run.dir)")
        if let b = run.delayBeforeMs, let a = run.delayAfterMs {
            XCTAssertLessThanOrEqual(a, b + 30, "mouth-to-ear after the stall; logs in \(run.dir)")
        } else {
            XCTFail("mouth-to-ear not measured; logs in \(run.dir)")
        }
        XCTAssertEqual(run.xruns, 0, "B had xruns in all three runs (machine busy?); logs in \(run.dir)")
    }

    // MARK: One run

    private struct Run {
        var dir: String
        var statuses: [[String: Any]]
        var speakerRMS: Double
        var correlation: Double
        var lag: Int
        var stoppedNs: Int64?
        var resumedNs: Int64?
        var bStartNs: Int64
        var delayBeforeMs: Double?
        var corrBefore: Double
        var delayAfterMs: Double?
        var corrAfter: Double

        func lastStatus(_ key: String) -> Int { (statuses.last?[key] as? NSNumber)?.intValue ?? -1 }
        /// B's xruns: a run with any measures the machine, not the receive path.
        var xruns: Int { E2E.xruns(statuses.last ?? [:]) }
        /// B's status lines carry `t` (seconds since B started); B's engine starts within
        /// milliseconds of its process, close enough to place a line on the monotonic clock.
        func statusTime(_ s: [String: Any]) -> Int64? {
            guard let t = (s["t"] as? NSNumber)?.doubleValue else { return nil }
            return bStartNs + Int64(t * 1e9)
        }
    }

    /// `talkAndListen`, run again (the suite's one policy) when B had xruns: a stall of this
    /// machine re-primes B's playback and moves its speaker file against the talker's speech.
    private func talkAndListenUndisturbed(name: String, seconds: Double, senderOptions: [String],
                                          stall: (at: Double, seconds: Double)?) throws -> Run {
        var attempt = 0
        return try Disturbance.rerun("receive path \(name)", disturbed: { $0.xruns > 0 }) {
            defer { attempt += 1 }
            return try talkAndListen(name: attempt == 0 ? name : "\(name)-\(attempt)", seconds: seconds,
                                     senderOptions: senderOptions, stall: stall)
        }
    }

    /// roomserver + B (audience, JSON status every 0.25 s) + A (streamer, speech-like input).
    /// With `stall`, the server is stopped `at` seconds after A starts, for `seconds`.
    private func talkAndListen(name: String, seconds: Double, senderOptions: [String],
                               stall: (at: Double, seconds: Double)?) throws -> Run {
        let roomd = try executable("roomd"), server = try executable("roomserver")
        let dir = SimCard.scratch("receive-\(name)")
        let (tcp, _, serverProcess) = try startServer(server, dir: dir)
        func token(_ user: String, publish: Bool) throws -> String {
            try mintToken(server, config: dir + "/server.conf", room: "rx", user: user, publish ? ["--publish"] : [])
        }
        let rooms = try E2E.writeTalkerAndListenerRooms(dir, seconds: seconds)
        let speech = rooms.speech
        let board = SimCard.repoRoot + "/board/sim"
        let bStart = E2E.monotonicNanoseconds()
        let b = try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token("b", publish: false),
                                   "--role", "audience", "--duration", "\(seconds + 0.5)", "--json", "--stats-interval", "0.25"],
                           env: ["ROOMSIM_CONFIG": rooms.listener], log: dir + "/b.log")
        Thread.sleep(forTimeInterval: 0.5)
        let a = try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token("a", publish: true),
                                   "--role", "streamer", "--duration", "\(seconds)"] + senderOptions,
                           env: ["ROOMSIM_CONFIG": rooms.talker], log: dir + "/a.log")
        var stopped: Int64?, resumed: Int64?
        if let stall {
            Thread.sleep(forTimeInterval: stall.at)
            stopped = E2E.monotonicNanoseconds()
            kill(serverProcess.processIdentifier, SIGSTOP)
            Thread.sleep(forTimeInterval: stall.seconds)
            kill(serverProcess.processIdentifier, SIGCONT)
            resumed = E2E.monotonicNanoseconds()
        }
        for p in [a, b] { p.waitUntilExit(); XCTAssertEqual(p.terminationStatus, 0, "roomd exit status; logs in \(dir)") }
        serverProcess.terminate()
        serverProcess.waitUntilExit()

        let statuses = try E2E.jsonLines(dir + "/b.log").filter { $0["summary"] == nil && $0["periods"] != nil }
        let out = try SimCard.readWAV(dir + "/b-speaker.wav").floatSamples
        let rms = sqrt(out.reduce(0) { $0 + Double($1 * $1) } / Double(max(out.count, 1)))
        let envA = E2E.envelope(speech), envB = E2E.envelope(out)
        let (corr, lag) = E2E.bestCorrelation(envA, envB, maxLag: 400)
        let micStart = try E2E.startNanoseconds(dir + "/a.status", stream: "capture")
        let speakerStart = try E2E.startNanoseconds(dir + "/b.status", stream: "playback")

        /// Mouth-to-ear over a window of A's talk [from, from + length) on the monotonic clock:
        /// the lag (10 ms steps) at which B's speaker envelope best matches A's mic envelope.
        func mouthToEar(from: Int64, length: Double) -> (Double?, Double) {
            let ia = Int((from - micStart) / 10_000_000), n = Int(length * 100)
            let ib = Int((from - speakerStart) / 10_000_000)
            guard ia >= 0, ib >= 0, ia + n <= envA.count else { return (nil, -1) }
            var best = (-1.0, 0)
            for lag in 0...40 where ib + lag + n <= envB.count {
                let xa = envA[ia..<(ia + n)], xb = envB[(ib + lag)..<(ib + lag + n)]
                let ma = xa.reduce(0, +) / Double(n), mb = xb.reduce(0, +) / Double(n)
                var num = 0.0, da = 0.0, db = 0.0
                for (u, v) in zip(xa, xb) { num += (u - ma) * (v - mb); da += (u - ma) * (u - ma); db += (v - mb) * (v - mb) }
                let c = num / sqrt(da * db + 1e-12)
                if c > best.0 { best = (c, lag) }
            }
            return best.0 < 0 ? (nil, best.0) : (Double(best.1 * 10), best.0)
        }
        var before: (Double?, Double) = (nil, -1), after: (Double?, Double) = (nil, -1)
        if let stopped, let resumed {
            before = mouthToEar(from: stopped - 3_000_000_000, length: 2.5)
            after = mouthToEar(from: resumed + 2_000_000_000, length: 4)
        }
        return Run(dir: dir, statuses: statuses, speakerRMS: rms, correlation: corr, lag: lag, stoppedNs: stopped,
                   resumedNs: resumed, bStartNs: bStart, delayBeforeMs: before.0, corrBefore: before.1,
                   delayAfterMs: after.0, corrAfter: after.1)
    }

    private func fmt(_ x: Double) -> String { String(format: "%.2f", x) }
}
