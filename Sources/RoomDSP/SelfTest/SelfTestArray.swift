import RoomBase

/// The microphone array's part of `roomctl selftest` (issue 26, item 3): a dead mic, a mic
/// whose delay does not fit the board's geometry (wired to the wrong channel), and how much
/// the array's beam lowers the room's noise.
///
/// Each check needs what a one-mic board lacks (other mics to compare with, positions, a beam),
/// so `SelfTestAnalysis.analyze` runs them only when given the board's array; a one-mic board's
/// report is what it was.

/// What the board profile says about the array (`[array]` in board.conf).
public struct SelfTestArrayGeometry: Sendable, Equatable {
    /// One position per capture channel, metres, board frame.
    public var micPositions: [Point3]
    /// `array.speaker`: where the speaker's sound comes from; nil skips the geometry check.
    public var speaker: Point3?

    public init(micPositions: [Point3], speaker: Point3? = nil) {
        self.micPositions = micPositions
        self.speaker = speaker
    }

    /// Metres per second in air at about 20 °C (the locator and the beam use the same).
    public static let speedOfSound = 343.0

    /// Largest distance between two mics, metres (0 for fewer than two).
    public var largestSpacing: Double {
        var d = 0.0
        for i in micPositions.indices {
            for j in micPositions.indices where j > i { d = max(d, micPositions[i].distance(to: micPositions[j])) }
        }
        return d
    }
}

/// The array's beam, as roomd's chain runs it, for the analysis to measure (RoomDSP cannot
/// reach the C code; RoomAudio's `ArrayBeamMeter` is the real one, tests pass their own).
/// Sendable, so the daemon can hand it to the analysis's worker thread, which builds the beam.
public protocol SelfTestBeam: Sendable {
    /// A beam for this array, used on the calling thread only; nil when none can be built.
    /// One for the whole analysis: building one designs its weights for every direction, which
    /// costs several times more than running it over the whole recording.
    func make() -> (any SelfTestSteerableBeam)?
}

public protocol SelfTestSteerableBeam: AnyObject {
    /// Samples by which the output lags the mics.
    var latency: Int { get }
    /// Points the beam at `azimuthDegrees` (board frame: 0 = +x, counter-clockwise) at once.
    func steer(_ azimuthDegrees: Double)
    /// `planes` (one per mic, equal lengths) through the beam, continuing from what it was given
    /// before; empty when the planes do not fit the array.
    func process(_ planes: [[Float]]) -> [Float]
}

/// A mic that heard far less than the others, or nothing at all.
public struct SelfTestDeadMic: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Every sample of its capture was 0: no data from the converter at all.
        case silent
        /// Every sample was this same nonzero value: a stuck converter or a floating input.
        case constant(Float)
        /// It hears something, but far below the others while the test signal plays.
        case quiet
    }
    public var index: Int
    public var kind: Kind
    /// Its level during the test signal below the median of the mics', dB (positive = quieter).
    public var belowMedianDB: Double
}

/// The delays at which the speaker's sound reaches the mics, against the board's geometry.
public struct SelfTestArrayDelays: Sendable, Equatable {
    /// The mic the others are measured against: mic 0, or the first live one when it is dead.
    public var referenceMic: Int
    public var speaker: Point3
    /// Per mic, µs after the reference mic the speaker's sound arrives (cross-correlation over
    /// the sweep, parabolic interpolation of its peak); nil when not measured (dead, no clear peak).
    public var measuredMicroseconds: [Double?]
    /// Per mic, what `speaker` and the mic positions predict, µs after the reference mic.
    public var expectedMicroseconds: [Double]
    /// Per mic, measured − expected − the offset common to all (the median of measured −
    /// expected: robust to the reference mic being the wrong one); nil when not measured.
    public var residualMicroseconds: [Double?]
    /// A residual beyond this does not fit (`SelfTestThresholds.arrayDelayToleranceFraction`).
    public var toleranceMicroseconds: Double
    /// Mics whose residual is beyond the tolerance.
    public var misfits: [Int]
    /// Two mics that fit once exchanged (the only such pair); nil when none does, or several.
    public var swapped: [Int]?
    public var fits: Bool { misfits.isEmpty }
}

public enum SelfTestGeometryCheck: Sendable, Equatable {
    /// Why it was not checked (not a failure).
    case notChecked(String)
    case checked(SelfTestArrayDelays)
}

