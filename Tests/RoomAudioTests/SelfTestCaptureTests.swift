import Foundation
@testable import RoomAudio
import RoomCaptureChain
import RoomDSP
import RoomTestSupport
import XCTest

/// The hand-over between the daemon and the audio thread, driven from one thread.
final class SelfTestCaptureTests: XCTestCase {
    private let capture = SelfTestCapture(micCount: 2, periodFrames: 480, rate: 48000, quietSeconds: 0.02,
                                          signalSeconds: 0.02, tailSeconds: 0.01)

    private func runPeriods(_ n: Int) {
        let mics = UnsafeMutablePointer<Float>.allocate(capacity: 2 * 480)
        mics.initialize(repeating: 0.25, count: 2 * 480)
        let speaker = UnsafeMutablePointer<Float>.allocate(capacity: 480)
        defer { mics.deallocate(); speaker.deallocate() }
        for _ in 0..<n where capture.active() {
            capture.fillSpeaker(speaker)
            capture.takeMics(mics)
            capture.record(cleanedPeriod: mics)
        }
    }

    func testARequestRunsToDoneAndHandsTheRecordingOver() throws {
        XCTAssertTrue(capture.request([Float](repeating: 0.5, count: 960)))
        XCTAssertFalse(capture.request([0.1]), "one test at a time")
        runPeriods(10)
        XCTAssertEqual(capture.currentState, .done)
        let r = try XCTUnwrap(capture.takeResult())
        XCTAssertEqual(r.quiet.count, 2)
        XCTAssertEqual(r.quiet[0].count, capture.quietPeriods * 480)
        XCTAssertEqual(r.mics[1].count, capture.recordPeriods * 480)
        XCTAssertEqual(r.played.count, 960)
        XCTAssertEqual(capture.currentState, .idle)
        XCTAssertFalse(capture.request([]), "an empty signal is refused")
    }

    func testCancelWithdrawsARequestAndDropsARunningTest() {
        XCTAssertTrue(capture.request([Float](repeating: 0.5, count: 960)))
        capture.cancel()
        XCTAssertEqual(capture.currentState, .idle, "withdrawn before the audio thread took it")
        XCTAssertFalse(capture.active(), "nothing plays after a withdrawal")

        XCTAssertTrue(capture.request([Float](repeating: 0.5, count: 960)))
        runPeriods(1)
        XCTAssertEqual(capture.currentState, .running)
        capture.cancel()
        XCTAssertFalse(capture.active(), "dropped at the next period")
        XCTAssertEqual(capture.currentState, .aborted)
        capture.reset()
        XCTAssertEqual(capture.currentState, .idle)
        XCTAssertTrue(capture.request([0.5]), "a new test may start")
    }

    /// The talker is added to what the chain reads, never to what is recorded raw or played.
    func testTheNearEndReachesTheChainOnly() throws {
        let c = SelfTestCapture(micCount: 2, periodFrames: 4, rate: 400, quietSeconds: 0.01, signalSeconds: 0.02, tailSeconds: 0.01)
        XCTAssertEqual(c.signalCapacity, 8)
        XCTAssertTrue(c.request([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], nearEnd: [0, 0, 0.25, 0.25, 0.25, 0, 0, 0, 0.25, 0.25]))
        let mics = UnsafeMutablePointer<Float>.allocate(capacity: 8)
        let speaker = UnsafeMutablePointer<Float>.allocate(capacity: 4)
        defer { mics.deallocate(); speaker.deallocate() }
        var chain: [[Float]] = [[], []]
        var played: [Float] = []
        while c.active() {
            mics.update(repeating: 0.125, count: 8)
            c.fillSpeaker(speaker)
            played += Array(UnsafeBufferPointer(start: speaker, count: 4))
            c.takeMics(mics)
            for m in 0..<2 { chain[m] += Array(UnsafeBufferPointer(start: mics + 4 * m, count: 4)) }
            c.record(cleanedPeriod: mics)
        }
        let r = try XCTUnwrap(c.takeResult())
        XCTAssertEqual(r.mics[0], [Float](repeating: 0.125, count: 12), "raw, without the talker")
        XCTAssertEqual(r.mics[1], r.mics[0])
        // quiet (1 period), then the signal periods (2; the talker cut to 8 samples), then the tail.
        let expected: [Float] = [0.125, 0.125, 0.125, 0.125] + [0.125, 0.125, 0.375, 0.375, 0.375, 0.125, 0.125, 0.125]
            + [0.125, 0.125, 0.125, 0.125]
        XCTAssertEqual(chain[0], expected)
        XCTAssertEqual(chain[1], expected, "every mic")
        XCTAssertEqual(r.cleaned, Array(expected.dropFirst(4)), "the chain's output is what it read")
        XCTAssertEqual(played, [0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0], "the talker is never played")
    }
}

