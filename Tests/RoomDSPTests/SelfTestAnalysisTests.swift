import Foundation
@testable import RoomBase
@testable import RoomDSP
import XCTest

/// One simulated mic: the sweep delayed by `delay` samples and scaled by `gain` (negative =
/// inverted polarity), plus uniform noise of RMS `noiseRMS`, clipped to full scale as a
/// converter would.
private struct SimulatedMic {
    var delay: Int
    var gain: Float
    var noiseRMS: Float = 1e-4   // -80 dBFS
}

/// Builds recordings whose right answers are known by construction.
private enum SelfTestFixture {
    static let sweepLevelDBFS: Float = -6

    static func recording(rate: Int, mics: [SimulatedMic], sweepSeconds: Double = 1.5,
                          maxDelayMilliseconds: Double = 500, seed: UInt64 = 0x5E1F) -> SelfTestRecording {
        let played = SelfTestSignal.sweep(rate: rate, seconds: sweepSeconds, levelDBFS: sweepLevelDBFS)
        let captureCount = played.count + Int(maxDelayMilliseconds * Double(rate) / 1000)
        var rng = SplitMix64(seed: seed)
        var quiet: [[Float]] = []
        var signal: [[Float]] = []
        for mic in mics {
            quiet.append((0..<rate / 2).map { _ in noise(mic.noiseRMS, &rng) })
            signal.append((0..<captureCount).map { n in
                let source = n - mic.delay
                let echo = source >= 0 && source < played.count ? mic.gain * played[source] : 0
                return max(-1, min(1, echo + noise(mic.noiseRMS, &rng)))
            })
        }
        // By default the canceller takes 40 dB off mic 0.
        return SelfTestRecording(rate: rate, quietMics: quiet, played: played, signalMics: signal,
                                 cleaned: signal[0].map { $0 * 0.01 })
    }

    /// Uniform in ±rms·√3, which has exactly that RMS; cheaper than Gaussian in a debug build.
    static func noise(_ rms: Float, _ rng: inout SplitMix64) -> Float {
        Float((2 * rng.unit() - 1) * Double(rms) * 3.0.squareRoot())
    }

    /// The level a mic should report: the sweep's power scaled by the gain, plus the noise.
    static func expectedLevelDBFS(_ mic: SimulatedMic, played: [Float]) -> Double {
        let sweepPower = played.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(played.count)
        let gain = Double(mic.gain)
        let rms = Double(mic.noiseRMS)
        return 10 * log10(gain * gain * sweepPower + rms * rms)
    }
}

final class SelfTestAnalysisTests: XCTestCase {
    // MARK: - Building blocks

    func testFFTMatchesDirectDFT() {
        var rng = SplitMix64(seed: 42)
        for n in [1, 2, 4, 16, 64] {
            let xr = (0..<n).map { _ in rng.unit() * 2 - 1 }
            let xi = (0..<n).map { _ in rng.unit() * 2 - 1 }
            var re = xr
            var im = xi
            let fft = FFT(count: n)
            fft.forward(real: &re, imaginary: &im)
            for k in 0..<n {
                var sr = 0.0
                var si = 0.0
                for t in 0..<n {
                    let angle = -2 * Double.pi * Double(k * t) / Double(n)
                    sr += xr[t] * cos(angle) - xi[t] * sin(angle)
                    si += xr[t] * sin(angle) + xi[t] * cos(angle)
                }
                XCTAssertEqual(re[k], sr, accuracy: 1e-12, "n = \(n), k = \(k)")
                XCTAssertEqual(im[k], si, accuracy: 1e-12, "n = \(n), k = \(k)")
            }
            fft.inverse(real: &re, imaginary: &im)
            for t in 0..<n {
                XCTAssertEqual(re[t], xr[t], accuracy: 1e-14)
                XCTAssertEqual(im[t], xi[t], accuracy: 1e-14)
            }
        }
        XCTAssertEqual(FFT.size(atLeast: 0), 1)
        XCTAssertEqual(FFT.size(atLeast: 96_000), 131_072)
        XCTAssertEqual(FFT.size(atLeast: 32_768), 32_768)
    }

    func testSinCosMatchesFoundation() {
        var values: [Double] = [0, 1e-9, 0.5, -0.785, 1, .pi / 2, .pi, -.pi, 3, 2 * .pi, 10, -123.456, 7e4, -1.2e5]
        var rng = SplitMix64(seed: 7)
        values += (0..<200).map { _ in (rng.unit() * 2 - 1) * 50 }
        for x in values {
            let (s, c) = RoomMath.sinCos(x)
            // Near 1e5 rad the argument itself carries an error of one ulp (~1e-11).
            let tolerance = x.magnitude > 100 ? 1e-10 : 1e-15
            XCTAssertEqual(s, sin(x), accuracy: tolerance, "sin \(x)")
            XCTAssertEqual(c, cos(x), accuracy: tolerance, "cos \(x)")
        }
        XCTAssertTrue(RoomMath.sinCos(.infinity).sin.isNaN)
    }

