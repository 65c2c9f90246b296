import Foundation
@testable import RoomBase
@testable import RoomDSP
import XCTest

/// The array's checks of `roomctl selftest` (SelfTestArray.swift) on synthetic recordings whose
/// answers are known by construction: the sweep reaching each mic at a whole-sample delay and
/// gain, each mic with its own noise.
private enum ArrayFixture {
    /// board/sim's array: 4 mics on a 32 mm circle, mic0 on +x, counter-clockwise.
    static let simMics = [Point3(x: 0.032, y: 0, z: 0), Point3(x: 0, y: 0.032, z: 0),
                          Point3(x: -0.032, y: 0, z: 0), Point3(x: 0, y: -0.032, z: 0)]
    static let speaker = Point3(x: 0.5, y: 0, z: 0)

    /// Whole-sample delays from `speaker` to each of `mics` at `rate`, plus `base`.
    static func delays(_ mics: [Point3], speaker: Point3, rate: Int, base: Int = 100) -> [Int] {
        let arrival = mics.map { $0.distance(to: speaker) / 343 * Double(rate) }
        let first = arrival.min()!
        return arrival.map { base + Int(($0 - first).rounded()) }
    }

    /// `delays[i]`, `gains[i]` per mic; noise of RMS `noiseRMS` (−80 dBFS) on every mic,
    /// independent between mics.
    static func recording(rate: Int = 48_000, delays: [Int], gains: [Float], noiseRMS: Float = 1e-4,
                          seed: UInt64 = 0xA77A) -> SelfTestRecording {
        let played = SelfTestSignal.sweep(rate: rate, seconds: 1, levelDBFS: -6)
        let captureCount = played.count + rate / 10
        var rng = SplitMix64(seed: seed)
        func noise() -> Float { Float((2 * rng.unit() - 1) * Double(noiseRMS) * 3.0.squareRoot()) }
        var quiet: [[Float]] = [], signal: [[Float]] = []
        for (delay, gain) in zip(delays, gains) {
            quiet.append((0..<rate / 2).map { _ in noise() })
            signal.append((0..<captureCount).map { n in
                let source = n - delay
                return (source >= 0 && source < played.count ? gain * played[source] : 0) + noise()
            })
        }
        return SelfTestRecording(rate: rate, quietMics: quiet, played: played, signalMics: signal,
                                 cleaned: signal[0].map { $0 * 0.01 })
    }

    static func thresholds() -> SelfTestThresholds { SelfTestThresholds(maximumDelayMilliseconds: 50) }
}

/// A stand-in beam: `gain` × the mean of the mics, `latency` samples late (a fixed number, so
/// the figures it gives are known); it remembers the directions it was steered at.
private final class MeanBeam: SelfTestSteerableBeam {
    let gain: Float
    let latency: Int
    var steered: [Double] = []
    init(gain: Float, latency: Int) { self.gain = gain; self.latency = latency }
    func steer(_ azimuthDegrees: Double) { steered.append(azimuthDegrees) }
    func process(_ planes: [[Float]]) -> [Float] {
        guard let count = planes.first?.count, planes.allSatisfy({ $0.count == count }) else { return [] }
        var out = [Float](repeating: 0, count: count + latency)
        for plane in planes { for (n, x) in plane.enumerated() { out[n + latency] += gain * x / Float(planes.count) } }
        return out
    }
}

private struct MeanBeamMaker: SelfTestBeam {
    var gain: Float = 1
    var latency = 0
    var fails = false
    func make() -> (any SelfTestSteerableBeam)? { fails ? nil : MeanBeam(gain: gain, latency: latency) }
}

final class SelfTestArrayTests: XCTestCase {
    private let geometry = SelfTestArrayGeometry(micPositions: ArrayFixture.simMics, speaker: ArrayFixture.speaker)

    private func analyze(_ r: SelfTestRecording, _ g: SelfTestArrayGeometry?, beam: (any SelfTestBeam)? = nil) -> SelfTestReport {
        SelfTestAnalysis.analyze(r, thresholds: ArrayFixture.thresholds(), array: g, beam: beam)
    }

    private func delays(_ report: SelfTestReport, file: StaticString = #filePath, line: UInt = #line) throws -> SelfTestArrayDelays {
        guard case .checked(let d)? = report.array?.geometry else {
            XCTFail("geometry not checked: \(String(describing: report.array?.geometry))", file: file, line: line)
            throw XCTSkip("no delays")
        }
        return d
    }

