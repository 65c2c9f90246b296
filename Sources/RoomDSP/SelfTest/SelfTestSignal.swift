import RoomBase

/// The signals of `roomctl selftest` (which one plays when: `SelfTestPlan`).
///
/// An exponential sine sweep for the hardware: it spends equal time in every octave, so a small
/// speaker's weak bass and a mic's roll-off each still leave plenty of energy to measure, and a
/// sweep correlates with a delayed copy of itself in one sharp peak (a tone would correlate at
/// every period). A broadband noise burst for the echo canceller: a sweep excites each frequency
/// for a block or two, which an adaptive filter that corrects a fraction of its error per block
/// (roomd's Kalman canceller: at most ~23 %) cannot learn from, while noise excites every
/// frequency all the time, as speech does over a second or two. A synthetic talker for double
/// talk. All deterministic, so the analysis can be checked against known answers.
public enum SelfTestSignal {
    /// Where the sweep starts: above mains hum (50/60 Hz) and what appliance speakers can't play.
    public static let startFrequency = 150.0
    /// Where it ends, as a fraction of the sample rate: short of Nyquist so resamplers and
    /// anti-alias filters, which roll off near it, don't look like a faulty mic.
    public static let endFrequencyFraction = 0.45
    /// Length of each fade: long enough that the speaker doesn't click (a click is broadband
    /// and would blur the delay measurement), short enough not to waste sweep time.
    public static let fadeSeconds = 0.02

    /// `seconds` of sweep at `rate` Hz whose peak is `levelDBFS` (capped at 0 dBFS: anything
    /// louder would be clipped by the converter and ruin the clipping check). Empty when the
    /// rate or duration is not positive.
    public static func sweep(rate: Int, seconds: Double, levelDBFS: Float) -> [Float] {
        guard rate > 0, seconds.isFinite, seconds > 0 else { return [] }
        let count = Int((seconds * Double(rate)).rounded())
        guard count > 0 else { return [] }
        let peak = Double(min(1, linear(fromDB: levelDBFS)))
        let endFrequency = endFrequencyFraction * Double(rate)
        let startFrequency = min(Self.startFrequency, endFrequency / 4)   // odd low rates still sweep
        let duration = Double(count) / Double(rate)
        let logRatio = RoomMath.ln(endFrequency / startFrequency)
        // Instantaneous frequency f1·e^(t·L/T) integrates to this many cycles by time t.
        let cyclesScale = startFrequency * duration / logRatio
        let fade = min(Int(fadeSeconds * Double(rate)), count / 4)

        var out = [Float](repeating: 0, count: count)
        for i in 0..<count {
            let t = Double(i) / Double(rate)
            let cycles = cyclesScale * (RoomMath.exp(t * logRatio / duration) - 1)
            // Only the fraction of a cycle matters; dropping the whole cycles keeps the phase exact.
            let phase = 2 * Double.pi * (cycles - cycles.rounded(.down))
            var gain = peak
            let fromEdge = min(i, count - 1 - i)
            if fromEdge < fade {
                gain *= 0.5 * (1 - RoomMath.sinCos(Double.pi * Double(fromEdge) / Double(fade)).cos)
            }
            out[i] = Float(gain * RoomMath.sinCos(phase).sin)
        }
        return out
    }

    /// `seconds` of band-limited noise with a speech-like spectral tilt, peak `levelDBFS`.
    ///
    /// White noise (SplitMix64, `seed`), high-passed at `startFrequency` (what the sweep starts
    /// at, for the same reason), low-passed at 12 kHz (or 0.45 × rate when that is lower: the
    /// band roomd's canceller adapts and Opus codes), and tilted by a first-order low-pass at
    /// `noiseTiltFrequency`: flat below it and −6 dB per octave above, as speech's long-term
    /// spectrum, so the burst sounds like a hiss rather than a hiss of treble, and its power
    /// sits where the room's talkers and the far end's voices put theirs. Faded in and out like
    /// the sweep. Empty when the rate or duration is not positive.
    public static func noise(rate: Int, seconds: Double, levelDBFS: Float, seed: UInt64 = 0x5E1F_7E57) -> [Float] {
        guard rate > 0, seconds.isFinite, seconds > 0 else { return [] }
        let count = Int((seconds * Double(rate)).rounded())
        guard count > 0 else { return [] }
        let r = Double(rate)
        var highPass = Biquad.highPass(frequency: min(startFrequency, 0.1 * r), rate: r)
        var lowPass = Biquad.lowPass(frequency: min(noiseTopFrequency, endFrequencyFraction * r), rate: r)
        let tilt = RoomMath.exp(-2 * Double.pi * min(noiseTiltFrequency, 0.2 * r) / r)   // one-pole coefficient
        var rng = SplitMix64(seed: seed)
        var tilted = 0.0
        var out = [Double](repeating: 0, count: count)
        for i in 0..<count {
            // Sum of four uniforms: close enough to Gaussian, and bounded.
            let white = rng.unit() + rng.unit() + rng.unit() + rng.unit() - 2
            tilted = white * (1 - tilt) + tilted * tilt
            out[i] = lowPass.process(highPass.process(tilted))
        }
        return normalised(out, peakDBFS: levelDBFS, rate: rate)
    }

