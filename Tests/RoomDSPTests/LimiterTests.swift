import Foundation
import RoomDSP
import XCTest

final class LimiterTests: XCTestCase {
    func testOverloadedSineNeverExceedsTheCeiling() {
        var limiter = Limiter(sampleRate: 48000, thresholdDBFS: -1)
        let ceiling = linear(fromDB: -1)
        var worst: Float = 0
        // +12 dB over full scale, one second in 10 ms periods, at two frequencies.
        for (period, frequency) in (0..<100).map({ ($0, $0 < 50 ? 100.0 : 3000.0) }) {
            var block = Signal.sine(amplitude: linear(fromDB: 12), frequency: frequency, count: 480, phase: period * 480)
            block.withUnsafeMutableBufferPointer { limiter.process($0) }
            for x in block { worst = max(worst, x.magnitude) }
        }
        XCTAssertLessThanOrEqual(worst, ceiling)
        XCTAssertGreaterThan(worst, ceiling * 0.99, "the limiter should use the headroom, not squash everything")
        XCTAssertLessThan(limiter.gain, 0.3)
    }

    func testQuietSignalPassesBitForBit() {
        var limiter = Limiter(sampleRate: 48000)
        let quiet = Signal.sine(amplitude: 0.5, count: 4800)
        var block = quiet
        block.withUnsafeMutableBufferPointer { limiter.process($0) }
        XCTAssertEqual(block, quiet)
        XCTAssertEqual(limiter.gain, 1)
    }

    func testReleaseRecoversInAboutTheReleaseTime() {
        var limiter = Limiter(sampleRate: 48000, thresholdDBFS: -1, releaseSeconds: 0.05)
        var loud: [Float] = [4]                       // one spike: gain drops to ceiling/4
        loud.withUnsafeMutableBufferPointer { limiter.process($0) }
        let dropped = limiter.gain
        XCTAssertEqual(dropped, linear(fromDB: -1) / 4, accuracy: 1e-6)
        var quiet = [Float](repeating: 0.1, count: 2400)   // 50 ms
        quiet.withUnsafeMutableBufferPointer { limiter.process($0) }
        // One time constant: 63 % of the way back to 1.
        XCTAssertEqual(limiter.gain, 1 - (1 - dropped) * Float(exp(-1.0)), accuracy: 0.01)
        var more = [Float](repeating: 0.1, count: 48000)
        more.withUnsafeMutableBufferPointer { limiter.process($0) }
        XCTAssertEqual(limiter.gain, 1, "fully recovered after a second")
        XCTAssertEqual(more.last, 0.1)
    }

    func testNonFiniteInputBecomesSilence() {
        var limiter = Limiter(sampleRate: 16000)
        var block: [Float] = [.nan, .infinity, -.infinity, 0.2]
        block.withUnsafeMutableBufferPointer { limiter.process($0) }
        XCTAssertEqual(block, [0, 0, 0, 0.2])
    }

    func testResetRestoresUnityGain() {
        var limiter = Limiter(sampleRate: 16000)
        var block: [Float] = [10]
        block.withUnsafeMutableBufferPointer { limiter.process($0) }
        XCTAssertLessThan(limiter.gain, 0.1)
        limiter.reset()
        XCTAssertEqual(limiter.gain, 1)
    }
}
