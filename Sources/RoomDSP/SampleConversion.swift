/// 16-bit ↔ float sample conversion, shared by the WAV codec and the audio loop's capture side
/// (and roomd's far-end file) so they agree on one scale. The loop writes the speaker and the
/// recorder with `outputScale` (32767) instead, so a full-scale mix (+1.0, the limiter's
/// ceiling) reaches 32767 without a clip.
///
/// The scale is 32768 both ways: every Int16 converts to a Float in [-1, 1) and back to the
/// same Int16 exactly, so a file read and written again is unchanged. The price is that +1.0
/// maps to 32767 (clipped by one step), which is inaudible.
public enum SampleConversion {
    public static let scale: Float = 32768

    /// One sample to float in [-1, 1).
    @inlinable
    public static func float(fromInt16 sample: Int16) -> Float { Float(sample) / scale }

    /// One sample to Int16, rounded, clipped to the Int16 range; NaN becomes 0 so a broken
    /// computation produces silence instead of a trap or full-scale noise.
    @inlinable
    public static func int16(fromFloat sample: Float) -> Int16 { int16(fromFloat: sample, scale: scale) }

    /// The audio loop's output scale: +1.0, the limiter's ceiling, becomes 32767 exactly.
    public static let outputScale: Float = 32767

    /// As `int16(fromFloat:)` with another scale; NaN and infinities cannot trap here either.
    ///
    /// Rounds half away from zero, as `rounded()` does, without its call: on the baseline x86-64
    /// target (no SSE4.1 `roundss`) `rounded()` is a call to libm's `roundf` per sample, 0.4 % of
    /// roomd's CPU samples in the engine bench. In range, x − trunc(x) is exact, so comparing it
    /// with ±0.5 rounds exactly as `roundf` (SampleConversionRoundingTests checks every quarter
    /// step and random values against it). Selects instead of branches (NaN to 0, the clamp,
    /// the rounding step), so a loop over a buffer of these vectorizes: the speaker's period is
    /// converted this way every 5 ms.
    @inlinable
    public static func int16(fromFloat sample: Float, scale: Float) -> Int16 {
        let scaled = sample * scale
        let x = Swift.min(Swift.max(scaled.isNaN ? 0 : scaled, -32768), 32767)   // rounds the same as unclamped
        let whole = Int32(x)                // toward zero; in range here
        let fraction = x - Float(whole)
        return Int16(truncatingIfNeeded: whole + (fraction >= 0.5 ? 1 : 0) - (fraction <= -0.5 ? 1 : 0))
    }

    /// Converts `min(source.count, destination.count)` samples; returns how many it wrote.
    @discardableResult
    public static func toFloat(_ source: UnsafeBufferPointer<Int16>,
                               into destination: UnsafeMutableBufferPointer<Float>) -> Int {
        let n = min(source.count, destination.count)
        for i in 0..<n { destination[i] = float(fromInt16: source[i]) }
        return n
    }

    /// Converts `min(source.count, destination.count)` samples with clipping; returns how
    /// many samples had to be clipped, so callers can count overloads without a second pass.
    @discardableResult
    public static func toInt16(_ source: UnsafeBufferPointer<Float>,
                               into destination: UnsafeMutableBufferPointer<Int16>) -> Int {
        let n = min(source.count, destination.count)
        var clipped = 0
        for i in 0..<n {
            let x = source[i]
            let v = (x * scale).rounded()
            if !(v >= -32768 && v <= 32767) { clipped += 1 }
            destination[i] = int16(fromFloat: x)
        }
        return clipped
    }
}
