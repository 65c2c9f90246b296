/// A peak limiter that guarantees no sample leaves above `threshold`, for the speaker path:
/// several streams summed can exceed full scale, and hard clipping in the converter
/// sounds far worse than a brief gain dip.
///
/// No look-ahead (it would add latency to the echo path): the gain computer drops the gain
/// instantly to exactly what the current sample needs, then recovers exponentially with
/// the release time constant. A final clamp absorbs floating-point rounding, so the bound
/// holds for every sample. Below the threshold with the gain recovered, samples pass
/// bit-for-bit unchanged.
public struct Limiter: Sendable {
    /// Ceiling as a linear amplitude.
    public let threshold: Float
    /// Per-sample factor of the remaining distance to the target gain kept during release.
    public let releaseCoefficient: Float
    /// The gain applied to the last sample (1 = not limiting).
    public private(set) var gain: Float = 1

    /// `thresholdDBFS` of -1 leaves headroom for converter overshoot; 50 ms release recovers
    /// between syllables without audible pumping.
    public init(sampleRate: Int, thresholdDBFS: Float = -1, releaseSeconds: Double = 0.05) {
        precondition(sampleRate > 0 && releaseSeconds > 0 && thresholdDBFS <= 0)
        threshold = linear(fromDB: thresholdDBFS)
        releaseCoefficient = Float(RoomMath.exp(-1 / (Double(sampleRate) * releaseSeconds)))
    }

    /// Limits `buffer` in place.
    public mutating func process(_ buffer: UnsafeMutableBufferPointer<Float>) {
        let t = threshold
        let r = releaseCoefficient
        var g = gain
        for i in buffer.indices {
            let x = buffer[i]
            let a = x.magnitude
            guard a.isFinite else { buffer[i] = 0; continue }   // NaN/inf: silence, not noise
            let needed = a > t ? t / a : 1
            // Attack: jump down at once. Release: move toward the needed gain, never past it.
            // The last 0.001 dB is skipped: in Float the exponential would stall just below
            // 1 and leave quiet audio scaled by 0.99993 forever instead of untouched.
            if needed < g {
                g = needed
            } else {
                let distance = (needed - g) * r
                g = distance < Self.snapDistance ? needed : needed - distance
            }
            let y = x * g
            buffer[i] = y > t ? t : (y < -t ? -t : y)
        }
        gain = g
    }

    private static let snapDistance: Float = 1e-4

    /// Forgets any gain reduction (after a stream restart).
    public mutating func reset() { gain = 1 }
}