    // MARK: - Correct wiring

    func testDelaysThatFitTheGeometryPass() throws {
        let d = ArrayFixture.delays(ArrayFixture.simMics, speaker: ArrayFixture.speaker, rate: 48_000)
        XCTAssertEqual(d, [100, 105, 109, 105], "0, 4.6, 9.0, 4.6 samples from a speaker 0.5 m out on +x")
        let report = analyze(ArrayFixture.recording(delays: d, gains: [0.1, 0.097, 0.094, 0.097]), geometry)
        XCTAssertEqual(report.problems, [])
        let array = try XCTUnwrap(report.array)
        XCTAssertEqual(array.deadMics, [])
        for v in array.levelVsMedianDB { XCTAssertEqual(v, 0, accuracy: 0.6) }
        let fit = try delays(report)
        XCTAssertEqual(fit.referenceMic, 0)
        XCTAssertEqual(fit.misfits, [])
        XCTAssertNil(fit.swapped)
        XCTAssertEqual(fit.toleranceMicroseconds, 0.25 * 0.064 / 343 * 1e6, accuracy: 0.01, "a quarter of 64 mm of travel")
        // Whole-sample delays come back as such (the parabola adds nothing to a symmetric peak).
        for (i, measured) in fit.measuredMicroseconds.enumerated() {
            XCTAssertEqual(try XCTUnwrap(measured), Double(d[i] - d[0]) / 48_000 * 1e6, accuracy: 2, "mic \(i)")
        }
        XCTAssertEqual(fit.expectedMicroseconds[2], 0.064 / 343 * 1e6, accuracy: 0.01)
        XCTAssertNil(array.gain, "no beam given: no noise gain")
    }

    func testEightMicsAt16kHzWithInvertedPolarity() throws {
        // A 35 mm circle of 8 at 16 kHz (0.6 samples between neighbours' delays at most), a
        // speaker 0.3 m away at 30°, mic 5 wired with inverted polarity: still fits.
        let mics = (0..<8).map { k in
            Point3(x: 0.035 * cos(Double(k) * .pi / 4), y: 0.035 * sin(Double(k) * .pi / 4), z: 0)
        }
        let speaker = Point3(x: 0.3 * cos(.pi / 6), y: 0.3 * sin(.pi / 6), z: -0.02)
        let d = ArrayFixture.delays(mics, speaker: speaker, rate: 16_000)
        let gains: [Float] = (0..<8).map { $0 == 5 ? -0.1 : 0.1 }
        let report = analyze(ArrayFixture.recording(rate: 16_000, delays: d, gains: gains),
                             SelfTestArrayGeometry(micPositions: mics, speaker: speaker))
        XCTAssertEqual(report.problems, [])
        XCTAssertEqual(try delays(report).misfits, [])
        XCTAssertEqual(try delays(report).toleranceMicroseconds, 1e6 / 16_000, accuracy: 1e-6,
                       "a quarter of 70 mm is less than one sample at 16 kHz: one sample")
    }

    func testSubSampleDelayByParabolicInterpolation() {
        // A band-limited signal (sines up to 0.3 × rate) evaluated at t − delay: fractional delays.
        var rng = SplitMix64(seed: 3)
        let tones = (0..<40).map { _ in (f: 200 + rng.unit() * 14_000, phase: rng.unit() * 2 * .pi) }
        func signal(_ delay: Double) -> [Double] {
            (0..<9600).map { n in tones.reduce(0.0) { $0 + sin(2 * .pi * $1.f * (Double(n) - delay) / 48_000 + $1.phase) } }
        }
        let reference = signal(0)
        for delay in [-6.7, -2.25, 0.4, 3.5, 8.9] {
            let lag = SelfTestAnalysis.interMicLag(reference, signal(delay), window: 0..<9600, maxLag: 17, minimumCorrelation: 0.3)
            XCTAssertEqual(try XCTUnwrap(lag), delay, accuracy: 0.15, "delay \(delay)")
        }
        // Unrelated sounds give no delay; nor does silence.
        XCTAssertNil(SelfTestAnalysis.interMicLag(reference, (0..<9600).map { _ in rng.unit() - 0.5 }, window: 0..<9600,
                                                  maxLag: 17, minimumCorrelation: 0.3))
        XCTAssertNil(SelfTestAnalysis.interMicLag(reference, [Double](repeating: 0, count: 9600), window: 0..<9600,
                                                  maxLag: 17, minimumCorrelation: 0.3))
        XCTAssertNil(SelfTestAnalysis.interMicLag(reference, signal(1), window: 0..<20, maxLag: 17, minimumCorrelation: 0.3),
                     "a window shorter than the lags searched")
    }

