import RoomBase

/// What `roomctl selftest` captured: a quiet period, then the test signal on the speaker.
///
/// Raw captures, before any processing (and before the test talker is added), because the
/// installer needs to know what the hardware does (gain, clipping, a dead capsule); `cleaned`
/// is the one processed stream, kept to see whether the echo canceller earns its keep and
/// whether it keeps a talker during double talk.
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
    /// Echo-canceller output over the same span as `signalMics` (test talker included).
    public var cleaned: [Float]
    /// Which part of `played` measures what (`SelfTestPlan.segments`). Nil: `played` is a sweep
    /// alone, which measures the mics, and the echo is measured over its second half.
    public var segments: SelfTestSegments?

    public init(rate: Int, quietMics: [[Float]], played: [Float], signalMics: [[Float]], cleaned: [Float],
                segments: SelfTestSegments? = nil) {
        self.rate = rate
        self.quietMics = quietMics
        self.played = played
        self.signalMics = signalMics
        self.cleaned = cleaned
        self.segments = segments
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

/// How much of a talker the processing chain keeps while the far end plays: the output during
/// double talk against the output for the same talker alone (no echo), over the talk.
public struct SelfTestDoubleTalk: Sendable, Equatable {
    /// `−20·log10(<dt, alone> / <alone, alone>)`: the talker's level the double talk costs
    /// (0 = all kept; a canceller that mutes the talker loses many dB).
    public var lossDB: Double
    /// Normalised correlation of the two outputs, 0…1: how much of the double-talk output is
    /// that talker (residual echo and a chopped talker both lower it).
    public var correlation: Double
    /// Share of the talker's 10 ms frames (those within 30 dB of its loudest) that came out
    /// ≥ 10 dB quieter in double talk: a talker chopped in half its frames can still show a few
    /// dB of average loss.
    public var choppedFraction: Double
    /// RMS of the talker-alone output over the talk, dBFS: the talker as the room would hear it.
    public var talkerLevelDBFS: Double

    public init(lossDB: Double, correlation: Double, choppedFraction: Double, talkerLevelDBFS: Double) {
        self.lossDB = lossDB
        self.correlation = correlation
        self.choppedFraction = choppedFraction
        self.talkerLevelDBFS = talkerLevelDBFS
    }
}

/// The verdict: measurements for the record, and `problems` as sentences an installer can act on.
public struct SelfTestReport: Sendable, Equatable {
    /// Empty when the recording itself was unusable (then `problems` says why).
    public var mics: [SelfTestMicResult]
    /// How much quieter the echo-canceller output is than raw mic 0 once the canceller has
    /// converged; nil when it could not be measured (no output, or mic 0 hears nothing).
    public var echoReductionDB: Double?
    /// Nil when the recording has no double-talk part or it could not be measured.
    public var doubleTalk: SelfTestDoubleTalk?
    /// The array's checks (SelfTestArray.swift); nil on a board without an array.
    public var array: SelfTestArrayResult?
    public var problems: [String]
    /// Computed, so a report can never claim to pass with problems listed.
    public var passed: Bool { problems.isEmpty }

    public init(mics: [SelfTestMicResult], echoReductionDB: Double?, doubleTalk: SelfTestDoubleTalk? = nil,
                array: SelfTestArrayResult? = nil, problems: [String]) {
        self.mics = mics
        self.echoReductionDB = echoReductionDB
        self.doubleTalk = doubleTalk
        self.array = array
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
    /// Double talk: the talker may lose this much level. Measured on the sim board: roomd's
    /// canceller 0.0-0.4 dB, webrtc's AEC (which mutes the talker while the far end plays)
    /// 17-26 dB; 3 dB is a talker noticeably quieter whenever the far end speaks.
    public var maximumDoubleTalkLossDB: Double
    /// Double talk: the output must be at least this much the talker. Measured: roomd's
    /// canceller 0.98-0.999, webrtc's AEC 0.54-0.82 (debug and release runs).
    public var minimumDoubleTalkCorrelation: Double
    /// Double talk is measured only when the test talker (as the chain passes it alone) is this
    /// far above mic 0's noise floor: the room's sound would otherwise be compared with itself.
    public var minimumTalkerAboveNoiseDB: Double
    /// A mic this far below the median of the mics during the test signal is dead (or its port
    /// blocked). The mics of one array match within a few dB (the sim board's within 0.5 dB,
    /// MEMS capsules typically ±1-3 dB), so 20 dB is no capsule's tolerance; a dead mic on the
    /// sim board reads ~40 dB below (its own −70 dBFS noise against the sweep's −30 dBFS).
    public var deadMicBelowMedianDB: Double
    /// A mic's delay from the speaker fits the geometry when within this fraction of the time
    /// sound takes across the array's largest spacing (never less than one sample): a quarter
    /// is 47 µs (2.2 samples at 48 kHz) on the sim board's 64 mm, while two neighbouring mics
    /// exchanged there move by ~90 µs and opposite ones by up to 187 µs.
    public var arrayDelayToleranceFraction: Double
    /// Two mics' cross-correlation peak below this is no delay between them: they do not hear
    /// the same sound (one is dead, or drowned by the room).
    public var minimumArrayCorrelation: Double

    public init(minimumSNRDB: Double = 10, minimumEchoReductionDB: Double = 20, maximumClippedSamples: Int = 0,
                maximumDelaySpreadMilliseconds: Double = 5, maximumDelayMilliseconds: Double = 500,
                minimumCorrelation: Double = 0.2, maximumDoubleTalkLossDB: Double = 3,
                minimumDoubleTalkCorrelation: Double = 0.9, minimumTalkerAboveNoiseDB: Double = 15,
                deadMicBelowMedianDB: Double = 20, arrayDelayToleranceFraction: Double = 0.25,
                minimumArrayCorrelation: Double = 0.3) {
        self.deadMicBelowMedianDB = deadMicBelowMedianDB
        self.arrayDelayToleranceFraction = arrayDelayToleranceFraction
        self.minimumArrayCorrelation = minimumArrayCorrelation
        self.minimumSNRDB = minimumSNRDB
        self.minimumEchoReductionDB = minimumEchoReductionDB
        self.maximumClippedSamples = maximumClippedSamples
        self.maximumDelaySpreadMilliseconds = maximumDelaySpreadMilliseconds
        self.maximumDelayMilliseconds = maximumDelayMilliseconds
        self.minimumCorrelation = minimumCorrelation
        self.maximumDoubleTalkLossDB = maximumDoubleTalkLossDB
        self.minimumDoubleTalkCorrelation = minimumDoubleTalkCorrelation
        self.minimumTalkerAboveNoiseDB = minimumTalkerAboveNoiseDB
    }
}

/// Turns a `SelfTestRecording` into a `SelfTestReport`. Pure and deterministic, so every
/// verdict can be reproduced from a saved recording; runs off the audio thread.
public enum SelfTestAnalysis {
    /// Lower than `LevelMeter.floorDBFS`: the noise floor of a good 24-bit mic is below
    /// -100 dBFS and should read as a number, not as the floor.
    public static let floorDBFS: Double = -120

    /// `array`: the board's array (a board with 2 or more mic positions): adds the dead-mic and
    /// geometry checks and, with `beam`, the array's noise gain (`SelfTestReport.array`).
    public static func analyze(_ recording: SelfTestRecording, thresholds: SelfTestThresholds = .init(),
                               array: SelfTestArrayGeometry? = nil, beam: (any SelfTestBeam)? = nil) -> SelfTestReport {
        let inputProblems = validate(recording)
        guard inputProblems.isEmpty else {
            return SelfTestReport(mics: [], echoReductionDB: nil, problems: inputProblems)
        }
        let rate = Double(recording.rate)
        let allPlayed = recording.played.map(sample)
        let captureCount = recording.signalMics[0].count
        let segments = recording.segments ?? legacySegments(allPlayed)
        // The mics are measured on the sweep alone: the burst that follows is no sharper a
        // delay reference, and its echo must not count as the sweep's level.
        let sweep = segments.sweep
        let played = Array(allPlayed[sweep])
        let maxLag = lagLimit(thresholds.maximumDelayMilliseconds, rate: rate, room: captureCount - sweep.upperBound)
        let active = activeSpan(of: played)
        let mics = recording.signalMics.map(withoutDC)
        let sweepMics = mics.map { Array($0[sweep.lowerBound..<(sweep.upperBound + maxLag)]) }
        let peaks = correlationPeaks(mics: sweepMics, played: played, maxLag: maxLag)

        var results: [SelfTestMicResult] = []
        for (i, mic) in sweepMics.enumerated() {
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

        var arrayResult: SelfTestArrayResult?
        var deadProblems: [Int: String] = [:]
        if let array, results.count >= 2 {
            let (dead, median, vsMedian) = deadMics(recording, results, thresholds)
            for d in dead { deadProblems[d.index] = deadMicProblem(d, level: results[d.index].levelDBFS, median: median) }
            let live = results.indices.filter { deadProblems[$0] == nil }
            // The sweep as it reached the reference mic (its delay from the speaker).
            let referenceLag = live.first.flatMap { peaks[$0].correlation >= thresholds.minimumCorrelation ? peaks[$0].lag : nil } ?? 0
            let start = sweep.lowerBound + referenceLag
            let geometry = geometryCheck(mics: mics, geometry: array, live: live,
                                         window: (start + active.lowerBound)..<(start + active.upperBound),
                                         rate: recording.rate, thresholds: thresholds)
            var gain: SelfTestArrayGain?
            if let beam, let reference = live.first {
                gain = arrayGain(recording, mics: mics, beam: beam, reference: reference, speaker: array.speaker,
                                 sweepSpan: (start + active.lowerBound)..<(start + active.upperBound))
            }
            arrayResult = SelfTestArrayResult(levelVsMedianDB: vsMedian, medianLevelDBFS: median, deadMics: dead,
                                              geometry: geometry, gain: gain)
        }

        var problems: [String] = []
        for m in results {
            // A dead mic's own line says more than "no signal" (the same fact, against the others).
            if let dead = deadProblems[m.index] { problems.append(dead) }
            problems += micProblems(m, thresholds, levels: deadProblems[m.index] == nil)
        }
        problems += delaySpreadProblems(results, thresholds)
        if case .checked(let delays)? = arrayResult?.geometry, let text = geometryProblem(delays) { problems.append(text) }

        var echoReduction: Double?
        var doubleTalk: SelfTestDoubleTalk?
        if recording.cleaned.count != captureCount {
            problems.append(recording.cleaned.isEmpty
                ? "no echo-canceller output was recorded"
                : "echo-canceller output has \(recording.cleaned.count) samples, the mic capture \(captureCount)")
        } else {
            let cleaned = withoutDC(recording.cleaned)
            if results[0].snrDB >= thresholds.minimumSNRDB {
                // Over the part of the far-end signal where the canceller has had its chance to
                // learn (`segments.echo`), shifted by the delay to mic 0: the installer cares about
                // how it performs once converged, as it is in a call.
                let lag = peaks[0].correlation >= thresholds.minimumCorrelation ? peaks[0].lag : 0
                // It ends where the test talker starts (added to the mics without a delay).
                let end = min(segments.echo.upperBound + lag, segments.doubleTalk?.lowerBound ?? .max)
                let converged = (segments.echo.lowerBound + lag)..<max(segments.echo.lowerBound + lag, end)
                let raw = decibels(power: meanSquare(mics[0], converged))
                let reduction = raw - decibels(power: meanSquare(cleaned, converged))
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
            if let dt = segments.doubleTalk, let alone = segments.talkerAlone {
                switch measureDoubleTalk(cleaned, doubleTalk: dt, alone: alone, rate: recording.rate) {
                case .measured(let m) where m.talkerLevelDBFS - results[0].noiseFloorDBFS < thresholds.minimumTalkerAboveNoiseDB:
                    // The room's own sound differs between the two parts and would read as a
                    // talker lost (someone talking through the test: 11-16 dB "lost" with
                    // roomd's canceller). Not measured; a loud room is a mic problem already
                    // when it drowns the sweep.
                    break
                case .measured(let m):
                    doubleTalk = m
                    if m.lossDB > thresholds.maximumDoubleTalkLossDB || m.correlation < thresholds.minimumDoubleTalkCorrelation {
                        problems.append("echo canceller cuts a talker who speaks while the far end plays: \(fixedDecimalText(m.lossDB, 1)) dB of the test talker lost, "
                            + "correlation \(fixedDecimalText(m.correlation, 2)), \(fixedDecimalText(m.choppedFraction * 100, 0)) % of its syllables chopped "
                            + "(expected ≤ \(fixedDecimalText(thresholds.maximumDoubleTalkLossDB, 1)) dB, ≥ \(fixedDecimalText(thresholds.minimumDoubleTalkCorrelation, 2)))")
                    }
                case .talkerMissing(let level):
                    problems.append("the test talker did not come through the processing even without echo (\(fixedDecimalText(level, 0)) dBFS): is noise suppression or gain control misconfigured?")
                case .notMeasurable:
                    problems.append("double talk could not be measured: its parts lie outside the recording")
                }
            }
        }
        return SelfTestReport(mics: results, echoReductionDB: echoReduction, doubleTalk: doubleTalk, array: arrayResult, problems: problems)
    }

    /// A recording of a sweep alone: the sweep measures the mics, and the echo is measured
    /// over the second half of it (the canceller adapts during the first).
    static func legacySegments(_ played: [Double]) -> SelfTestSegments {
        let active = activeSpan(of: played)
        return SelfTestSegments(sweep: 0..<played.count, echo: (active.lowerBound + active.count / 2)..<active.upperBound)
    }

    enum DoubleTalkOutcome: Equatable {
        case measured(SelfTestDoubleTalk)
        /// The talker-alone output is no louder than this (dBFS): nothing to compare with.
        case talkerMissing(Double)
        case notMeasurable
    }

    /// The talker alone through the chain is the reference: the same samples were added to the
    /// mics in both parts, so whatever high-pass, noise suppression and gain control do to a
    /// talker is in both, and what differs is what double talk costs. Lag 0: both went through
    /// the same chain with the same delay. The output of the last `outputDelay` of each part
    /// (the chain's own delay, 9 ms measured) is not lost: each part is followed by more recording.
    static func measureDoubleTalk(_ cleaned: [Double], doubleTalk dt: Range<Int>, alone: Range<Int>, rate: Int) -> DoubleTalkOutcome {
        let count = min(dt.count, alone.count)
        guard count > 0, dt.lowerBound >= 0, alone.lowerBound >= 0,
              dt.lowerBound + count <= cleaned.count, alone.lowerBound + count <= cleaned.count else { return .notMeasurable }
        var cross = 0.0, aa = 0.0, dd = 0.0
        for i in 0..<count {
            let a = cleaned[alone.lowerBound + i], d = cleaned[dt.lowerBound + i]
            cross += a * d; aa += a * a; dd += d * d
        }
        let level = decibels(power: aa / Double(count))
        // Below −80 dBFS the "talker" is the room's noise after suppression.
        guard level > -80 else { return .talkerMissing(level) }
        let kept = cross / aa
        let loss = kept > 1e-6 ? -20 * RoomMath.log10(kept) : 120
        let correlation = dd > 0 ? max(0, min(1, cross / (aa * dd).squareRoot())) : 0
        // Per 10 ms frame.
        let frame = max(1, rate / 100)
        var frames: [(alone: Double, dt: Double)] = []
        var loudest = 0.0
        for f in stride(from: 0, to: count - frame + 1, by: frame) {
            var ea = 0.0, ed = 0.0
            for i in f..<(f + frame) {
                let a = cleaned[alone.lowerBound + i], d = cleaned[dt.lowerBound + i]
                ea += a * a; ed += d * d
            }
            frames.append((ea, ed))
            loudest = max(loudest, ea)
        }
        let talking = frames.filter { $0.alone > loudest * 1e-3 }
        let chopped = talking.filter { $0.dt < $0.alone / 10 }.count
        return .measured(SelfTestDoubleTalk(lossDB: loss, correlation: correlation,
                                            choppedFraction: talking.isEmpty ? 0 : Double(chopped) / Double(talking.count),
                                            talkerLevelDBFS: level))
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
        if let seg = r.segments {
            var parts = [("sweep", seg.sweep), ("echo", seg.echo)]
            if let dt = seg.doubleTalk { parts.append(("double-talk", dt)) }
            if let alone = seg.talkerAlone { parts.append(("talker-alone", alone)) }
            for (name, range) in parts where range.isEmpty || range.lowerBound < 0 || range.upperBound > r.played.count {
                problems.append("the \(name) part (\(range.lowerBound)..<\(range.upperBound)) is not within the \(r.played.count) samples played")
            }
            if (seg.doubleTalk == nil) != (seg.talkerAlone == nil) {
                problems.append("double talk needs both its parts, the talker with and without the far end")
            }
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

    /// `levels`: check the level and the signal too (not for a mic already reported dead).
    private static func micProblems(_ m: SelfTestMicResult, _ t: SelfTestThresholds, levels checkLevels: Bool = true) -> [String] {
        var problems: [String] = []
        let levels = "\(fixedDecimalText(m.levelDBFS, 0)) dBFS, noise floor \(fixedDecimalText(m.noiseFloorDBFS, 0)) dBFS"
        if checkLevels && m.snrDB < t.minimumSNRDB {
            problems.append(m.delayMilliseconds == nil
                ? "mic \(m.index): no signal (\(levels))"
                : "mic \(m.index): test signal only \(fixedDecimalText(m.snrDB, 0)) dB above the noise (\(levels)) — raise the speaker volume or quieten the room")
        } else if checkLevels && m.delayMilliseconds == nil {
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
    /// A double-talk problem may come with it: a canceller still finding the echo path cannot
    /// tell the talker from the echo either.
    public func failedOnlyOnEcho(_ thresholds: SelfTestThresholds = .init()) -> Bool {
        let talkerCut = doubleTalk.map {
            $0.lossDB > thresholds.maximumDoubleTalkLossDB || $0.correlation < thresholds.minimumDoubleTalkCorrelation
        } ?? false
        guard let echo = echoReductionDB, echo < thresholds.minimumEchoReductionDB, problems.count == (talkerCut ? 2 : 1),
              !mics.isEmpty else { return false }
        return mics.allSatisfy {
            $0.clippedSamples <= thresholds.maximumClippedSamples && $0.snrDB >= thresholds.minimumSNRDB && $0.delayMilliseconds != nil
        }
    }
}