    /// Where the noise burst's band ends (12 kHz: roomd's canceller adapts up to there).
    public static let noiseTopFrequency = 12_000.0
    /// Corner of the burst's −6 dB/octave tilt.
    public static let noiseTiltFrequency = 1_000.0

    /// A synthetic near-end talker, `seconds` long, whose RMS over the whole signal (pauses
    /// included) is `levelDBFS`: a train of vowels — a glottal pulse train at a gliding pitch
    /// (105–155 Hz) through three formant resonators, a different vowel each syllable (/a/ /i/
    /// /u/ /e/ /o/), 0.2 s syllables with 0.08 s pauses — and a short /s/-like hiss (noise
    /// around 5.6 kHz, ~15 dB below the vowels) in every third pause, so the talker covers
    /// speech's band from the pitch to 8 kHz (measured: −25 dB of its power at 4–8 kHz) and
    /// starts and stops as speech does. Not speech (no words, a regular rhythm), but what
    /// the self-test needs from a talker: voiced harmonics, formants, onsets and pauses, in
    /// the same place every run. Empty when the rate or duration is not positive.
    public static func talker(rate: Int, seconds: Double, levelDBFS: Float, seed: UInt64 = 0x7A1C) -> [Float] {
        guard rate > 0, seconds.isFinite, seconds > 0 else { return [] }
        let count = Int((seconds * Double(rate)).rounded())
        guard count > 0 else { return [] }
        let r = Double(rate)
        // (F1, F2, F3) in Hz, textbook averages for an adult voice.
        let vowels: [(Double, Double, Double)] = [(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240),
                                                  (530, 1840, 2480), (570, 840, 2410)]
        let syllable = Int(0.2 * r), pause = Int(0.08 * r), ramp = Int(0.015 * r)
        let cycle = syllable + pause
        var rng = SplitMix64(seed: seed)
        var formants: [Biquad] = []
        var hiss = Biquad.bandPass(frequency: min(5_600, 0.3 * r), q: 0.8, rate: r)
        var glottis = 0.0            // one-pole low-pass: the glottal pulse's roll-off
        let glottalPole = RoomMath.exp(-2 * Double.pi * min(600, 0.1 * r) / r)
        var phase = 1.0              // of the pitch period; ≥ 1 fires a pulse
        var out = [Double](repeating: 0, count: count)
        for i in 0..<count {
            let k = i / cycle, inCycle = i % cycle
            if inCycle == 0 {
                let v = vowels[k % vowels.count]
                let nyquistSafe = 0.45 * r
                formants = [Biquad.bandPass(frequency: min(v.0, nyquistSafe), q: 6, rate: r),
                            Biquad.bandPass(frequency: min(v.1, nyquistSafe), q: 10, rate: r),
                            Biquad.bandPass(frequency: min(v.2, nyquistSafe), q: 14, rate: r)]
            }
            let t = Double(i) / r
            // Pitch: a slow glide within each syllable plus a falling phrase contour.
            let f0 = 135 + 20 * RoomMath.sinCos(2 * Double.pi * 1.7 * t).sin - 10 * (t - t.rounded(.down))
            phase += f0 / r
            var pulse = 0.0
            if phase >= 1 {
                phase -= 1
                pulse = 1
            }
            glottis = pulse * (1 - glottalPole) + glottis * glottalPole
            var sample = 0.0
            if inCycle < syllable {
                let breath = 0.02 * (rng.unit() - 0.5)
                let source = glottis + breath
                let voiced = formants[0].process(source) + 0.5 * formants[1].process(source) + 0.25 * formants[2].process(source)
                let edge = min(inCycle, syllable - 1 - inCycle)
                let envelope = edge < ramp ? 0.5 * (1 - RoomMath.sinCos(Double.pi * Double(edge) / Double(ramp)).cos) : 1
                sample = voiced * envelope
            } else {
                // Keep the resonators' state decaying in the pause.
                for j in formants.indices { _ = formants[j].process(0) }
                let h = hiss.process(rng.unit() - 0.5)
                if k % 3 == 2 {
                    let edge = min(inCycle - syllable, cycle - 1 - inCycle)
                    let envelope = edge < ramp ? 0.5 * (1 - RoomMath.sinCos(Double.pi * Double(edge) / Double(ramp)).cos) : 1
                    sample = 0.004 * h * envelope
                }
            }
            out[i] = sample
        }
        // Scale to the RMS asked for.
        var power = 0.0
        for x in out { power += x * x }
        power /= Double(count)
        guard power > 0 else { return [Float](repeating: 0, count: count) }
        let gain = Double(min(1, linear(fromDB: levelDBFS))) / power.squareRoot()
        return out.map { Float(max(-1, min(1, $0 * gain))) }
    }

