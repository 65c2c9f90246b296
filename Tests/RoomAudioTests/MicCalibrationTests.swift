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

    /// 2 s of noise from six directions around the board (made once: the windowed-sinc delays
    /// are most of these tests' time), the same power at every mic.
    static let matchedRoomNoise: [[Float]] = {
        let count = 2 * rate
        var mics = [[Float]](repeating: [Float](repeating: 0, count: count), count: 4)
        for (i, azimuth) in [10.0, 70, 130, 190, 250, 310].enumerated() {
            var noise = TalkerLocatorTests.Noise(state: 0x5EED + UInt64(i))
            let source = (0..<count).map { _ in noise.next() * 0.02 }
            let wave = TalkerLocatorTests.planeWave(source, azimuth: azimuth)
            for m in 0..<4 { for n in 0..<count { mics[m][n] += wave[m][n] } }
        }
        return mics
    }()

    /// The room's noise with each mic scaled by `gainsDB`.
    static func roomNoise(gainsDB: [Float]) -> [[Float]] {
        (0..<4).map { m in
            let g = Float(pow(10, Double(gainsDB[m]) / 20))
            return matchedRoomNoise[m].map { $0 * g }
        }
    }

    static func corrections(_ apm: AudioProcessor) -> [Float] {
        var db = [Float](repeating: .nan, count: 8)
        let n = db.withUnsafeMutableBufferPointer { apm.micCorrectionsDB(into: $0) }
        return Array(db[0..<n])
    }

    func testMicsAreBroughtToMicZerosSensitivity() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertEqual(Self.corrections(apm), [0, 0, 0, 0], "nothing measured yet")
        _ = apm.processOffline(mics: Self.roomNoise(gainsDB: Self.sensitivityDB), block: Self.block)
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
        _ = apm.processOffline(mics: Self.roomNoise(gainsDB: Self.sensitivityDB), block: Self.block) { _ in
            apm.steer(azimuthDegrees: 0, hasDirection: false, farEndActive: true)
        }
        XCTAssertEqual(Self.corrections(apm), [0, 0, 0, 0])
    }

    /// A mic far more off than a tolerance (a fault the self-test reports) is corrected by 6 dB at
    /// most, not amplified without bound.
    func testACorrectionIsAtMostSixDecibels() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        _ = apm.processOffline(mics: Self.roomNoise(gainsDB: [0, -15, 0, 0]), block: Self.block)
        XCTAssertEqual(Self.corrections(apm)[1], 6, accuracy: 0.01)
    }

    /// Corrections an earlier run measured (roomd keeps them in its state directory) apply from
    /// the first block: in a room where the far end never pauses, nothing is measured, and the
    /// beam still sends what matched mics give.
    func testAStartFromAnEarlierRunAppliesWhileNothingCanBeMeasured() throws {
        let matched = try ArrayChainTests.arrayOnlyProcessor()
        let started = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertTrue(started.startMicCorrections(db: Self.sensitivityDB.map { -$0 }))
        XCTAssertEqual(Self.corrections(started).map { ($0 * 100).rounded() / 100 }, [0, -1, 1, -0.5], "the start, before any block")
        func run(_ apm: AudioProcessor, _ gainsDB: [Float]) -> [Float] {
            apm.steer(azimuthDegrees: 40, hasDirection: true, farEndActive: true)
            return apm.processOffline(mics: Self.roomNoise(gainsDB: gainsDB), block: Self.block) { _ in
                apm.steer(azimuthDegrees: 40, hasDirection: true, farEndActive: true)
            }
        }
        let reference = run(matched, [0, 0, 0, 0])
        let output = run(started, Self.sensitivityDB)
        XCTAssertEqual(started.micCalibrationBlocks, 0, "the far end played throughout: nothing measured")
        XCTAssertEqual(Self.corrections(started).map { ($0 * 100).rounded() / 100 }, [0, -1, 1, -0.5])
        let d = (0..<output.count).map { output[$0] - reference[$0] }
        let difference = ArrayChainTests.dB(ArrayChainTests.power(d), over: ArrayChainTests.power(reference, from: 0))
        XCTAssertLessThan(difference, -30, "the started beam's output differs from matched mics'")
    }

    /// The start is where the measurement begins, not a fixed answer: a start 1 dB off (a state
    /// directory carried to another board of the same kind) moves toward what this run measures,
    /// weighed as 10 s of the room's noise against the 2 s heard here.
    func testAStartIsRefinedByWhatThisRunMeasures() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertTrue(apm.startMicCorrections(db: [0, 0, 1, -0.5]))   // mic 1 1 dB off (truth: −1)
        _ = apm.processOffline(mics: Self.roomNoise(gainsDB: Self.sensitivityDB), block: Self.block)
        XCTAssertGreaterThan(apm.micCalibrationBlocks, 100)
        let got = Self.corrections(apm)
        print("a start 1 dB off on mic 1, after \(apm.micCalibrationBlocks) blocks measured: \(got)")
        XCTAssertLessThan(got[1], -0.08, "mic 1 did not move toward its measured −1 dB: \(got)")
        XCTAssertGreaterThan(got[1], -0.6, "10 s of an earlier run outweigh 2 s of this one: \(got)")
        XCTAssertEqual(got[2], 1, accuracy: 0.1, "a right start stays: \(got)")
    }

    /// A start that does not fit is refused and changes nothing.
    func testAStartForAnotherArrayIsRefused() throws {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertFalse(apm.startMicCorrections(db: [0, 1, 2]), "three values for four mics")
        XCTAssertFalse(apm.startMicCorrections(db: [0, .nan, 0, 0]))
        XCTAssertEqual(Self.corrections(apm), [0, 0, 0, 0])
        XCTAssertTrue(apm.startMicCorrections(db: [0, 9, -9, 0]))
        XCTAssertEqual(Self.corrections(apm)[1], 6, accuracy: 0.01, "beyond ±6 dB is taken as 6")
        setenv("ROOMD_MIC_CALIBRATION", "off", 1)
        defer { unsetenv("ROOMD_MIC_CALIBRATION") }
        let off = try ArrayChainTests.arrayOnlyProcessor()
        XCTAssertFalse(off.startMicCorrections(db: [0, 1, -1, 0.5]), "calibration off: the mics as they come")
        XCTAssertEqual(Self.corrections(off), [0, 0, 0, 0])
    }

    /// The gains are applied, not only measured: with the mics as off as real ones, the beam sends
    /// what it sends with matched mics once they are measured (and something else without them).
    func testTheBeamSendsWhatMatchedMicsGive() throws {
        func beam(_ gainsDB: [Float], calibrate: Bool) throws -> [Float] {
            if !calibrate { setenv("ROOMD_MIC_CALIBRATION", "off", 1) }
            defer { unsetenv("ROOMD_MIC_CALIBRATION") }
            let apm = try ArrayChainTests.arrayOnlyProcessor()
            apm.steer(azimuthDegrees: 40, hasDirection: true)
            return apm.processOffline(mics: Self.roomNoise(gainsDB: gainsDB), block: Self.block)
        }
        let matched = try beam([0, 0, 0, 0], calibrate: true)
        let from = Self.rate   // 1 s: every gain measured long before
        func differenceDB(_ x: [Float]) -> Double {
            let d = (from..<x.count).map { x[$0] - matched[$0] }
            return ArrayChainTests.dB(ArrayChainTests.power(d), over: ArrayChainTests.power(matched, from: from))
        }
        let calibrated = differenceDB(try beam(Self.sensitivityDB, calibrate: true))
        let asTheyCome = differenceDB(try beam(Self.sensitivityDB, calibrate: false))
        print("beam output against matched mics' (dB): calibrated \(calibrated), not calibrated \(asTheyCome)")
        XCTAssertLessThan(calibrated, -30, "the calibrated beam's output differs from matched mics'")
        XCTAssertGreaterThan(asTheyCome, calibrated + 10, "without calibration the mismatch must show")
    }
}
