import XCTest
@testable import RoomAudio

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
            capture.record(micPlanes: mics, cleanedPeriod: mics)
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
}