    func testAtan2MatchesFoundation() {
        var points: [(Double, Double)] = [(0, 1), (1, 0), (0, -1), (-1, 0), (1, 1), (-1, -1), (1e-9, -1), (-0.5, 0.3), (3, -4), (0, 0)]
        var rng = SplitMix64(seed: 11)
        points += (0..<300).map { _ in ((rng.unit() * 2 - 1) * 10, (rng.unit() * 2 - 1) * 10) }
        for (y, x) in points {
            XCTAssertEqual(RoomMath.atan2(y, x), atan2(y, x), accuracy: 1e-14, "atan2(\(y), \(x))")
        }
        XCTAssertTrue(RoomMath.atan2(.nan, 1).isNaN)
    }

    func testSweepLevelFadesFrequenciesAndDeterminism() {
        for rate in [16_000, 48_000] {
            let sweep = SelfTestSignal.sweep(rate: rate, seconds: 1, levelDBFS: -6)
            XCTAssertEqual(sweep.count, rate)
            XCTAssertEqual(sweep, SelfTestSignal.sweep(rate: rate, seconds: 1, levelDBFS: -6), "deterministic")
            let peak = sweep.reduce(Float(0)) { max($0, $1.magnitude) }
            XCTAssertEqual(Double(20 * log10(peak)), -6, accuracy: 0.05, "rate \(rate)")
            XCTAssertEqual(sweep.first, 0, "the fade-in starts from silence")
            XCTAssertEqual(sweep.last, 0, "the fade-out ends in silence")

            // Zero crossings in a window ≈ 2 × the cycles the exponential sweep makes there.
            let f1 = SelfTestSignal.startFrequency
            let f2 = SelfTestSignal.endFrequencyFraction * Double(rate)
            func cycles(_ t: Double) -> Double { f1 / log(f2 / f1) * (pow(f2 / f1, t) - 1) }
            func crossings(_ from: Double, _ to: Double) -> Int {
                let a = Int(from * Double(rate))
                let b = Int(to * Double(rate))
                return (a + 1..<b).filter { (sweep[$0 - 1] < 0) != (sweep[$0] < 0) }.count
            }
            XCTAssertEqual(Double(crossings(0.1, 0.2)), 2 * (cycles(0.2) - cycles(0.1)), accuracy: 2, "low end, rate \(rate)")
            XCTAssertEqual(Double(crossings(0.9, 0.95)), 2 * (cycles(0.95) - cycles(0.9)), accuracy: 2, "high end, rate \(rate)")
        }
        XCTAssertEqual(SelfTestSignal.sweep(rate: 0, seconds: 1, levelDBFS: -6), [])
        XCTAssertEqual(SelfTestSignal.sweep(rate: 16_000, seconds: 0, levelDBFS: -6), [])
        XCTAssertEqual(SelfTestSignal.sweep(rate: 16_000, seconds: .nan, levelDBFS: -6), [])
        let loud = SelfTestSignal.sweep(rate: 16_000, seconds: 0.2, levelDBFS: 6)
        XCTAssertLessThanOrEqual(loud.reduce(Float(0)) { max($0, $1.magnitude) }, 1, "never beyond full scale")
    }

    func testFormatting() {
        XCTAssertEqual(fixedDecimalText(-91.6, 0), "-92")
        XCTAssertEqual(fixedDecimalText(41.25, 1), "41.3")
        XCTAssertEqual(fixedDecimalText(2, 1), "2.0")
        XCTAssertEqual(fixedDecimalText(-0.04, 1), "0.0", "no negative zero")
        XCTAssertEqual(fixedDecimalText(0.05, 2), "0.05")
        XCTAssertEqual(fixedDecimalText(-120, 0), "-120")
    }

    // MARK: - Healthy appliances

