/// What `roomctl selftest` captured: a quiet period, then the test signal on the speaker.
///
/// Raw captures, before any processing, because the installer needs to know what the hardware
/// does (gain, clipping, a dead capsule); `cleaned` is the one processed stream, kept to see
/// whether the echo canceller earns its keep.
public struct SelfTestRecording: Sendable, Equatable {
    /// Sample rate of every stream, Hz.
    public var rate: Int
    /// Per mic, captured while the speaker was silent: the noise floor.
    public var quietMics: [[Float]]
    /// What the speaker was given, sample-aligned with index 0 of `signalMics` and `cleaned`.
    public var played: [Float]
    /// Per mic, from the period the signal started; longer than `played` by the largest delay
    /// searched, so the end of the signal is still captured when it arrives late.
    public var signalMics: [[Float]]
    /// Echo-canceller output over the same span as `signalMics`.
    public var cleaned: [Float]

    public init(rate: Int, quietMics: [[Float]], played: [Float], signalMics: [[Float]], cleaned: [Float]) {
        self.rate = rate
        self.quietMics = quietMics
        self.played = played
        self.signalMics = signalMics
        self.cleaned = cleaned
    }
}

/// What one mic showed. Levels are dBFS of the AC part (DC offset removed, as the high-pass
/// filter does before anyone listens) and never below `SelfTestAnalysis.floorDBFS`.
public struct SelfTestMicResult: Sendable, Equatable {
    public var index: Int
    /// RMS while the test signal reached this mic (aligned by `delayMilliseconds` when known).
    public var levelDBFS: Double
    /// Largest |sample| of the raw signal capture, DC included: that is what clips.
    public var peakDBFS: Double
    /// RMS of the quiet capture.
    public var noiseFloorDBFS: Double
    /// `levelDBFS − noiseFloorDBFS` (the level includes the noise, so a dead mic reads ~0 dB).
    public var snrDB: Double
    /// Raw samples at or beyond `LevelMeter.clipThreshold`, quiet and signal capture together.
    public var clippedSamples: Int
    /// Speaker-to-mic delay (playback buffering + air + capture); nil without a clear peak.
    public var delayMilliseconds: Double?
    /// Normalised correlation at the peak, 0…1: ~1 for a clean copy of the signal, ~0 for noise.
    public var correlation: Double

    public init(index: Int, levelDBFS: Double, peakDBFS: Double, noiseFloorDBFS: Double, snrDB: Double,
                clippedSamples: Int, delayMilliseconds: Double?, correlation: Double) {
        self.index = index
        self.levelDBFS = levelDBFS
        self.peakDBFS = peakDBFS
        self.noiseFloorDBFS = noiseFloorDBFS
        self.snrDB = snrDB
        self.clippedSamples = clippedSamples
        self.delayMilliseconds = delayMilliseconds
        self.correlation = correlation
    }
}

/// The verdict: measurements for the record, and `problems` as sentences an installer can act on.
public struct SelfTestReport: Sendable, Equatable {
    /// Empty when the recording itself was unusable (then `problems` says why).
    public var mics: [SelfTestMicResult]
    /// How much quieter the echo-canceller output is than raw mic 0 once the canceller has
    /// converged; nil when it could not be measured (no output, or mic 0 hears nothing).
    public var echoReductionDB: Double?
    public var problems: [String]
    /// Computed, so a report can never claim to pass with problems listed.
    public var passed: Bool { problems.isEmpty }

    public init(mics: [SelfTestMicResult], echoReductionDB: Double?, problems: [String]) {
        self.mics = mics
        self.echoReductionDB = echoReductionDB
        self.problems = problems
    }
}

