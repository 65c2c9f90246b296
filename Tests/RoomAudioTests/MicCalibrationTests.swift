// The array's mic calibration (array_beam.h, calibrate): real MEMS mics differ in sensitivity by up
// to ±1 dB, and a beam built on the mics' small differences loses what it is for unless every mic
// is brought to mic 0's level (what that costs a listener: `FARFIELD_MIC_GAINS_DB="1 -1 0.5"
// scripts/bench farfield`, docs/benchmarks.md). Offline through the processor with every stage but
// the array off, in a room whose noise comes from all around (plane waves from six directions:
// the same power at every mic).
import Foundation
@testable import RoomAudio
import RoomBase
import RoomCaptureChain
import XCTest

final class MicCalibrationTests: XCTestCase {
    static let rate = 48000, block = 480
    /// Mics 1-3 as off as real ones are (mic 0 is the reference).
    static let sensitivityDB: [Float] = [0, 1, -1, 0.5]

    /// `seconds` of noise from six directions around the board, each mic scaled by `gainsDB`.
    static func roomNoise(seconds: Double, gainsDB: [Float], level: Float = 0.02) -> [[Float]] {
        let count = Int(seconds * Double(rate))
        var mics = [[Float]](repeating: [Float](repeating: 0, count: count), count: 4)
        for (i, azimuth) in [10.0, 70, 130, 190, 250, 310].enumerated() {
            var noise = TalkerLocatorTests.Noise(state: 0x5EED + UInt64(i))
            let source = (0..<count).map { _ in noise.next() * level }
            let wave = TalkerLocatorTests.planeWave(source, azimuth: azimuth)
            for m in 0..<4 { for n in 0..<count { mics[m][n] += wave[m][n] } }
        }
        for m in 0..<4 {
            let g = Float(pow(10, Double(gainsDB[m]) / 20))
            for n in 0..<count { mics[m][n] *= g }
        }
        return mics
    }

    static func corrections(_ apm: AudioProcessor) -> [Float] {
        var db = [Float](repeating: .nan, count: 8)
        let n = db.withUnsafeMutableBufferPointer { apm.micCorrectionsDB(into: $0) }
        return Array(db[0..<n])
    }

    func testMicsAreBroughtToMicZerosSensitivityWithinASecond() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertEqual(Self.corrections(apm), [0, 0, 0, 0], "nothing measured yet")
        _ = apm.processOffline(mics: Self.roomNoise(seconds: 1, gainsDB: Self.sensitivityDB), block: Self.block)
        let got = Self.corrections(apm)
        XCTAssertEqual(got.count, 4)
        for m in 0..<4 {
            // (0.15: the test's plane waves are delayed by windowed-sinc interpolation, whose gain
            // differs by a few hundredths of a dB between the mics' fractional delays)
            XCTAssertEqual(got[m], -Self.sensitivityDB[m], accuracy: 0.15, "mic \(m): correction \(got)")
        }
    }

    /// While the far end plays, the speaker's echo is in the mics, and a speaker off the array's
    /// centre reaches each at a level of its own: nothing is measured then.
    func testNothingIsMeasuredWhileTheFarEndPlays() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        apm.steer(azimuthDegrees: 0, hasDirection: false, farEndActive: true)
        _ = apm.processOffline(mics: Self.roomNoise(seconds: 1, gainsDB: Self.sensitivityDB), block: Self.block) { _ in
            apm.steer(azimuthDegrees: 0, hasDirection: false, farEndActive: true)
        }
        XCTAssertEqual(Self.corrections(apm), [0, 0, 0, 0])
    }

    /// A mic far more off than a tolerance (a fault the self-test reports) is corrected by 6 dB at
    /// most, not amplified without bound.
    func testACorrectionIsAtMostSixDecibels() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        _ = apm.processOffline(mics: Self.roomNoise(seconds: 1, gainsDB: [0, -15, 0, 0]), block: Self.block)
        XCTAssertEqual(Self.corrections(apm)[1], 6, accuracy: 0.01)
    }
}