    func testDelaysLevelsAndNoiseFloorAt48kHz() throws {
        let mics = [
            SimulatedMic(delay: 144, gain: 0.1),                        // 3.0 ms, -20 dB
            SimulatedMic(delay: 150, gain: 0.063, noiseRMS: 3e-4),      // 3.125 ms
            SimulatedMic(delay: 163, gain: 0.04),
            SimulatedMic(delay: 190, gain: 0.126, noiseRMS: 2e-5),      // 3.958 ms, -94 dBFS noise
        ]
        let recording = SelfTestFixture.recording(rate: 48_000, mics: mics)
        let report = SelfTestAnalysis.analyze(recording)
        XCTAssertEqual(report.problems, [])
        XCTAssertTrue(report.passed)
        XCTAssertEqual(report.mics.count, 4)
        for (m, mic) in zip(report.mics, mics) {
            XCTAssertEqual(try XCTUnwrap(m.delayMilliseconds), Double(mic.delay) / 48, accuracy: 1.0 / 48, "mic \(m.index)")
            XCTAssertEqual(m.levelDBFS, SelfTestFixture.expectedLevelDBFS(mic, played: recording.played), accuracy: 1, "mic \(m.index)")
            XCTAssertEqual(m.noiseFloorDBFS, 20 * log10(Double(mic.noiseRMS)), accuracy: 1, "mic \(m.index)")
            XCTAssertEqual(m.peakDBFS, 20 * log10(Double(mic.gain)) - 6, accuracy: 0.5, "mic \(m.index)")
            XCTAssertEqual(m.snrDB, m.levelDBFS - m.noiseFloorDBFS, accuracy: 1e-9)
            XCTAssertGreaterThan(m.correlation, 0.9)
            XCTAssertLessThanOrEqual(m.correlation, 1)
            XCTAssertEqual(m.clippedSamples, 0)
        }
        XCTAssertEqual(try XCTUnwrap(report.echoReductionDB), 40, accuracy: 0.1)
    }

    func testEightMicsAt16kHzOneWithInvertedPolarity() throws {
        let mics = (0..<8).map { i in SimulatedMic(delay: 40 + 3 * i, gain: i == 5 ? -0.05 : 0.05 + 0.01 * Float(i)) }
        let report = SelfTestAnalysis.analyze(SelfTestFixture.recording(rate: 16_000, mics: mics))
        XCTAssertEqual(report.problems, [])
        XCTAssertEqual(report.mics.map(\.index), Array(0..<8))
        for (m, mic) in zip(report.mics, mics) {
            XCTAssertEqual(try XCTUnwrap(m.delayMilliseconds), Double(mic.delay) / 16, accuracy: 1.0 / 16, "mic \(m.index)")
            XCTAssertGreaterThan(m.correlation, 0.9, "polarity does not matter")
        }
    }

    // MARK: - Faults an installer must hear about

    func testDeadMicIsNamed() {
        let mics = [SimulatedMic(delay: 30, gain: 0.1), SimulatedMic(delay: 31, gain: 0.1),
                    SimulatedMic(delay: 0, gain: 0, noiseRMS: 2.5e-5)]   // only its own -92 dBFS hiss
        let report = SelfTestAnalysis.analyze(SelfTestFixture.recording(rate: 16_000, mics: mics))
        let dead = report.mics[2]
        XCTAssertNil(dead.delayMilliseconds)
        XCTAssertLessThan(dead.correlation, 0.2)
        XCTAssertEqual(dead.noiseFloorDBFS, -92, accuracy: 1)
        XCTAssertEqual(dead.snrDB, 0, accuracy: 1)
        XCTAssertEqual(report.problems.count, 1, "\(report.problems)")
        XCTAssertTrue(report.problems[0].hasPrefix("mic 2: no signal (-92 dBFS, noise floor -92 dBFS)"), report.problems[0])
        XCTAssertFalse(report.passed)
        XCTAssertNotNil(report.echoReductionDB, "mic 0 is fine, so the canceller is still measured")
    }

    func testClippingIsCountedAndReported() {
        // Gain 2.4 on a -6 dBFS sweep: peaks at 1.2, so the converter clips the loud parts.
        let mics = [SimulatedMic(delay: 20, gain: 0.2), SimulatedMic(delay: 21, gain: 2.4)]
        let recording = SelfTestFixture.recording(rate: 16_000, mics: mics)
        let expected = (recording.quietMics[1] + recording.signalMics[1]).filter { $0.magnitude >= 0.999 }.count
        XCTAssertGreaterThan(expected, 100)
        let report = SelfTestAnalysis.analyze(recording)
        XCTAssertEqual(report.mics[0].clippedSamples, 0)
        XCTAssertEqual(report.mics[1].clippedSamples, expected)
        XCTAssertEqual(report.mics[1].peakDBFS, 0, accuracy: 0.01)
        XCTAssertEqual(report.problems, ["mic 1: \(expected) clipped samples — lower the speaker or mic gain"])

        let tolerant = SelfTestAnalysis.analyze(recording, thresholds: SelfTestThresholds(maximumClippedSamples: expected))
        XCTAssertTrue(tolerant.passed, "\(tolerant.problems)")
    }