/// Limits a healthy appliance stays within. The defaults suit a meeting room.
public struct SelfTestThresholds: Sendable, Equatable {
    /// Below this the mic cannot tell the test signal from the room (or is dead).
    public var minimumSNRDB: Double
    /// WebRTC's canceller typically removes 25–40 dB once converged; 20 leaves margin for
    /// reverberant rooms while still catching a canceller that is off or misaligned.
    public var minimumEchoReductionDB: Double
    /// Any clipping distorts the echo path beyond what a linear canceller can model.
    public var maximumClippedSamples: Int
    /// The mics of one array sit centimetres apart (< 1 ms of sound travel); several ms
    /// between them means a channel is delayed or swapped in the capture path.
    public var maximumDelaySpreadMilliseconds: Double
    /// Longest delay searched. Must fit in how much longer the signal capture is than `played`.
    public var maximumDelayMilliseconds: Double
    /// A correlation peak below this is not trusted as a delay.
    public var minimumCorrelation: Double

    public init(minimumSNRDB: Double = 10, minimumEchoReductionDB: Double = 20, maximumClippedSamples: Int = 0,
                maximumDelaySpreadMilliseconds: Double = 5, maximumDelayMilliseconds: Double = 500,
                minimumCorrelation: Double = 0.2) {
        self.minimumSNRDB = minimumSNRDB
        self.minimumEchoReductionDB = minimumEchoReductionDB
        self.maximumClippedSamples = maximumClippedSamples
        self.maximumDelaySpreadMilliseconds = maximumDelaySpreadMilliseconds
        self.maximumDelayMilliseconds = maximumDelayMilliseconds
        self.minimumCorrelation = minimumCorrelation
    }
}

/// Turns a `SelfTestRecording` into a `SelfTestReport`. Pure and deterministic, so every
/// verdict can be reproduced from a saved recording; runs off the audio thread.
public enum SelfTestAnalysis {
    /// Lower than `LevelMeter.floorDBFS`: the noise floor of a good 24-bit mic is below
    /// -100 dBFS and should read as a number, not as the floor.
    public static let floorDBFS: Double = -120

    public static func analyze(_ recording: SelfTestRecording, thresholds: SelfTestThresholds = .init()) -> SelfTestReport {
        let inputProblems = validate(recording)
        guard inputProblems.isEmpty else {
            return SelfTestReport(mics: [], echoReductionDB: nil, problems: inputProblems)
        }
        let rate = Double(recording.rate)
        let played = recording.played.map(sample)
        let captureCount = recording.signalMics[0].count
        let maxLag = lagLimit(thresholds.maximumDelayMilliseconds, rate: rate, room: captureCount - played.count)
        let active = activeSpan(of: played)
        let mics = recording.signalMics.map(withoutDC)
        let peaks = correlationPeaks(mics: mics, played: played, maxLag: maxLag)

        var results: [SelfTestMicResult] = []
        for (i, mic) in mics.enumerated() {
            let peak = peaks[i]
            let delayLag = peak.correlation >= thresholds.minimumCorrelation ? peak.lag : nil
            let aligned = (active.lowerBound + (delayLag ?? 0))..<(active.upperBound + (delayLag ?? 0))
            let level = decibels(power: meanSquare(mic, aligned))
            let quiet = withoutDC(recording.quietMics[i])
            let noise = decibels(power: meanSquare(quiet, quiet.indices))
            var largest: Float = 0
            var clipped = 0
            for x in recording.quietMics[i] where x.isFinite && x.magnitude >= LevelMeter.clipThreshold { clipped += 1 }
            for x in recording.signalMics[i] where x.isFinite {
                largest = max(largest, x.magnitude)
                if x.magnitude >= LevelMeter.clipThreshold { clipped += 1 }
            }
            results.append(SelfTestMicResult(
                index: i, levelDBFS: level, peakDBFS: decibels(power: Double(largest) * Double(largest)),
                noiseFloorDBFS: noise, snrDB: level - noise, clippedSamples: clipped,
                delayMilliseconds: delayLag.map { Double($0) * 1000 / rate }, correlation: peak.correlation))
        }

        var problems: [String] = []
        for m in results { problems += micProblems(m, thresholds) }
        problems += delaySpreadProblems(results, thresholds)

        var echoReduction: Double?
        if recording.cleaned.count != captureCount {
            problems.append(recording.cleaned.isEmpty
                ? "no echo-canceller output was recorded"
                : "echo-canceller output has \(recording.cleaned.count) samples, the mic capture \(captureCount)")
        } else if results[0].snrDB >= thresholds.minimumSNRDB {
            // The last half of the signal: the canceller adapts during the first part, and the
            // installer cares about how it performs once converged.
            let lag = peaks[0].correlation >= thresholds.minimumCorrelation ? peaks[0].lag : 0
            let converged = (active.lowerBound + active.count / 2 + lag)..<(active.upperBound + lag)
            let raw = decibels(power: meanSquare(mics[0], converged))
            let cleaned = decibels(power: meanSquare(withoutDC(recording.cleaned), converged))
            let reduction = raw - cleaned
            echoReduction = reduction
            if reduction < thresholds.minimumEchoReductionDB {
                var text = "echo canceller removes only \(fixedDecimalText(reduction, 0)) dB (expected ≥ \(fixedDecimalText(thresholds.minimumEchoReductionDB, 0)) dB)"
                // The canceller cannot remove room noise, so a quiet signal caps what can be measured.
                if results[0].snrDB < thresholds.minimumEchoReductionDB + 3 {
                    text += "; the test signal is only \(fixedDecimalText(results[0].snrDB, 0)) dB above the noise at mic 0, raise the speaker volume"
                }
                problems.append(text)
            }
        }
        return SelfTestReport(mics: results, echoReductionDB: echoReduction, problems: problems)
    }

