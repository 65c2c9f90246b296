/// Changes the sample rate by a whole factor (2, 3, 4 or 6, up or down, or 1), between the engine's
/// rate and a telephone codec's: 48 kHz ⇄ 16 kHz (G.722) or 8 kHz (G.711), 16 ⇄ 8 kHz. A windowed-sinc
/// low-pass (Blackman window, 48 taps per step of the ratio) cut at 92 % of the lower rate's Nyquist
/// frequency: at 8 kHz the pass band reaches ~3.2 kHz, past telephony's 3.4 kHz corner by design
/// rather than by accident, and what folds back is ≥ 58 dB down (the window's stop band).
///
/// All memory is taken at init; `process` allocates nothing and keeps the filter's history
/// between calls, so a stream converted in 10 ms pieces equals one converted whole. For the audio
/// thread: one converter per direction per stream.
public final class RateConverter {
    public let inputRate: Int
    public let outputRate: Int
    /// Input samples per output sample (decimating), or output per input (interpolating).
    private let factor: Int
    private let decimating: Bool
    private let taps: Int
    /// Interpolation: the filter split into `factor` phases of `taps / factor` taps each,
    /// phase-major, reversed so each output is one dot product with the history.
    private let coefficients: UnsafeMutablePointer<Float>
    /// The last `window` input samples, each written twice (at `pos` and `pos + window`) so the
    /// newest `window` are always contiguous: no shifting, no wrap in the dot product.
    private let history: UnsafeMutablePointer<Float>
    private let window: Int
    private var position = 0
    /// Decimation: input samples since the last output.
    private var phase = 0

    /// The factors supported: whole ratios a 10 ms block of every engine rate divides into.
    public static let factors: Set<Int> = [1, 2, 3, 4, 6]

    /// Nil unless one rate is the other times a supported factor.
    public init?(from inputRate: Int, to outputRate: Int) {
        guard inputRate > 0, outputRate > 0 else { return nil }
        let high = max(inputRate, outputRate), low = min(inputRate, outputRate)
        guard high % low == 0, Self.factors.contains(high / low) else { return nil }
        self.inputRate = inputRate
        self.outputRate = outputRate
        factor = high / low
        decimating = inputRate > outputRate
        taps = factor == 1 ? 1 : 48 * factor
        window = decimating ? taps : taps / factor
        coefficients = .allocate(capacity: taps)
        history = .allocate(capacity: 2 * window)
        history.initialize(repeating: 0, count: 2 * window)
        let prototype = Self.lowPass(taps: taps, cutoff: factor == 1 ? 0.5 : 0.46 / Double(factor))
        if decimating || factor == 1 {
            // Oldest-first history, so the filter is reversed; symmetric, so it is itself.
            for i in 0..<taps { coefficients[i] = Float(prototype[i]) }
        } else {
            // Phase p of output uses prototype taps p, p+L, p+2L, …, newest input first; stored
            // oldest-first to match the history, and scaled by L (zero stuffing loses 1/L).
            let perPhase = taps / factor
            for p in 0..<factor {
                for k in 0..<perPhase {
                    coefficients[p * perPhase + (perPhase - 1 - k)] = Float(prototype[p + k * factor] * Double(factor))
                }
            }
        }
    }

    deinit {
        coefficients.deallocate()
        history.deallocate()
    }

    /// Output samples `process` makes from `inputCount` input samples at most (decimating, up
    /// to one more than the ratio suggests when the phase carries over).
    public func outputCapacity(forInput inputCount: Int) -> Int {
        decimating ? inputCount / factor + 1 : inputCount * factor
    }

    /// Forgets the history (a new stream).
    public func reset() {
        history.update(repeating: 0, count: 2 * window)
        position = 0
        phase = 0
    }

    /// Converts `count` samples into `output` (room for `outputCapacity(forInput:)`), returning
    /// how many were written.
    public func process(_ input: UnsafePointer<Float>, count: Int, into output: UnsafeMutablePointer<Float>) -> Int {
        if factor == 1 {
            output.update(from: input, count: count)
            return count
        }
        var written = 0
        for n in 0..<count {
            push(input[n])
            if decimating {
                phase += 1
                guard phase == factor else { continue }
                phase = 0
                output[written] = dot(coefficients, count: taps)
                written += 1
            } else {
                let perPhase = taps / factor
                for p in 0..<factor {
                    output[written] = dot(coefficients + p * perPhase, count: perPhase)
                    written += 1
                }
            }
        }
        return written
    }

    @inline(__always)
    private func push(_ sample: Float) {
        history[position] = sample
        history[position + window] = sample
        position += 1
        if position == window { position = 0 }
    }

    /// The filter against the newest `window` samples, oldest first (they start at `position`).
    @inline(__always)
    private func dot(_ h: UnsafePointer<Float>, count: Int) -> Float {
        let x = history + position
        var sum: Float = 0
        for k in 0..<count { sum += h[k] * x[k] }
        return sum
    }

    /// A linear-phase low-pass: sinc at `cutoff` (fraction of the high rate), Blackman window,
    /// unity gain at DC.
    private static func lowPass(taps: Int, cutoff: Double) -> [Double] {
        guard taps > 1 else { return [1] }
        let centre = Double(taps - 1) / 2
        var h = (0..<taps).map { i -> Double in
            let t = Double(i) - centre
            let sinc = t == 0 ? 2 * cutoff : RoomMath.sinCos(2 * Double.pi * cutoff * t).sin / (Double.pi * t)
            let x = 2 * Double.pi * Double(i) / Double(taps - 1)
            let w = 0.42 - 0.5 * RoomMath.sinCos(x).cos + 0.08 * RoomMath.sinCos(2 * x).cos
            return sinc * w
        }
        let sum = h.reduce(0, +)
        for i in h.indices { h[i] /= sum }
        return h
    }
}