    func testEchoReductionIsMeasuredOnTheConvergedHalf() throws {
        var recording = SelfTestFixture.recording(rate: 16_000, mics: [SimulatedMic(delay: 50, gain: 0.1)])
        let raw = recording.signalMics[0]
        XCTAssertEqual(try XCTUnwrap(SelfTestAnalysis.analyze(recording).echoReductionDB), 40, accuracy: 0.1)

        recording.cleaned = raw
        let untouched = SelfTestAnalysis.analyze(recording)
        XCTAssertEqual(try XCTUnwrap(untouched.echoReductionDB), 0, accuracy: 0.01)
        XCTAssertEqual(untouched.problems, ["echo canceller removes only 0 dB (expected ≥ 20 dB)"])

        // Still adapting for (nearly) the first half of the sweep: only the second half counts.
        let converges = 50 + recording.played.count / 2 - 100
        recording.cleaned = raw.enumerated().map { $0.offset < converges ? $0.element : $0.element * 0.01 }
        XCTAssertEqual(try XCTUnwrap(SelfTestAnalysis.analyze(recording).echoReductionDB), 40, accuracy: 0.1)

        recording.cleaned = []
        let missing = SelfTestAnalysis.analyze(recording)
        XCTAssertNil(missing.echoReductionDB)
        XCTAssertEqual(missing.problems, ["no echo-canceller output was recorded"])
        XCTAssertEqual(missing.mics.count, 1, "the mics are still measured")

        recording.cleaned = Array(raw.prefix(100))
        XCTAssertEqual(SelfTestAnalysis.analyze(recording).problems,
                       ["echo-canceller output has 100 samples, the mic capture \(raw.count)"])
    }

    func testEchoReductionHintsAtAQuietSpeaker() {
        // 14 dB above the noise: the canceller cannot take away more than that.
        var recording = SelfTestFixture.recording(rate: 16_000, mics: [SimulatedMic(delay: 10, gain: 0.0021, noiseRMS: 2e-4)])
        recording.cleaned = recording.signalMics[0].map { $0 * 0.3 }
        let report = SelfTestAnalysis.analyze(recording)
        XCTAssertEqual(report.problems.count, 1, "\(report.problems)")
        XCTAssertTrue(report.problems[0].hasPrefix("echo canceller removes only 10 dB (expected ≥ 20 dB); the test signal is only 1"),
                      report.problems[0])
        XCTAssertTrue(report.problems[0].hasSuffix("raise the speaker volume"))
    }

    func testDelaySpreadNamesTheOddMic() {
        let odd = SimulatedMic(delay: 656, gain: 0.1)    // 41 ms at 16 kHz
        let normal = SimulatedMic(delay: 32, gain: 0.1)  // 2 ms
        let lastOdd = SelfTestAnalysis.analyze(SelfTestFixture.recording(rate: 16_000, mics: [normal, normal, normal, odd]))
        XCTAssertEqual(lastOdd.problems, ["mic 3: delay 41.0 ms differs from mic 0 (2.0 ms)"])
        // The reference is the median, so a late mic 0 does not make every other mic wrong.
        let firstOdd = SelfTestAnalysis.analyze(SelfTestFixture.recording(rate: 16_000, mics: [odd, normal, normal]))
        XCTAssertEqual(firstOdd.problems, ["mic 0: delay 41.0 ms differs from mic 1 (2.0 ms)"])
        let within = SelfTestAnalysis.analyze(SelfTestFixture.recording(rate: 16_000, mics: [normal, SimulatedMic(delay: 100, gain: 0.1)]))
        XCTAssertEqual(within.problems, [], "4.25 ms apart is within the 5 ms allowed")
    }

    func testSilentMicsStayFinite() {
        let played = SelfTestSignal.sweep(rate: 16_000, seconds: 0.5, levelDBFS: -6)
        let zeros = [Float](repeating: 0, count: played.count + 8000)
        let recording = SelfTestRecording(rate: 16_000, quietMics: [[0, 0, 0], [0, 0]], played: played,
                                          signalMics: [zeros, zeros], cleaned: zeros)
        let report = SelfTestAnalysis.analyze(recording)
        for m in report.mics {
            XCTAssertEqual(m, SelfTestMicResult(index: m.index, levelDBFS: -120, peakDBFS: -120, noiseFloorDBFS: -120, snrDB: 0,
                                                clippedSamples: 0, delayMilliseconds: nil, correlation: 0))
        }
        XCTAssertNil(report.echoReductionDB, "nothing to cancel when mic 0 hears nothing")
        XCTAssertEqual(report.problems, ["mic 0: no signal (-120 dBFS, noise floor -120 dBFS)",
                                         "mic 1: no signal (-120 dBFS, noise floor -120 dBFS)"])
    }

