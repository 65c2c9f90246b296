import RoomMedia
import XCTest

/// The warnings' state machine and the E-model, with samples made up to the second.
final class QualityWatchTests: XCTestCase {
    private func run(_ watch: inout QualityWatch, _ samples: [QualitySample]) -> [(second: Int, QualityChange)] {
        var out: [(Int, QualityChange)] = []
        for (i, s) in samples.enumerated() { out += watch.add(s).map { (i + 1, $0) } }
        return out
    }

    func testLossIsRaisedAfterTwoSecondsAndClearedAfterFiveGoodOnes() {
        var watch = QualityWatch()
        let bad = QualitySample(lossPercent: 8), good = QualitySample(lossPercent: 0.2)
        let changes = run(&watch, [good, good, bad, bad, bad, good, good, good, good, good, good])
        XCTAssertEqual(changes.map(\.second), [4, 10])
        XCTAssertEqual(changes.map(\.1), [QualityChange(warning: .highLoss, raised: true, value: 8),
                                           QualityChange(warning: .highLoss, raised: false, value: 0.2)])
        XCTAssertTrue(watch.active.isEmpty)
    }

    /// Between the lines (under 3 %, over 1 %) nothing changes either way: no flicker.
    func testAValueBetweenTheLinesNeitherRaisesNorClears() {
        var watch = QualityWatch()
        XCTAssertTrue(run(&watch, Array(repeating: QualitySample(lossPercent: 2), count: 10)).isEmpty)
        _ = run(&watch, [QualitySample(lossPercent: 5), QualitySample(lossPercent: 5)])
        XCTAssertEqual(watch.active, [.highLoss])
        XCTAssertTrue(run(&watch, Array(repeating: QualitySample(lossPercent: 2), count: 10)).isEmpty, "2 % does not clear it")
        XCTAssertEqual(watch.active, [.highLoss])
    }

    /// A second that cannot be measured (no packets, muted) breaks a run instead of counting.
    func testAnUnmeasurableSecondBreaksTheRun() {
        var watch = QualityWatch()
        let bad = QualitySample(jitterMs: 40)
        XCTAssertTrue(run(&watch, [bad, QualitySample(), bad, QualitySample(), bad]).isEmpty)
        XCTAssertEqual(run(&watch, [bad]).map(\.1.warning), [.highJitter])
    }

    func testEachWarningFollowsItsOwnMeasure() {
        var watch = QualityWatch()
        let s = QualitySample(rttMs: 300, jitterMs: 45, lossPercent: 0, mos: 3.1, inputConstant: true, outputConstant: false)
        let changes = run(&watch, [s, s, s])
        XCTAssertEqual(changes.map(\.1.warning), [.highRTT, .highJitter, .lowMOS, .constantInputLevel])
        XCTAssertEqual(changes.map(\.second), [1, 2, 2, 3], "the round trip at once (a measurement every 2 s), constant levels take 3 s")
        XCTAssertNil(changes.last?.1.value, "a constant level has no value to show")
        var cleared = watch
        cleared.reset()
        XCTAssertTrue(cleared.active.isEmpty)
    }

    /// G.107's figures: R 93.2 with no delay and no loss (MOS 4.41); the delay term grows past
    /// 177.3 ms one way; random loss through G.711+PLC's Bpl 25.1.
    func testEModelMatchesItsDefiningFigures() {
        XCTAssertEqual(EModel.rating(oneWayDelayMs: 0, lossPercent: 0), 93.2, accuracy: 1e-9)
        XCTAssertEqual(EModel.mos(rating: 93.2), 4.41, accuracy: 0.01)
        XCTAssertEqual(EModel.rating(oneWayDelayMs: 100, lossPercent: 0), 93.2 - 2.4, accuracy: 1e-9)
        XCTAssertEqual(EModel.rating(oneWayDelayMs: 277.3, lossPercent: 0), 93.2 - 0.024 * 277.3 - 11, accuracy: 1e-9)
        XCTAssertEqual(EModel.rating(oneWayDelayMs: 0, lossPercent: 25.1), 93.2 - 47.5, accuracy: 1e-9, "Ie,eff = 95/2 at Ppl = Bpl")
        XCTAssertEqual(EModel.mos(rating: -5), 1)
        XCTAssertEqual(EModel.mos(rating: 120), 4.5)
        // What the low-MOS line means in a call: 8 % loss left after FEC at 100 ms one way.
        XCTAssertLessThan(EModel.mos(rating: EModel.rating(oneWayDelayMs: 100, lossPercent: 8)), 3.9)
        XCTAssertGreaterThan(EModel.mos(rating: EModel.rating(oneWayDelayMs: 100, lossPercent: 1)), 4.0)
    }
}