/// How much the beam lowers the room's noise (and passes the speaker) against one mic.
public struct SelfTestArrayGain: Sendable, Equatable {
    /// The mic the beam is compared with: mic 0, or the first live one when it is dead.
    public var referenceMic: Int
    /// The directions the beam was steered at, degrees.
    public var azimuthsDegrees: [Double]
    /// Per direction, the beam's mean power over the quiet capture against the reference mic's, dB.
    public var perDirectionDB: [Double]
    /// The mean of those powers against the reference mic's, dB: negative = the beam is quieter.
    public var noiseGainDB: Double
    /// The beam steered at the speaker, over the sweep, against the reference mic, dB: what a
    /// talker in the speaker's direction would keep. Nil without `array.speaker`.
    public var speakerGainDB: Double?
    public var speakerAzimuthDegrees: Double?
}

public struct SelfTestArrayResult: Sendable, Equatable {
    /// Per mic, its level during the test signal minus the median of the mics' levels, dB.
    public var levelVsMedianDB: [Double]
    public var medianLevelDBFS: Double
    public var deadMics: [SelfTestDeadMic]
    public var geometry: SelfTestGeometryCheck
    /// Nil when no beam was given or it could not be measured.
    public var gain: SelfTestArrayGain?
}

extension SelfTestAnalysis {
    /// The directions the noise gain averages over: a talker may be anywhere around a table.
    public static let noiseGainAzimuths: [Double] = stride(from: 0.0, to: 360, by: 45).map { $0 }

    /// Dead mics, from the per-mic levels already measured and the raw captures.
    static func deadMics(_ recording: SelfTestRecording, _ mics: [SelfTestMicResult], _ t: SelfTestThresholds)
        -> (dead: [SelfTestDeadMic], median: Double, vsMedian: [Double]) {
        let median = upperMedian(mics.map(\.levelDBFS))
        var dead: [SelfTestDeadMic] = []
        for m in mics {
            let below = median - m.levelDBFS
            let raw = recording.signalMics[m.index]
            var kind: SelfTestDeadMic.Kind?
            if let first = raw.first, raw.allSatisfy({ $0 == first }),
               recording.quietMics[m.index].allSatisfy({ $0 == first }) {
                kind = first == 0 ? .silent : .constant(first)
            } else if below > t.deadMicBelowMedianDB {
                kind = .quiet
            }
            if let kind { dead.append(SelfTestDeadMic(index: m.index, kind: kind, belowMedianDB: below)) }
        }
        return (dead, median, mics.map { $0.levelDBFS - median })
    }

    /// The middle value; of the two middle ones, the larger (so with two mics, one dead, the
    /// live one is the reference). 0 for none.
    static func upperMedian(_ x: [Double]) -> Double {
        guard !x.isEmpty else { return 0 }
        return x.sorted(by: >)[(x.count - 1) / 2]
    }