    func testDCOffsetAndNaNDoNotDistortLevels() {
        var recording = SelfTestFixture.recording(rate: 16_000, mics: [SimulatedMic(delay: 25, gain: 0.1)])
        let clean = SelfTestAnalysis.analyze(recording).mics[0]
        recording.signalMics[0] = recording.signalMics[0].map { $0 + 0.05 }
        recording.quietMics[0] = recording.quietMics[0].map { $0 + 0.05 }
        recording.signalMics[0][5] = .nan
        recording.quietMics[0][5] = .infinity
        let offset = SelfTestAnalysis.analyze(recording).mics[0]
        XCTAssertEqual(offset.levelDBFS, clean.levelDBFS, accuracy: 0.1)
        XCTAssertEqual(offset.noiseFloorDBFS, clean.noiseFloorDBFS, accuracy: 0.5)
        XCTAssertEqual(offset.delayMilliseconds, clean.delayMilliseconds)
        XCTAssertGreaterThan(offset.peakDBFS, clean.peakDBFS, "the peak keeps the offset: that is what clips")
    }

    // MARK: - Recordings the capture side got wrong

    func testMalformedRecordingsReportInsteadOfCrashing() {
        let good = SelfTestFixture.recording(rate: 16_000, mics: [SimulatedMic(delay: 5, gain: 0.1), SimulatedMic(delay: 5, gain: 0.1)],
                                             sweepSeconds: 0.25, maxDelayMilliseconds: 50)
        XCTAssertTrue(SelfTestAnalysis.analyze(good).passed, "\(SelfTestAnalysis.analyze(good).problems)")
        var cases: [(String, SelfTestRecording)] = []
        var r = good
        r.signalMics = []
        r.quietMics = []
        cases.append(("no microphone was recorded", r))
        r = good
        r.played = []
        cases.append(("no test signal was played", r))
        r = good
        r.played = r.played.map { _ in 0 }
        cases.append(("the played test signal is silent", r))
        r = good
        r.rate = 0
        cases.append(("sample rate 0 Hz is not valid", r))
        r = good
        r.signalMics[1].removeLast(10)
        cases.append(("mic 1: signal capture has \(good.signalMics[0].count - 10) samples, mic 0 has \(good.signalMics[0].count)", r))
        r = good
        r.signalMics[0] = Array(r.signalMics[0].prefix(100))
        cases.append(("mic 0: signal capture has 100 samples, fewer than the \(good.played.count) played", r))
        r = good
        r.quietMics.removeLast()
        cases.append(("1 quiet captures for 2 mics", r))
        r = good
        r.quietMics[1] = []
        cases.append(("mic 1: no quiet capture to measure the noise floor", r))
        for (problem, recording) in cases {
            let report = SelfTestAnalysis.analyze(recording)
            XCTAssertTrue(report.problems.contains(problem), "expected \(problem), got \(report.problems)")
            XCTAssertEqual(report.mics, [])
            XCTAssertFalse(report.passed)
        }
    }

    func testSearchNeverRunsPastTheCapture() {
        // The capture is exactly as long as the signal: only lag 0 fits, whatever the threshold says.
        var recording = SelfTestFixture.recording(rate: 16_000, mics: [SimulatedMic(delay: 0, gain: 0.1)],
                                                  sweepSeconds: 0.25, maxDelayMilliseconds: 0)
        XCTAssertEqual(recording.signalMics[0].count, recording.played.count)
        let report = SelfTestAnalysis.analyze(recording, thresholds: SelfTestThresholds(maximumDelayMilliseconds: 10_000))
        XCTAssertEqual(report.mics[0].delayMilliseconds, 0)
        XCTAssertTrue(report.passed, "\(report.problems)")
        recording.signalMics[0] = recording.signalMics[0].map { _ in 0.3 }   // a mic stuck at a constant
        let stuck = SelfTestAnalysis.analyze(recording, thresholds: SelfTestThresholds(maximumDelayMilliseconds: .infinity))
        XCTAssertEqual(stuck.mics[0].levelDBFS, -120, "DC alone is no signal")
        XCTAssertFalse(stuck.passed)
    }

