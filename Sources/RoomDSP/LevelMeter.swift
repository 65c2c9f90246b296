/// Measures one signal period by period: RMS and peak in dBFS, a smoothed level for
/// display and reports, and a running count of clipped samples.
///
/// Runs on the audio thread: a value type with no storage to allocate, a few multiplies
/// per sample and one logarithm per period.
public struct LevelMeter: Sendable {
    /// Levels never go below this, so silence is a number and not -infinity.
    public static let floorDBFS: Float = -100
    /// |x| at or above this counts as clipped: 0.999 catches samples that were limited to
    /// full scale after conversion as well as real overloads.
    public static let clipThreshold: Float = 0.999

    /// RMS of the last period, dBFS.
    public private(set) var lastRMSDBFS: Float = floorDBFS
    /// Largest |sample| of the last period, dBFS.
    public private(set) var lastPeakDBFS: Float = floorDBFS
    /// RMS smoothed over `timeConstant` seconds (exponential average of the power), dBFS.
    public private(set) var smoothedDBFS: Float = floorDBFS
    /// Samples at or above `clipThreshold` since creation or `reset()`.
    public private(set) var clipped: Int = 0

    /// Weight the old smoothed power keeps each period: exp(-period / timeConstant).
    public let smoothing: Float
    private var smoothedPower: Float = 0

    /// `periodSeconds` is the duration each `process` call covers (10 ms in the audio loop);
    /// `timeConstant` is how long the smoothed level takes to move 63 % of the way to a new
    /// level (300 ms reads steadily on a meter yet follows speech).
    public init(periodSeconds: Double, timeConstant: Double = 0.3) {
        precondition(periodSeconds > 0 && timeConstant >= 0)
        smoothing = timeConstant == 0 ? 0 : Float(RoomMath.exp(-periodSeconds / timeConstant))
    }

    public mutating func process(_ samples: UnsafeBufferPointer<Float>) {
        var sumSquares: Float = 0
        var peak: Float = 0
        var clips = 0
        for x in samples {
            let a = x.magnitude
            guard a.isFinite else { continue }   // never let one NaN poison the average
            sumSquares += a * a
            if a > peak { peak = a }
            if a >= Self.clipThreshold { clips += 1 }
        }
        let power = samples.isEmpty ? 0 : sumSquares / Float(samples.count)
        smoothedPower = smoothing * smoothedPower + (1 - smoothing) * power
        lastRMSDBFS = Self.dB(power: power)
        lastPeakDBFS = dBFS(fromLinear: peak, floor: Self.floorDBFS)
        smoothedDBFS = Self.dB(power: smoothedPower)
        clipped += clips
    }

    public mutating func process(_ samples: UnsafeMutableBufferPointer<Float>) {
        process(UnsafeBufferPointer(samples))
    }

    public mutating func reset() {
        lastRMSDBFS = Self.floorDBFS
        lastPeakDBFS = Self.floorDBFS
        smoothedDBFS = Self.floorDBFS
        smoothedPower = 0
        clipped = 0
    }

    private static func dB(power: Float) -> Float {
        guard power > 0 else { return floorDBFS }
        return max(floorDBFS, Float(10 * RoomMath.log10(Double(power))))
    }
}