/// `roomctl selftest`'s signals through the real engine on the simulated card (board/sim's
/// echo path, beamformer off as on the board): the report must tell a canceller that keeps a
/// talker during double talk from one that chops it.
final class SelfTestOnTheSimCardTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(SimCard.prepared, "libasound_module_pcm_roomsim.so missing from \(SimCard.buildDirectory): run `swift build` first (scripts/test does)")
    }

    /// Starts the engine, runs `runs` self-tests in a row as roomd does, returns their reports;
    /// all of it again (the suite's one policy) when the machine caused an xrun, which spoils
    /// the recording (the engine then aborts the test, as roomd answers "run it again").
    private func selfTests(_ canceller: EchoCanceller, runs: Int = 1, dump: String? = nil) throws -> [SelfTestReport] {
        let result = try Disturbance.rerun("self-test \(canceller)", disturbed: { $0.xruns > 0 }) {
            try selfTestsOnce(canceller, runs: runs, dump: dump)
        }
        XCTAssertEqual(result.xruns, 0, "xruns disturb the measurement (machine busy?), in all three runs")
        XCTAssertEqual(result.reports.count, runs, "a test aborted without an xrun")
        return result.reports
    }

    private func selfTestsOnce(_ canceller: EchoCanceller, runs: Int, dump: String?) throws -> (reports: [SelfTestReport], xruns: Int) {
        var config = SimCard.simBoardConfiguration()
        config.processing.beamform = false
        config.processing.echoCanceller = canceller
        SimCard.useRoom(SimCard.scratch("selftest-\(canceller)"), [:])   // board/sim's quiet room, whatever ran before
        let engine = try AudioEngine(configuration: config)
        try engine.start()
        defer { engine.stop() }
        let plan = SelfTestPlan(rate: config.rate)
        let played = plan.played(), talker = plan.nearEnd()
        var reports: [SelfTestReport] = []
        for run in 0..<runs {
            XCTAssertTrue(engine.selfTest.request(played, nearEnd: talker))
            let deadline = Date().addingTimeInterval(20)
            while engine.selfTest.currentState != .done, engine.selfTest.currentState != .aborted, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.05)
            }
            // An xrun aborts the test (the recording's timing broke): stop here, the caller
            // counts the xruns and runs it all again; an abort without one fails there.
            if engine.selfTest.currentState == .aborted { break }
            let r = try XCTUnwrap(engine.selfTest.takeResult(), "state \(engine.selfTest.currentState)")
            if let dump {
                SimCard.writeWAV(dump + "-\(canceller)-\(run)-mic0.wav", r.mics[0])
                SimCard.writeWAV(dump + "-\(canceller)-\(run)-out.wav", r.cleaned)
                SimCard.writeWAV(dump + "-\(canceller)-\(run)-near.wav", talker)
                SimCard.writeWAV(dump + "-\(canceller)-\(run)-played.wav", played)
            }
            reports.append(SelfTestAnalysis.analyze(SelfTestRecording(rate: config.rate, quietMics: r.quiet, played: r.played,
                                                                      signalMics: r.mics, cleaned: r.cleaned, segments: plan.segments)))
        }
        let s = engine.stats.snapshot()
        return (reports, s.captureXruns + s.playbackXruns)
    }

    /// Two runs each, as an installer might run it twice: the second starts from a canceller
    /// that has learnt the room (and was disturbed by the first run's talker).
    /// Measured (debug build): roomd's canceller 0.4 / 0.0 dB lost, correlation 0.98 / 0.999,
    /// no syllable chopped, echo 61 / 44 dB; webrtc's AEC 25.9 / 17.4 dB lost, 0.54 / 0.79,
    /// 100 / 92 % chopped, echo 54 / 55 dB. Release: the same within 0.1 dB for ours; webrtc's
    /// 25.1 / 16.8 dB, 0.55 / 0.82, 98 / 92 %.
    func testDoubleTalkTellsAKeptTalkerFromAChoppedOne() throws {
        let dump = ProcessInfo.processInfo.environment["SELFTEST_DUMP"]
        let ours = try selfTests(.kalman, runs: 2, dump: dump)
        let theirs = try selfTests(.webrtc, runs: 2, dump: dump)
        for (name, reports) in [("kalman", ours), ("webrtc", theirs)] {
            for r in reports {
                print("selftest \(name): echo \(r.echoReductionDB ?? .nan) dB, double talk \(String(describing: r.doubleTalk)), problems \(r.problems)")
            }
        }
        for r in ours {
            XCTAssertEqual(r.problems, [], "roomd's canceller passes")
            let dt = try XCTUnwrap(r.doubleTalk)
            XCTAssertLessThan(dt.lossDB, 1.5, "\(dt)")
            XCTAssertGreaterThan(dt.correlation, 0.95, "\(dt)")
            // 8 %: with the array on, the first run of a fresh engine chops 4-5 of its 97 talker
            // frames (4.1-5.2 %), inside 5 % without it (RoomdConfigurationTests says why)
            XCTAssertLessThan(dt.choppedFraction, 0.08, "\(dt)")
            XCTAssertEqual(dt.talkerLevelDBFS, Double(SelfTestPlan(rate: 48000).talkerLevelDBFS), accuracy: 3,
                           "alone, the talker passes the chain at the level it was added (gain control held)")
            XCTAssertGreaterThan(try XCTUnwrap(r.echoReductionDB), 30)
        }
        for r in theirs {
            let dt = try XCTUnwrap(r.doubleTalk)
            XCTAssertGreaterThan(dt.lossDB, 6, "webrtc's AEC mutes the talker: \(dt)")
            XCTAssertLessThan(dt.correlation, 0.9, "\(dt)")
            XCTAssertGreaterThan(dt.choppedFraction, 0.5, "\(dt)")
            XCTAssertGreaterThan(try XCTUnwrap(r.echoReductionDB), 20, "it removes the echo: double talk is what fails")
            XCTAssertEqual(r.problems.count, 1, "\(r.problems)")
            XCTAssertTrue(r.problems.first?.hasPrefix("echo canceller cuts a talker who speaks while the far end plays") == true, "\(r.problems)")
            XCTAssertFalse(r.failedOnlyOnEcho(), "no second measurement: the echo figure was fine")
        }
    }
}