    // MARK: - Wrong wiring

    func testSwappedOppositeMicsAreNamed() throws {
        // Channels 0 and 2 carry each other's mic: mic 2's 9 samples arrive on channel 0.
        let report = analyze(ArrayFixture.recording(delays: [109, 105, 100, 105], gains: [0.1, 0.1, 0.1, 0.1]), geometry)
        let fit = try delays(report)
        XCTAssertEqual(fit.misfits, [0, 2])
        XCTAssertEqual(fit.swapped, [0, 2])
        XCTAssertEqual(report.problems.count, 1, "\(report.problems)")
        guard report.problems.count == 1 else { return }
        XCTAssertTrue(report.problems[0].hasPrefix("mic 0 and mic 2 do not fit the board's geometry: the speaker's sound reaches them "),
                      report.problems[0])
        XCTAssertTrue(report.problems[0].contains(" µs off the delays array.speaker (0.5 0.0 0.0) predicts (tolerance ±47 µs)"), report.problems[0])
        XCTAssertTrue(report.problems[0].hasSuffix("mic 0 and mic 2 look swapped (wired in the wrong order?)"), report.problems[0])
        XCTAssertFalse(report.passed)
        for r in fit.residualMicroseconds.compactMap({ $0 }) where r.magnitude > fit.toleranceMicroseconds {
            XCTAssertGreaterThan(r.magnitude, 150, "off by about mic 0 to mic 2's 187 µs")
        }
    }

    func testSwappedNeighboursAreNamed() throws {
        // Channels 1 and 2 exchanged: 4.6 against 9 samples, 92 µs, twice the tolerance.
        let report = analyze(ArrayFixture.recording(delays: [100, 109, 105, 105], gains: [0.1, 0.1, 0.1, 0.1]), geometry)
        let fit = try delays(report)
        XCTAssertEqual(fit.swapped, [1, 2])
        XCTAssertTrue(report.problems.last?.hasSuffix("mic 1 and mic 2 look swapped (wired in the wrong order?)") ?? false, "\(report.problems)")
    }

    func testARotatedChannelOrderIsNotCalledASwap() throws {
        // Channels 0 → 1 → 2 → 3 → 0 (every mic one place on): no single pair explains it.
        let sim = [100, 105, 109, 105]
        let report = analyze(ArrayFixture.recording(delays: [sim[1], sim[2], sim[3], sim[0]], gains: [0.1, 0.1, 0.1, 0.1]), geometry)
        let fit = try delays(report)
        XCTAssertFalse(fit.misfits.isEmpty)
        guard !fit.misfits.isEmpty else { return }
        XCTAssertNil(fit.swapped)
        XCTAssertTrue(report.problems.last?.hasSuffix("wired in the wrong order, or is array.speaker wrong?") ?? false, "\(report.problems)")
        XCTAssertTrue(report.problems.last?.hasPrefix("mic \(fit.misfits[0])") ?? false, "\(report.problems)")
    }