    // MARK: - Input checks

    /// Problems that make the recording unusable as a whole: the capture side handed over
    /// something inconsistent, and any measurement from it would mislead.
    static func validate(_ r: SelfTestRecording) -> [String] {
        var problems: [String] = []
        if r.rate <= 0 { problems.append("sample rate \(r.rate) Hz is not valid") }
        if r.signalMics.isEmpty { problems.append("no microphone was recorded") }
        if r.played.isEmpty {
            problems.append("no test signal was played")
        } else if !r.played.contains(where: { $0.isFinite && $0 != 0 }) {
            problems.append("the played test signal is silent")
        }
        if r.quietMics.count != r.signalMics.count {
            problems.append("\(r.quietMics.count) quiet captures for \(r.signalMics.count) mics")
        }
        for (i, q) in r.quietMics.enumerated() where q.isEmpty && i < r.signalMics.count {
            problems.append("mic \(i): no quiet capture to measure the noise floor")
        }
        if let first = r.signalMics.first {
            for (i, mic) in r.signalMics.enumerated() {
                if mic.count < r.played.count {
                    problems.append("mic \(i): signal capture has \(mic.count) samples, fewer than the \(r.played.count) played")
                } else if mic.count != first.count {
                    problems.append("mic \(i): signal capture has \(mic.count) samples, mic 0 has \(first.count)")
                }
            }
        }
        return problems
    }

    // MARK: - Delay

    /// Largest lag to search, in samples: the threshold, but never past the end of the capture.
    static func lagLimit(_ milliseconds: Double, rate: Double, room: Int) -> Int {
        let wanted = milliseconds.isFinite ? max(0, milliseconds * rate / 1000) : Double(room)
        return min(room, Int(min(wanted, Double(room)).rounded(.down)))
    }