    func testOnlyAnEchoFailureIsWorthASecondMeasurement() {
        let good = SelfTestMicResult(index: 0, levelDBFS: -30, peakDBFS: -21, noiseFloorDBFS: -70, snrDB: 40,
                                     clippedSamples: 0, delayMilliseconds: 22, correlation: 0.9)
        let echoOnly = SelfTestReport(mics: [good, good], echoReductionDB: 4, problems: ["echo canceller removes only 4 dB (expected ≥ 20 dB)"])
        XCTAssertTrue(echoOnly.failedOnlyOnEcho())
        XCTAssertFalse(SelfTestReport(mics: [good], echoReductionDB: 30, problems: []).failedOnlyOnEcho(), "passed")
        var noisy = good
        noisy.snrDB = 2
        XCTAssertFalse(SelfTestReport(mics: [noisy], echoReductionDB: 4, problems: ["mic 0: …", "echo …"]).failedOnlyOnEcho(),
                       "a loud room is the problem, not the canceller")
        var clipped = good
        clipped.clippedSamples = 10
        XCTAssertFalse(SelfTestReport(mics: [clipped], echoReductionDB: 4, problems: ["echo …"]).failedOnlyOnEcho())
        XCTAssertFalse(SelfTestReport(mics: [good], echoReductionDB: nil, problems: ["…"]).failedOnlyOnEcho())
    }

    // MARK: - The plan: sweep, burst, double talk

    func testPlanLaysOutItsPartsAndSignals() {
        let plan = SelfTestPlan(rate: 16_000)
        XCTAssertEqual(plan.sweep, 0..<16_000)
        XCTAssertEqual(plan.burst, 16_000..<(16_000 + 24_000 + 19_200))
        XCTAssertEqual(plan.echo, 24_000..<40_000, "the last second of the burst alone")
        XCTAssertEqual(plan.doubleTalk, 40_000..<59_200)
        XCTAssertEqual(plan.talkerAlone, 65_600..<84_800, "after 0.4 s of silence")
        XCTAssertEqual(plan.count, 84_800)
        XCTAssertEqual(plan.seconds, 5.3, accuracy: 1e-9)
        let played = plan.played(), near = plan.nearEnd()
        XCTAssertEqual(played, plan.played(), "deterministic")
        XCTAssertEqual(near, plan.nearEnd(), "deterministic")
        XCTAssertEqual(played.count, plan.count)
        XCTAssertEqual(near.count, plan.count)
        func rms(_ x: [Float], _ r: Range<Int>) -> Double {
            10 * log10(x[r].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(r.count) + 1e-30)
        }
        func peak(_ x: [Float], _ r: Range<Int>) -> Double { 20 * log10(Double(x[r].reduce(Float(0)) { max($0, $1.magnitude) })) }
        XCTAssertEqual(peak(played, plan.sweep), -18, accuracy: 0.05)
        XCTAssertEqual(peak(played, plan.burst), -18, accuracy: 0.05)
        XCTAssertEqual(Array(played[plan.burst.upperBound...]), [Float](repeating: 0, count: plan.count - plan.burst.upperBound),
                       "the speaker is silent after the burst")
        XCTAssertEqual(Array(near[..<plan.doubleTalk.lowerBound]), [Float](repeating: 0, count: plan.doubleTalk.lowerBound),
                       "no talker before double talk")
        XCTAssertEqual(Array(near[plan.doubleTalk]), Array(near[plan.talkerAlone]), "the same talker twice")
        XCTAssertEqual(rms(near, plan.doubleTalk), -40, accuracy: 0.05)
        XCTAssertEqual(SelfTestPlan(rate: 0).played(), [])
        XCTAssertEqual(SelfTestPlan(rate: -5).nearEnd(), [])
    }

    /// Power in a band, by a plain DFT over a stretch (slow, so a short one).
    private func bandPower(_ x: [Float], rate: Int, _ band: ClosedRange<Double>) -> Double {
        let n = 4096
        let start = x.count / 2 - n / 2
        var total = 0.0
        for k in stride(from: 1, to: n / 2, by: 1) {
            let f = Double(k) * Double(rate) / Double(n)
            guard band.contains(f) else { continue }
            var re = 0.0, im = 0.0
            for t in 0..<n {
                let w = 0.5 - 0.5 * cos(2 * Double.pi * Double(t) / Double(n))
                let a = -2 * Double.pi * Double(k * t) / Double(n)
                re += w * Double(x[start + t]) * cos(a)
                im += w * Double(x[start + t]) * sin(a)
            }
            total += re * re + im * im
        }
        return total
    }