    func testMicsTheSpeakerCannotTellApartAreNotBlamed() throws {
        // Mics 1 and 3 are the same distance from a speaker on +x: exchanged, nothing changes,
        // and nothing is claimed (docs/control-api.md says so).
        let report = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.09, 0.1, 0.11]), geometry)
        XCTAssertEqual(try delays(report).misfits, [])
    }

    func testWithoutTheSpeakerKeyTheGeometryIsNotChecked() throws {
        let report = analyze(ArrayFixture.recording(delays: [109, 105, 100, 105], gains: [0.1, 0.1, 0.1, 0.1]),
                             SelfTestArrayGeometry(micPositions: ArrayFixture.simMics))
        XCTAssertEqual(report.array?.geometry, .notChecked("[array] speaker not set"))
        XCTAssertEqual(report.problems, [], "not checked is not a failure")
        let mismatched = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.1, 0.1]),
                                 SelfTestArrayGeometry(micPositions: Array(ArrayFixture.simMics.prefix(3)), speaker: ArrayFixture.speaker))
        XCTAssertEqual(mismatched.array?.geometry, .notChecked("the board lists 3 mic positions for 4 channels"))
    }

    // MARK: - Dead mics

    func testADeadMicIsNamedAgainstTheMedianAndLeftOutOfTheGeometry() throws {
        // Mic 2 hears only its own −80 dBFS noise: 51 dB below the others' sweep.
        let report = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.097, 0, 0.097]), geometry)
        let array = try XCTUnwrap(report.array)
        XCTAssertEqual(array.deadMics.map(\.index), [2])
        guard array.deadMics.count == 1 else { return }
        XCTAssertEqual(array.deadMics[0].kind, .quiet)
        XCTAssertGreaterThan(array.deadMics[0].belowMedianDB, 40)
        XCTAssertEqual(array.levelVsMedianDB[2], -array.deadMics[0].belowMedianDB, accuracy: 1e-9)
        XCTAssertEqual(report.problems.count, 1, "the dead line replaces 'no signal': \(report.problems)")
        guard report.problems.count == 1 else { return }
        XCTAssertTrue(report.problems[0].hasPrefix("mic 2: dead or blocked — 51 dB below"), report.problems[0])
        XCTAssertTrue(report.problems[0].contains("dB below the median of the mics while the test signal played (-80 vs -29 dBFS)"),
                      report.problems[0])
        let fit = try delays(report)
        XCTAssertNil(fit.measuredMicroseconds[2])
        XCTAssertEqual(fit.misfits, [], "the live mics still fit")
    }

    func testADeadMicZeroIsReplacedAsTheReference() throws {
        let report = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0, 0.1, 0.1, 0.1]), geometry,
                             beam: MeanBeamMaker())
        XCTAssertEqual(report.array?.deadMics.map(\.index), [0])
        let fit = try delays(report)
        XCTAssertEqual(fit.referenceMic, 1)
        XCTAssertEqual(fit.misfits, [])
        XCTAssertEqual(fit.measuredMicroseconds[3] ?? .nan, 0, accuracy: 2, "mics 1 and 3 hear the speaker together")
        XCTAssertEqual(report.array?.gain?.referenceMic, 1)
    }

    func testDigitalSilenceAndAStuckConverter() throws {
        var r = ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.1, 0.1])
        r.quietMics[1] = r.quietMics[1].map { _ in 0 }
        r.signalMics[1] = r.signalMics[1].map { _ in 0 }
        r.quietMics[3] = r.quietMics[3].map { _ in 0.25 }
        r.signalMics[3] = r.signalMics[3].map { _ in 0.25 }
        let report = analyze(r, geometry)
        XCTAssertEqual(report.array?.deadMics.map(\.kind), [.silent, .constant(0.25)])
        XCTAssertEqual(report.problems, ["mic 1: dead — digital silence (every sample 0)",
                                         "mic 3: dead — stuck at 0.25 (every sample the same)"])
    }

    func testAQuieterMicWithinTheMarginIsNotDead() throws {
        // 12 dB low: a weak capsule or a gain setting, not a dead mic.
        let report = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.025, 0.1]), geometry)
        XCTAssertEqual(report.array?.deadMics, [])
        XCTAssertEqual(report.array?.levelVsMedianDB[2] ?? 0, -12, accuracy: 0.5)
        XCTAssertEqual(report.problems, [])
    }

    func testTwoMicsOneDead() throws {
        // With two mics the median is the louder one: the dead one is named, not the live one.
        let mics = Array(ArrayFixture.simMics.prefix(2))
        let report = analyze(ArrayFixture.recording(delays: [100, 105], gains: [0, 0.1]),
                             SelfTestArrayGeometry(micPositions: mics, speaker: ArrayFixture.speaker))
        XCTAssertEqual(report.array?.deadMics.map(\.index), [0])
        XCTAssertEqual(report.array?.geometry, .notChecked("fewer than 2 live mics"))
    }

    // MARK: - Noise gain

    func testNoiseGainAgainstMicZero() throws {
        // The mean of 4 mics with independent noise: a quarter of the power, −6 dB, in every
        // direction; the speaker's sweep arrives at 4 different delays, so less than all of it adds up.
        let report = analyze(ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.1, 0.1]), geometry,
                             beam: MeanBeamMaker(latency: 96))
        let gain = try XCTUnwrap(report.array?.gain)
        XCTAssertEqual(gain.azimuthsDegrees, [0, 45, 90, 135, 180, 225, 270, 315])
        XCTAssertEqual(gain.perDirectionDB.count, 8)
        XCTAssertEqual(gain.noiseGainDB, -6.02, accuracy: 0.3)
        XCTAssertEqual(try XCTUnwrap(gain.speakerAzimuthDegrees), 0, accuracy: 1e-9)
        let speaker = try XCTUnwrap(gain.speakerGainDB)
        XCTAssertLessThan(speaker, 0)
        XCTAssertGreaterThan(speaker, -6, "the sweep is coherent across the mics")

        // A beam that halves mic 0 alone (all four mics the same): exactly −6.02 dB.
        var same = ArrayFixture.recording(delays: [100, 100, 100, 100], gains: [0.1, 0.1, 0.1, 0.1])
        same.quietMics = Array(repeating: same.quietMics[0], count: 4)
        same.signalMics = Array(repeating: same.signalMics[0], count: 4)
        let half = try XCTUnwrap(analyze(same, geometry, beam: MeanBeamMaker(gain: 0.5, latency: 7)).array?.gain)
        for g in half.perDirectionDB + [half.noiseGainDB, half.speakerGainDB ?? 0] { XCTAssertEqual(g, -6.02, accuracy: 0.01) }

        // A beam that cannot be built: no figure, no crash; without a speaker, no speaker gain.
        XCTAssertNil(analyze(same, geometry, beam: MeanBeamMaker(fails: true)).array?.gain)
        let noSpeaker = try XCTUnwrap(analyze(same, SelfTestArrayGeometry(micPositions: ArrayFixture.simMics), beam: MeanBeamMaker()).array?.gain)
        XCTAssertNil(noSpeaker.speakerGainDB)
        XCTAssertNil(noSpeaker.speakerAzimuthDegrees)
    }

    // MARK: - Boards without an array, bad input

    func testOneMicOrNoArrayChangesNothing() {
        let r = ArrayFixture.recording(delays: [100], gains: [0.1])
        let plain = SelfTestAnalysis.analyze(r, thresholds: ArrayFixture.thresholds())
        XCTAssertNil(plain.array)
        let one = analyze(r, SelfTestArrayGeometry(micPositions: [Point3(x: 0, y: 0, z: 0)], speaker: ArrayFixture.speaker), beam: MeanBeamMaker())
        XCTAssertNil(one.array, "one mic is not an array")
        XCTAssertEqual(one, plain)
        let four = ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.1, 0.1])
        XCTAssertNil(SelfTestAnalysis.analyze(four, thresholds: ArrayFixture.thresholds()).array, "no geometry given: as before")
    }

    func testBadInputReportsInsteadOfCrashing() {
        var r = ArrayFixture.recording(delays: [100, 105, 109, 105], gains: [0.1, 0.1, 0.1, 0.1])
        // Unequal quiet captures: the beam cannot run, the rest goes on.
        r.quietMics[2] = Array(r.quietMics[2].prefix(100))
        r.signalMics[1][5000] = .nan
        r.signalMics[3][6000] = .infinity
        let report = analyze(r, geometry, beam: MeanBeamMaker())
        XCTAssertNotNil(report.array)
        XCTAssertEqual(report.array?.deadMics, [])
        XCTAssertTrue(report.array?.levelVsMedianDB.allSatisfy(\.isFinite) ?? false)
        // Silence everywhere: every mic is dead and nothing is measured, without a trap.
        let zeros = [Float](repeating: 0, count: r.signalMics[0].count)
        let silent = SelfTestRecording(rate: 48_000, quietMics: Array(repeating: [0, 0], count: 4), played: r.played,
                                       signalMics: Array(repeating: zeros, count: 4), cleaned: zeros)
        let dead = analyze(silent, geometry, beam: MeanBeamMaker())
        XCTAssertEqual(dead.array?.deadMics.count, 4)
        XCTAssertEqual(dead.array?.geometry, .notChecked("fewer than 2 live mics"))
        XCTAssertNil(dead.array?.gain)
        // A recording the analysis refuses as a whole has no array part either.
        let broken = analyze(SelfTestRecording(rate: 0, quietMics: [], played: [], signalMics: [], cleaned: []), geometry, beam: MeanBeamMaker())
        XCTAssertNil(broken.array)
        XCTAssertFalse(broken.passed)
    }
}
