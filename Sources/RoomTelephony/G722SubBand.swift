/// One sub-band's adaptive differential coder: the state both ends of a G.722 link keep in
/// step, because each computes it only from the codes on the wire. Encoder and decoder share
/// it; the lower and the higher band differ only in their tables and scale limits.
///
/// Values are Int32 holding what the standard keeps in 16 bits; the saturations below are
/// where the standard (and libspandsp, the far end we test against) limits to 16 bits. A
/// wider intermediate elsewhere cannot overflow 16 bits, so no other truncation is needed.
struct G722SubBand {
    /// The log-domain scale factor (∇ in the standard), in units of 2^-11 of an octave.
    var logScale: Int32 = 0
    /// The quantizer's scale factor derived from `logScale`: what a code is multiplied by.
    var scale: Int32
    /// The predicted signal for the next sample: pole section plus zero section.
    var estimate: Int32 = 0
    /// The zero (difference-driven) section of `estimate`, kept apart because the pole
    /// update follows the partially reconstructed signal, which excludes the poles' part.
    var zeroEstimate: Int32 = 0
    /// The reconstructed signal one sample ago: the poles' second input.
    var previousReconstructed: Int32 = 0
    /// The partially reconstructed signal one and two samples ago: the poles adapt toward
    /// agreeing with its sign pattern.
    var previousPartial1: Int32 = 0
    var previousPartial2: Int32 = 0
    /// The two pole coefficients, in Q14 (limited so the filter stays stable).
    var pole1: Int32 = 0
    var pole2: Int32 = 0
    /// The six zero coefficients, in Q14, and the quantized differences they act on, the
    /// latest first.
    var zeros = InlineArray<6, Int32>(repeating: 0)
    var differences = InlineArray<6, Int32>(repeating: 0)

    /// The scale factor a fresh stream starts with (the standard's reset: 32 low, 8 high).
    init(initialScale: Int32) {
        scale = initialScale
    }

    /// Adapts the lower band to the 6-bit code just sent or received. Only the code's top
    /// 4 bits count, so that the 48 and 56 kbit/s modes, which take the low bits for data,
    /// keep both ends in step; an encoder and a decoder that both call this stay identical.
    @inline(__always)
    mutating func adaptLow(toCode code: Int32) {
        let code4 = Int(code >> 2)
        let difference = (scale &* G722Tables.lowAdaptationLevels[code4]) >> 15
        adaptScale(step: G722Tables.lowScaleSteps[Int(G722Tables.lowMagnitudeClass[code4])],
                   limit: 18_432, exponentBase: 8)
        adapt(difference: difference)
    }

    /// Adapts the higher band to its 2-bit code; returns the quantized difference, which is
    /// also the decoder's output less the estimate.
    @inline(__always) @discardableResult
    mutating func adaptHigh(toCode code: Int32) -> Int32 {
        let difference = (scale &* G722Tables.highOutputLevels[Int(code)]) >> 15
        adaptScale(step: G722Tables.highScaleSteps[Int(code)], limit: 22_528, exponentBase: 10)
        adapt(difference: difference)
        return difference
    }

    /// Moves the log scale factor by `step` (after a leak of 1/128 toward zero, which lets it
    /// recover from a burst), clamps it to `limit`, and recomputes the linear scale factor:
    /// a mantissa from the table for the fraction, shifted by the integer part. `exponentBase`
    /// is where the shift is zero (8 low, 10 high: the higher band's signal is smaller).
    @inline(__always)
    mutating func adaptScale(step: Int32, limit: Int32, exponentBase: Int32) {
        let leaked = (logScale &* 127) >> 7
        logScale = min(max(leaked &+ step, 0), limit)
        let mantissa = G722Tables.scaleMantissas[Int((logScale >> 6) & 31)]
        let shift = exponentBase - (logScale >> 11)
        let linear = shift < 0 ? mantissa << -shift : mantissa >> shift
        scale = linear << 2
    }