    static func median(_ x: [Double]) -> Double {
        guard !x.isEmpty else { return 0 }
        let s = x.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func deadMicProblem(_ d: SelfTestDeadMic, level: Double, median: Double) -> String {
        switch d.kind {
        case .silent:
            return "mic \(d.index): dead — digital silence (every sample 0)"
        case .constant(let v):
            return "mic \(d.index): dead — stuck at \(shortestNumberText(Double(v))) (every sample the same)"
        case .quiet:
            return "mic \(d.index): dead or blocked — \(fixedDecimalText(d.belowMedianDB, 0)) dB below the median of the mics while the test signal played (\(fixedDecimalText(level, 0)) vs \(fixedDecimalText(median, 0)) dBFS)"
        }
    }

    // MARK: - Geometry

    /// Cross-correlates each live mic against the reference over the sweep (aligned by the
    /// reference's delay from the speaker) and compares the delays with the geometry's.
    ///
    /// Why against the speaker's position rather than mic pairs alone: the delay between two
    /// mics depends on where the sound comes from, and the speaker is the one source whose
    /// place is known. Why a common offset is fitted: the reference channel may itself be one
    /// of the wrongly wired ones, and the median of measured − expected is what most mics agree on.
    static func geometryCheck(mics: [[Double]], geometry: SelfTestArrayGeometry, live: [Int], window: Range<Int>,
                              rate: Int, thresholds t: SelfTestThresholds) -> SelfTestGeometryCheck {
        guard let speaker = geometry.speaker else { return .notChecked("[array] speaker not set") }
        guard geometry.micPositions.count == mics.count else {
            return .notChecked("the board lists \(geometry.micPositions.count) mic positions for \(mics.count) channels")
        }
        guard live.count >= 2, let reference = live.first else { return .notChecked("fewer than 2 live mics") }
        let c = SelfTestArrayGeometry.speedOfSound
        let spacing = geometry.largestSpacing
        let r = Double(rate)
        // Half again the largest spacing, plus a few samples: a mic wired to another channel
        // still sits within the array, while a lag at the edge means a delay the array cannot
        // make (a capture path that delays one channel) and reads as a misfit.
        let maxLag = Int((1.5 * spacing / c * r).rounded(.up)) + 3
        let tolerance = max(t.arrayDelayToleranceFraction * spacing / c, 1 / r) * 1e6
        let arrival = geometry.micPositions.map { $0.distance(to: speaker) / c * 1e6 }

        var measured = [Double?](repeating: nil, count: mics.count)
        measured[reference] = 0
        for k in live where k != reference {
            measured[k] = interMicLag(mics[reference], mics[k], window: window, maxLag: maxLag,
                                      minimumCorrelation: t.minimumArrayCorrelation).map { $0 / r * 1e6 }
        }
        let fit = fitDelays(measured, expected: arrival, tolerance: tolerance)
        var swapped: [Int]?
        if !fit.misfits.isEmpty {
            var fitting: [[Int]] = []
            let timed = measured.indices.filter { measured[$0] != nil }
            for (i, a) in timed.enumerated() {
                for b in timed[(i + 1)...] where (arrival[a] - arrival[b]).magnitude > tolerance {
                    var exchanged = arrival
                    exchanged.swapAt(a, b)
                    if fitDelays(measured, expected: exchanged, tolerance: tolerance).misfits.isEmpty { fitting.append([a, b]) }
                }
            }
            if fitting.count == 1 { swapped = fitting[0] }
        }
        return .checked(SelfTestArrayDelays(
            referenceMic: reference, speaker: speaker, measuredMicroseconds: measured,
            expectedMicroseconds: arrival.map { $0 - arrival[reference] }, residualMicroseconds: fit.residuals,
            toleranceMicroseconds: tolerance, misfits: fit.misfits, swapped: swapped))
    }

    /// Residuals of `measured` (relative to any one mic) against `expected` arrivals after the
    /// median offset, and the mics beyond `tolerance`.
    static func fitDelays(_ measured: [Double?], expected: [Double], tolerance: Double) -> (residuals: [Double?], misfits: [Int]) {
        let differences = measured.indices.compactMap { i in measured[i].map { $0 - expected[i] } }
        let offset = median(differences)
        let residuals = measured.indices.map { i in measured[i].map { $0 - expected[i] - offset } }
        let misfits = residuals.indices.filter { residuals[$0].map { $0.magnitude > tolerance } ?? false }
        return (residuals, misfits)
    }

    /// Samples by which `mic` lags `reference` (positive: it hears later), to a fraction of a
    /// sample: the peak of their cross-correlation over `window` of the reference within
    /// ±maxLag, refined by a parabola through the peak and its neighbours. Polarity does not
    /// matter (the larger |correlation| wins). Nil when the normalised peak is below
    /// `minimumCorrelation` (the two do not hear the same sound).
    static func interMicLag(_ reference: [Double], _ mic: [Double], window: Range<Int>, maxLag: Int,
                            minimumCorrelation: Double) -> Double? {
        let w = window.clamped(to: (maxLag..<max(maxLag, min(reference.count, mic.count) - maxLag)))
        guard w.count > 2 * maxLag, maxLag > 0 else { return nil }
        var values = [Double](repeating: 0, count: 2 * maxLag + 1)
        var refEnergy = 0.0, micEnergy = 0.0
        reference.withUnsafeBufferPointer { ref in
            mic.withUnsafeBufferPointer { m in
                for n in w { refEnergy += ref[n] * ref[n]; micEnergy += m[n] * m[n] }
                for l in -maxLag...maxLag {
                    var sum = 0.0
                    for n in w { sum += ref[n] * m[n + l] }
                    values[l + maxLag] = sum
                }
            }
        }
        guard refEnergy > 0, micEnergy > 0 else { return nil }
        var best = 0
        for i in values.indices where values[i].magnitude > values[best].magnitude { best = i }
        guard values[best].magnitude / (refEnergy * micEnergy).squareRoot() >= minimumCorrelation else { return nil }
        let sign: Double = values[best] < 0 ? -1 : 1
        var fraction = 0.0
        if best > 0, best < values.count - 1 {
            let (a, b, c) = (sign * values[best - 1], sign * values[best], sign * values[best + 1])
            let curvature = a - 2 * b + c
            if curvature < 0 { fraction = max(-0.5, min(0.5, 0.5 * (a - c) / curvature)) }
        }
        return Double(best - maxLag) + fraction
    }

    static func geometryProblem(_ d: SelfTestArrayDelays) -> String? {
        guard !d.misfits.isEmpty else { return nil }
        func list(_ items: [String]) -> String {
            items.count == 1 ? items[0] : items.dropLast().joined(separator: ", ") + " and " + items.last!
        }
        let one = d.misfits.count == 1
        let offs = list(d.misfits.map { i in d.residualMicroseconds[i].map { fixedDecimalText($0, 0) } ?? "?" })
        var text = "\(list(d.misfits.map { "mic \($0)" })) \(one ? "does" : "do") not fit the board's geometry: the speaker's sound reaches "
            + "\(one ? "it" : "them") \(offs) µs off the delays array.speaker (\(d.speaker)) predicts (tolerance ±\(fixedDecimalText(d.toleranceMicroseconds, 0)) µs)"
        if let pair = d.swapped {
            text += " — mic \(pair[0]) and mic \(pair[1]) look swapped (wired in the wrong order?)"
        } else {
            text += " — wired in the wrong order, or is array.speaker wrong?"
        }
        return text
    }

    // MARK: - Noise gain

    /// How much of each beam output the measurement leaves out: the beam's overlap-add still
    /// holds the input before it (silence, or the previous direction's last 21 ms at 48 kHz).
    public static let beamSettleSeconds = 0.05

    /// The beam's power against the reference mic's: over the quiet capture (the room's noise)
    /// steered at each of `noiseGainAzimuths`, and over the sweep steered at the speaker.
    static func arrayGain(_ recording: SelfTestRecording, mics: [[Double]], beam factory: any SelfTestBeam, reference: Int,
                          speaker: Point3?, sweepSpan: Range<Int>?) -> SelfTestArrayGain? {
        guard let beam = factory.make() else { return nil }
        let quiet = recording.quietMics.map { withoutDC($0).map(Float.init) }
        let settle = Int(beamSettleSeconds * Double(recording.rate))
        var powers: [Double] = []
        for az in noiseGainAzimuths {
            beam.steer(az)
            guard let ratio = powerRatio(beam.process(quiet), quiet[reference], from: settle, latency: beam.latency) else { return nil }
            powers.append(ratio)
        }
        let mean = powers.reduce(0, +) / Double(powers.count)
        var gain = SelfTestArrayGain(referenceMic: reference, azimuthsDegrees: noiseGainAzimuths,
                                     perDirectionDB: powers.map { 10 * RoomMath.log10($0) }, noiseGainDB: 10 * RoomMath.log10(mean))
        if let speaker, let span = sweepSpan {
            let az = RoomMath.atan2(speaker.y, speaker.x) * 180 / Double.pi
            gain.speakerAzimuthDegrees = az
            // The quiet capture runs straight on into the signal's (one recording): behind it, the
            // sweep starts with the beam settled on the speaker's direction. Through the end of
            // the sweep and the beam's latency.
            let end = min(mics[reference].count, span.upperBound + settle)
            let lead = quiet[reference].count
            let signal = zip(quiet, mics).map { q, m in q + m[0..<end].map(Float.init) }
            beam.steer(az)
            let out = beam.process(signal)
            gain.speakerGainDB = powerRatio(out, signal[reference], range: (lead + span.lowerBound)..<(lead + span.upperBound),
                                            latency: beam.latency).map { 10 * RoomMath.log10($0) }
        }
        return gain
    }

    /// Mean power of `out[n + latency]` over that of `ref[n]`, n from `from` to the end both reach.
    private static func powerRatio(_ out: [Float], _ ref: [Float], from start: Int, latency: Int) -> Double? {
        powerRatio(out, ref, range: start..<max(start, min(ref.count, out.count - latency)), latency: latency)
    }

    private static func powerRatio(_ out: [Float], _ ref: [Float], range: Range<Int>, latency: Int) -> Double? {
        guard latency >= 0, range.lowerBound >= 0, range.upperBound <= ref.count, range.upperBound + latency <= out.count,
              !range.isEmpty else { return nil }
        var po = 0.0, pr = 0.0
        for n in range {
            let o = Double(out[n + latency]), r = Double(ref[n])
            po += o * o
            pr += r * r
        }
        guard pr > 0, po.isFinite, po > 0 else { return nil }
        return po / pr
    }
}