    func testNoiseBurstIsBroadbandTiltedAndBandLimited() {
        let rate = 48_000
        let burst = SelfTestSignal.noise(rate: rate, seconds: 0.5, levelDBFS: -18)
        XCTAssertEqual(burst.count, 24_000)
        XCTAssertEqual(burst.first, 0, "faded in")
        XCTAssertEqual(burst.last, 0, "faded out")
        // Per Hz: 300-600 Hz and 1.5-3 kHz carry power, tilted down; above 16 kHz next to nothing.
        let low = bandPower(burst, rate: rate, 300...600) / 300
        let mid = bandPower(burst, rate: rate, 2_000...4_000) / 2_000
        let high = bandPower(burst, rate: rate, 8_000...11_000) / 3_000
        let above = bandPower(burst, rate: rate, 16_000...23_000) / 7_000
        let hum = bandPower(burst, rate: rate, 20...60) / 40
        XCTAssertEqual(10 * log10(low / mid), 10 * log10(1 + pow(3_000.0 / 1_000, 2)) - 10 * log10(1 + pow(450.0 / 1_000, 2)), accuracy: 3,
                       "the first-order tilt")
        XCTAssertGreaterThan(10 * log10(high / low), -30, "still broadband at 8-11 kHz")
        XCTAssertLessThan(10 * log10(above / low), -35, "band-limited")
        XCTAssertLessThan(10 * log10(hum / low), -10, "nothing for mains hum to hide")
        XCTAssertEqual(SelfTestSignal.noise(rate: 0, seconds: 1, levelDBFS: -6), [])
        XCTAssertEqual(SelfTestSignal.noise(rate: 16_000, seconds: .infinity, levelDBFS: -6), [])
    }

    func testTalkerIsVoicedWithPausesAndHiss() {
        let rate = 16_000
        let talker = SelfTestSignal.talker(rate: rate, seconds: 1.2, levelDBFS: -30)
        XCTAssertEqual(talker.count, 19_200)
        let power = talker.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(talker.count)
        XCTAssertEqual(10 * log10(power), -30, accuracy: 0.01)
        // 10 ms frames: syllables and pauses alternate (0.2 s on, 0.08 s off).
        var frames: [Double] = []
        for f in stride(from: 0, to: talker.count - 160, by: 160) {
            var e = 0.0
            for x in talker[f..<(f + 160)] { e += Double(x) * Double(x) }
            frames.append(10 * log10(e / 160 + 1e-30))
        }
        let loud = frames.filter { $0 > -40 }.count, quiet = frames.filter { $0 < -55 }.count
        XCTAssertGreaterThan(loud, frames.count / 2, "\(frames)")
        XCTAssertGreaterThan(quiet, frames.count / 10, "pauses: \(frames)")
        XCTAssertEqual(SelfTestSignal.talker(rate: 16_000, seconds: 0, levelDBFS: -30), [])
    }

    /// A recording of the whole plan at 16 kHz: mics hear the speaker, `cleaned` is what a
    /// canceller handed on; `talkerKept` scales the talker in the double-talk part of it.
    private func planRecording(talkerKept: (Int) -> Float, residual: Float = 0.01) -> (SelfTestRecording, SelfTestPlan) {
        let plan = SelfTestPlan(rate: 16_000)
        let played = plan.played(), near = plan.nearEnd()
        let delay = 40
        let count = plan.count + 8_000
        var rng = SplitMix64(seed: 3)
        let mic: [Float] = (0..<count).map { n in
            let s = n - delay >= 0 && n - delay < played.count ? 0.1 * played[n - delay] : 0
            return s + SelfTestFixture.noise(1e-4, &rng)
        }
        let quiet = (0..<8_000).map { _ in SelfTestFixture.noise(1e-4, &rng) }
        let cleaned: [Float] = (0..<count).map { n in
            let t = n < near.count ? near[n] : 0
            let kept = plan.doubleTalk.contains(n) ? talkerKept(n - plan.doubleTalk.lowerBound) : 1
            return residual * mic[n] + kept * t
        }
        return (SelfTestRecording(rate: 16_000, quietMics: [quiet], played: played, signalMics: [mic], cleaned: cleaned,
                                  segments: plan.segments), plan)
    }