    /// Takes the quantized difference both ends know, `difference`, and updates the predictor
    /// with it: reconstruction, the pole and zero coefficients' sign-sign adaptation with
    /// their stability limits, and the estimate for the next sample.
    @inline(__always)
    mutating func adapt(difference: Int32) {
        let reconstructed = saturated16(estimate &+ difference)
        let partial = saturated16(zeroEstimate &+ difference)

        // Second pole: pulled toward the sign agreement of the partial signal two samples
        // apart, against the first pole's current push, with leakage; |a2| ≤ 0.75.
        let signFlip1 = (partial < 0) != (previousPartial1 < 0)
        let signFlip2 = (partial < 0) != (previousPartial2 < 0)
        let pole1Term = saturated16(pole1 << 2)
        let pushFromPole1 = min(signFlip1 ? pole1Term : -pole1Term, 32_767)
        var newPole2 = (signFlip2 ? -128 : 128) + (pushFromPole1 >> 7) + ((pole2 &* 32_512) >> 15)
        newPole2 = min(max(newPole2, -12_288), 12_288)

        // First pole: a fixed step toward sign agreement with one sample ago, with leakage;
        // |a1| ≤ 1 − 2^-4 − |a2|, the triangle that keeps the two-pole filter stable.
        var newPole1 = saturated16((signFlip1 ? -192 : 192) + ((pole1 &* 32_640) >> 15))
        let pole1Limit = saturated16(15_360 - newPole2)
        newPole1 = min(max(newPole1, -pole1Limit), pole1Limit)

        let poleEstimate = saturated16(
            ((newPole1 &* saturated16(reconstructed &* 2)) >> 15)
                &+ ((newPole2 &* saturated16(previousReconstructed &* 2)) >> 15))
        previousReconstructed = reconstructed
        pole1 = newPole1
        pole2 = newPole2
        previousPartial2 = previousPartial1
        previousPartial1 = partial

        // Zeros: each steps by 2^-7 toward sign agreement between the new difference and the
        // one it multiplies (no step when the difference is zero), with leakage; then the
        // zero section's estimate from the new coefficients and the latest six differences.
        let zeroStep: Int32 = difference == 0 ? 0 : 128
        let negative = difference < 0
        var zeroSum: Int32 = 0
        var newer = difference
        for i in 0..<6 {
            let older = differences[i]
            let coefficient = saturated16(
                ((older < 0) != negative ? -zeroStep : zeroStep) &+ ((zeros[i] &* 32_640) >> 15))
            zeros[i] = coefficient
            zeroSum &+= (coefficient &* saturated16(newer &* 2)) >> 15
            differences[i] = newer
            newer = older
        }
        zeroEstimate = saturated16(zeroSum)
        estimate = saturated16(poleEstimate &+ zeroEstimate)
    }
}

@inline(__always)
func saturated16(_ value: Int32) -> Int32 {
    min(max(value, -32_768), 32_767)
}

/// What an encoder and a decoder both carry from one call to the next: the two bands' ADPCM
/// state and where the newest entry of their filter's delay line is. The delay line itself
/// lives in a buffer allocated once per coder (`makeHistory`), so that the per-sample loop
/// works on plain memory.
struct G722StreamState {
    var low = G722SubBand(initialScale: 32)
    var high = G722SubBand(initialScale: 8)
    var newest = 0

    /// Both filters' delay lines hold 24 values (the encoder's last 24 inputs; the decoder's
    /// last 12 band sums and 12 differences), each written twice so that the newest 24 are
    /// always one contiguous run.
    static let historyLength = 48

}

/// One coder's memory: the sub-band state and the filter's delay line, which the encoder and
/// the decoder keep alike (allocated once; `reset` starts a new stream).
final class G722Memory {
    let history: UnsafeMutablePointer<Int32>
    var state = G722StreamState()

    init() {
        history = .allocate(capacity: G722StreamState.historyLength)
        history.initialize(repeating: 0, count: G722StreamState.historyLength)
    }

    deinit { history.deallocate() }

    func reset() {
        history.update(repeating: 0, count: G722StreamState.historyLength)
        state = G722StreamState()
    }
}