    /// Per mic, the lag in 0...maxLag with the largest normalised |correlation| with `played`.
    ///
    /// Magnitude, not signed value: a mic wired with inverted polarity still has a delay.
    /// Normalised by the energies of `played` and of the mic window at that lag (so it is the
    /// cosine of the angle between them), which makes it independent of gain: 1 for a clean
    /// delayed copy, ≈ 1/√(1 + noise/signal) with noise, ~0 for anything unrelated.
    static func correlationPeaks(mics: [[Double]], played: [Double], maxLag: Int) -> [(lag: Int, correlation: Double)] {
        let window = played.count + maxLag
        // Zero-padded to cover the whole window: then the circular correlation the FFT
        // computes has no wrapped-around terms at the lags searched.
        let fft = FFT(count: FFT.size(atLeast: window))
        var playedRe = [Double](repeating: 0, count: fft.count)
        var playedIm = [Double](repeating: 0, count: fft.count)
        playedRe.replaceSubrange(0..<played.count, with: played)
        fft.forward(real: &playedRe, imaginary: &playedIm)
        let playedEnergy = played.reduce(0) { $0 + $1 * $1 }

        var peaks: [(lag: Int, correlation: Double)] = []
        // Two mics per transform, one as the real and one as the imaginary part: both are real,
        // so IFFT(FFT(a + ib)·conj(P)) = corr(a) + i·corr(b) and the work halves.
        for first in stride(from: 0, to: mics.count, by: 2) {
            let pair = first + 1 < mics.count ? [mics[first], mics[first + 1]] : [mics[first]]
            var re = [Double](repeating: 0, count: fft.count)
            var im = [Double](repeating: 0, count: fft.count)
            re.replaceSubrange(0..<window, with: pair[0][0..<window])
            if pair.count > 1 { im.replaceSubrange(0..<window, with: pair[1][0..<window]) }
            fft.forward(real: &re, imaginary: &im)
            for k in 0..<fft.count {
                // (re + i·im)·(pr − i·pi)
                let (r, i, pr, pi) = (re[k], im[k], playedRe[k], playedIm[k])
                re[k] = r * pr + i * pi
                im[k] = i * pr - r * pi
            }
            fft.inverse(real: &re, imaginary: &im)
            peaks.append(bestLag(re, mic: pair[0], playedCount: played.count, playedEnergy: playedEnergy, maxLag: maxLag))
            if pair.count > 1 {
                peaks.append(bestLag(im, mic: pair[1], playedCount: played.count, playedEnergy: playedEnergy, maxLag: maxLag))
            }
        }
        return peaks
    }

    private static func bestLag(_ correlation: [Double], mic: [Double], playedCount: Int, playedEnergy: Double,
                                maxLag: Int) -> (lag: Int, correlation: Double) {
        // Energy of mic[lag ..< lag + playedCount] for every lag, from running sums.
        var prefix = [Double](repeating: 0, count: playedCount + maxLag + 1)
        for n in 0..<(playedCount + maxLag) { prefix[n + 1] = prefix[n] + mic[n] * mic[n] }
        var best = (lag: 0, correlation: 0.0)
        for lag in 0...maxLag {
            let micEnergy = prefix[lag + playedCount] - prefix[lag]
            guard micEnergy > 0, playedEnergy > 0 else { continue }   // silence correlates with nothing
            let c = min(1, correlation[lag].magnitude / (playedEnergy * micEnergy).squareRoot())
            if c > best.correlation { best = (lag, c) }
        }
        return best
    }

    /// Mics whose delay is more than the allowed spread away from the typical one. The
    /// reference is the median delay rather than mic 0, so one bad mic 0 does not flag all others.
    static func delaySpreadProblems(_ mics: [SelfTestMicResult], _ t: SelfTestThresholds) -> [String] {
        let timed = mics.filter { $0.delayMilliseconds != nil }
            .sorted { ($0.delayMilliseconds!, $0.index) < ($1.delayMilliseconds!, $1.index) }
        guard timed.count > 1 else { return [] }
        // Lower median; among mics with that delay the lowest-numbered one is named.
        let referenceDelay = timed[(timed.count - 1) / 2].delayMilliseconds!
        let reference = timed.first { $0.delayMilliseconds == referenceDelay }!
        var problems: [String] = []
        for m in mics {
            guard let d = m.delayMilliseconds, (d - referenceDelay).magnitude > t.maximumDelaySpreadMilliseconds else { continue }
            problems.append("mic \(m.index): delay \(fixedDecimalText(d, 1)) ms differs from mic \(reference.index) (\(fixedDecimalText(referenceDelay, 1)) ms)")
        }
        return problems
    }