    func testDoubleTalkKeptChoppedAndMuted() throws {
        let (kept, _) = planRecording { _ in 1 }
        let report = SelfTestAnalysis.analyze(kept)
        XCTAssertEqual(report.problems, [])
        XCTAssertEqual(try XCTUnwrap(report.echoReductionDB), 40, accuracy: 0.5, "the burst's echo, not the talker's")
        let dt = try XCTUnwrap(report.doubleTalk)
        XCTAssertEqual(dt.lossDB, 0, accuracy: 0.05)
        XCTAssertGreaterThan(dt.correlation, 0.99)
        XCTAssertEqual(dt.choppedFraction, 0)
        XCTAssertEqual(dt.talkerLevelDBFS, -40, accuracy: 0.5)
        XCTAssertEqual(report.mics[0].delayMilliseconds, 2.5, "delay from the sweep")

        // Every other syllable (0.28 s cycles) muted by 30 dB, as a gating canceller does.
        let (chopped, _) = planRecording { n in (n / 4_480) % 2 == 1 ? 0.03 : 1 }
        let c = SelfTestAnalysis.analyze(chopped)
        let cdt = try XCTUnwrap(c.doubleTalk)
        XCTAssertGreaterThan(cdt.lossDB, 3, "\(cdt)")
        XCTAssertLessThan(cdt.correlation, 0.9, "\(cdt)")
        XCTAssertEqual(cdt.choppedFraction, 0.5, accuracy: 0.1)
        XCTAssertEqual(c.problems.count, 1, "\(c.problems)")
        XCTAssertTrue(c.problems[0].hasPrefix("echo canceller cuts a talker who speaks while the far end plays: "), c.problems[0])
        XCTAssertFalse(c.failedOnlyOnEcho(), "the echo figure is fine: measuring again would not help")

        // Muted outright: the loss is large but finite.
        let (muted, _) = planRecording { _ in 0 }
        let m = try XCTUnwrap(SelfTestAnalysis.analyze(muted).doubleTalk)
        XCTAssertGreaterThan(m.lossDB, 20)
        XCTAssertTrue(m.lossDB.isFinite)
        XCTAssertEqual(m.choppedFraction, 1)

        // A louder residual echo during double talk lowers the correlation, not the level kept.
        let (echoey, _) = planRecording(talkerKept: { _ in 1 }, residual: 4)
        let e = SelfTestAnalysis.analyze(echoey)
        XCTAssertEqual(try XCTUnwrap(e.doubleTalk).lossDB, 0, accuracy: 0.5)
        XCTAssertLessThan(try XCTUnwrap(e.doubleTalk).correlation, 0.9)
        XCTAssertEqual(e.problems.count, 2, "echo and double talk: \(e.problems)")
        XCTAssertTrue(e.failedOnlyOnEcho(), "a canceller still learning fails both: worth a second measurement")
    }

    func testATalkerTheChainLosesEvenAloneIsReported() {
        var (r, plan) = planRecording { _ in 1 }
        for n in plan.talkerAlone { r.cleaned[n] = 0 }
        let report = SelfTestAnalysis.analyze(r)
        XCTAssertNil(report.doubleTalk)
        XCTAssertEqual(report.problems.count, 1, "\(report.problems)")
        XCTAssertTrue(report.problems[0].hasPrefix("the test talker did not come through the processing even without echo"), report.problems[0])
    }

    func testALoudRoomIsNotMistakenForAChoppedTalker() throws {
        var (r, plan) = planRecording { _ in 1 }
        // Room noise 12 dB below the talker in the quiet capture: not measured, not a problem.
        var rng = SplitMix64(seed: 9)
        r.quietMics[0] = r.quietMics[0].map { _ in SelfTestFixture.noise(0.0025, &rng) }
        let loud = SelfTestAnalysis.analyze(r)
        XCTAssertNil(loud.doubleTalk)
        XCTAssertEqual(loud.problems, [], "the sweep (−41 dBFS at the mic) is still the 10 dB needed above this noise")
        XCTAssertNotNil(SelfTestAnalysis.analyze(r, thresholds: SelfTestThresholds(minimumTalkerAboveNoiseDB: 10)).doubleTalk)
        _ = plan
    }

    func testSegmentsOutsideTheRecordingAreReportedNotTrapped() {
        var (r, plan) = planRecording { _ in 1 }
        r.segments?.talkerAlone = plan.talkerAlone.lowerBound..<(plan.count + 10)
        XCTAssertEqual(SelfTestAnalysis.analyze(r).problems,
                       ["the talker-alone part (\(plan.talkerAlone.lowerBound)..<\(plan.count + 10)) is not within the \(plan.count) samples played"])
        r.segments?.talkerAlone = nil
        XCTAssertEqual(SelfTestAnalysis.analyze(r).problems, ["double talk needs both its parts, the talker with and without the far end"])
        r.segments = SelfTestSegments(sweep: 0..<0, echo: 5..<5)
        XCTAssertEqual(SelfTestAnalysis.analyze(r).mics, [])
        r.segments = SelfTestSegments(sweep: -3..<10, echo: 0..<10)
        XCTAssertFalse(SelfTestAnalysis.analyze(r).passed)
    }
}