    /// `x` scaled to a peak of `peakDBFS` (capped at 0 dBFS), with the sweep's fades at both ends.
    private static func normalised(_ x: [Double], peakDBFS: Float, rate: Int) -> [Float] {
        let count = x.count
        let fade = min(Int(fadeSeconds * Double(rate)), count / 4)
        var faded = x
        for i in 0..<count {
            let fromEdge = min(i, count - 1 - i)
            if fromEdge < fade { faded[i] *= 0.5 * (1 - RoomMath.sinCos(Double.pi * Double(fromEdge) / Double(fade)).cos) }
        }
        let peak = faded.reduce(0) { max($0, $1.magnitude) }
        guard peak > 0 else { return [Float](repeating: 0, count: count) }
        let gain = Double(min(1, linear(fromDB: peakDBFS))) / peak
        return faded.map { Float($0 * gain) }
    }
}

/// A second-order IIR section (RBJ's cookbook forms), in Double: the test signals' filters.
struct Biquad {
    var b0 = 1.0, b1 = 0.0, b2 = 0.0, a1 = 0.0, a2 = 0.0
    var z1 = 0.0, z2 = 0.0

    mutating func process(_ x: Double) -> Double {
        let y = b0 * x + z1
        z1 = b1 * x - a1 * y + z2
        z2 = b2 * x - a2 * y
        return y
    }

    private static func make(_ b: (Double, Double, Double), _ a: (Double, Double, Double)) -> Biquad {
        Biquad(b0: b.0 / a.0, b1: b.1 / a.0, b2: b.2 / a.0, a1: a.1 / a.0, a2: a.2 / a.0)
    }

    /// Butterworth (Q = 1/√2) low-pass.
    static func lowPass(frequency: Double, rate: Double) -> Biquad {
        let (s, c) = RoomMath.sinCos(2 * Double.pi * frequency / rate)
        let alpha = s / (2 * 0.5.squareRoot())
        return make(((1 - c) / 2, 1 - c, (1 - c) / 2), (1 + alpha, -2 * c, 1 - alpha))
    }

    /// Butterworth high-pass.
    static func highPass(frequency: Double, rate: Double) -> Biquad {
        let (s, c) = RoomMath.sinCos(2 * Double.pi * frequency / rate)
        let alpha = s / (2 * 0.5.squareRoot())
        return make(((1 + c) / 2, -(1 + c), (1 + c) / 2), (1 + alpha, -2 * c, 1 - alpha))
    }

    /// Band-pass with 0 dB at `frequency`: a formant.
    static func bandPass(frequency: Double, q: Double, rate: Double) -> Biquad {
        let (s, c) = RoomMath.sinCos(2 * Double.pi * frequency / rate)
        let alpha = s / (2 * q)
        return make((alpha, 0, -alpha), (1 + alpha, -2 * c, 1 - alpha))
    }
}