    // MARK: - Levels

    private static func micProblems(_ m: SelfTestMicResult, _ t: SelfTestThresholds) -> [String] {
        var problems: [String] = []
        let levels = "\(fixedDecimalText(m.levelDBFS, 0)) dBFS, noise floor \(fixedDecimalText(m.noiseFloorDBFS, 0)) dBFS"
        if m.snrDB < t.minimumSNRDB {
            problems.append(m.delayMilliseconds == nil
                ? "mic \(m.index): no signal (\(levels))"
                : "mic \(m.index): test signal only \(fixedDecimalText(m.snrDB, 0)) dB above the noise (\(levels)) — raise the speaker volume or quieten the room")
        } else if m.delayMilliseconds == nil {
            problems.append("mic \(m.index): hears sound but not the test signal (correlation \(fixedDecimalText(m.correlation, 2))) — keep the room quiet during the test")
        }
        if m.clippedSamples > t.maximumClippedSamples {
            problems.append("mic \(m.index): \(m.clippedSamples) clipped samples — lower the speaker or mic gain")
        }
        return problems
    }

    /// The stretch of `played` that carries the signal (from the first to the last sample within
    /// 60 dB of its peak), so leading or trailing silence does not dilute the measured level.
    static func activeSpan(of played: [Double]) -> Range<Int> {
        let peak = played.reduce(0) { max($0, $1.magnitude) }
        let threshold = peak * 0.001
        guard peak > 0, let first = played.firstIndex(where: { $0.magnitude >= threshold }),
              let last = played.lastIndex(where: { $0.magnitude >= threshold }) else { return 0..<played.count }
        return first..<(last + 1)
    }

    /// NaN and infinity become silence, as in `withoutDC`.
    private static func sample(_ x: Float) -> Double { x.isFinite ? Double(x) : 0 }

    /// The capture with its mean removed: DC offset is inaudible after the high-pass filter,
    /// and a mic stuck at a constant value then reads as the silent mic it is. NaN and infinity
    /// become the mean (zero here), so one bad sample cannot turn every result into NaN.
    static func withoutDC(_ x: [Float]) -> [Double] {
        var sum = 0.0
        var finite = 0
        for v in x where v.isFinite {
            sum += Double(v)
            finite += 1
        }
        let mean = finite > 0 ? sum / Double(finite) : 0
        return x.map { $0.isFinite ? Double($0) - mean : 0 }
    }

    static func meanSquare(_ x: [Double], _ range: Range<Int>) -> Double {
        let r = range.clamped(to: x.indices)
        guard !r.isEmpty else { return 0 }
        var sum = 0.0
        for i in r { sum += x[i] * x[i] }
        return sum / Double(r.count)
    }

    static func decibels(power: Double) -> Double {
        guard power > 0, power.isFinite else { return power.isInfinite ? -floorDBFS : floorDBFS }
        return max(floorDBFS, 10 * RoomMath.log10(power))
    }
}

extension SelfTestReport {
    /// True when every mic measured well and the echo figure alone missed its threshold: the
    /// one result that depends on the canceller's state (it may still be finding the echo path
    /// after loud double talk) rather than on the hardware, so a second measurement is fair.
    public func failedOnlyOnEcho(_ thresholds: SelfTestThresholds = .init()) -> Bool {
        guard let echo = echoReductionDB, echo < thresholds.minimumEchoReductionDB, problems.count == 1, !mics.isEmpty else { return false }
        return mics.allSatisfy {
            $0.clippedSamples <= thresholds.maximumClippedSamples && $0.snrDB >= thresholds.minimumSNRDB && $0.delayMilliseconds != nil
        }
    }
}
