import Foundation
import RoomDSP
import XCTest

/// Helpers shared by the DSP tests.
enum Signal {
    static func sine(amplitude: Float, frequency: Double = 1000, rate: Int = 48000, count: Int, phase: Int = 0) -> [Float] {
        (0..<count).map { Float(Double(amplitude) * sin(2 * .pi * frequency * Double($0 + phase) / Double(rate))) }
    }
}

final class LevelMeterTests: XCTestCase {
    private func run(_ meter: inout LevelMeter, _ samples: [Float]) {
        samples.withUnsafeBufferPointer { meter.process($0) }
    }

    func testSineRMSAndPeak() {
        var meter = LevelMeter(periodSeconds: 0.01)
        run(&meter, Signal.sine(amplitude: 0.5, count: 480))   // 10 whole cycles
        XCTAssertEqual(meter.lastRMSDBFS, -6.0206 - 3.0103, accuracy: 0.01)
        XCTAssertEqual(meter.lastPeakDBFS, -6.0206, accuracy: 0.01)
        XCTAssertEqual(meter.clipped, 0)
    }

    func testSilenceIsTheFloor() {
        var meter = LevelMeter(periodSeconds: 0.01)
        run(&meter, [Float](repeating: 0, count: 480))
        XCTAssertEqual(meter.lastRMSDBFS, -100)
        XCTAssertEqual(meter.lastPeakDBFS, -100)
        XCTAssertEqual(meter.smoothedDBFS, -100)
        run(&meter, [])
        XCTAssertEqual(meter.lastRMSDBFS, -100, "an empty period is silence, not NaN")
    }

    func testSmoothingFollowsTheTimeConstant() {
        var meter = LevelMeter(periodSeconds: 0.01, timeConstant: 0.1)
        let tone = Signal.sine(amplitude: 1, count: 480)       // RMS -3.01 dBFS
        run(&meter, tone)
        // After one 10 ms period of a 100 ms time constant the smoothed power is 1 - e^-0.1 ≈ 9.5 % of the target.
        XCTAssertEqual(meter.smoothedDBFS, -3.0103 + Float(10 * log10(1 - exp(-0.1))), accuracy: 0.05)
        for _ in 0..<9 { run(&meter, tone) }
        // After 100 ms (one time constant): 1 - e^-1 ≈ 63 %.
        XCTAssertEqual(meter.smoothedDBFS, -3.0103 + Float(10 * log10(1 - exp(-1.0))), accuracy: 0.05)
        for _ in 0..<200 { run(&meter, tone) }
        XCTAssertEqual(meter.smoothedDBFS, -3.0103, accuracy: 0.01)
        XCTAssertEqual(meter.lastRMSDBFS, -3.0103, accuracy: 0.01, "the unsmoothed value jumps at once")
    }

    func testZeroTimeConstantIsUnsmoothed() {
        var meter = LevelMeter(periodSeconds: 0.01, timeConstant: 0)
        run(&meter, Signal.sine(amplitude: 0.1, count: 480))
        XCTAssertEqual(meter.smoothedDBFS, meter.lastRMSDBFS, accuracy: 1e-5)
    }

    func testClipCountAccumulatesAndResets() {
        var meter = LevelMeter(periodSeconds: 0.01)
        run(&meter, [0.5, 0.999, -1, 1.2, 0.998, .nan])
        XCTAssertEqual(meter.clipped, 3)
        XCTAssertEqual(meter.lastPeakDBFS, dBFS(fromLinear: 1.2), accuracy: 1e-4)
        run(&meter, [-0.9995])
        XCTAssertEqual(meter.clipped, 4)
        meter.reset()
        XCTAssertEqual(meter.clipped, 0)
        XCTAssertEqual(meter.smoothedDBFS, -100)
    }

    func testNaNDoesNotPoisonTheLevel() {
        var meter = LevelMeter(periodSeconds: 0.01)
        run(&meter, [.nan, .infinity, 0.5, -0.5])
        XCTAssertFalse(meter.lastRMSDBFS.isNaN)
        XCTAssertFalse(meter.smoothedDBFS.isNaN)
    }
}
