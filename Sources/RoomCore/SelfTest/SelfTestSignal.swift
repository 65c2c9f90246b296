/// The signal `roomctl selftest` plays on the speaker.
///
/// An exponential sine sweep: it spends equal time in every octave, so a small speaker's weak
/// bass and a mic's roll-off each still leave plenty of energy to measure, and a sweep
/// correlates with a delayed copy of itself in one sharp peak (a tone would correlate at
/// every period). It is deterministic, so the analysis can be checked against known answers.
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
}
