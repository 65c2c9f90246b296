/// G.722 (ITU-T G.722, 64 kbit/s mode): 16 kHz speech in 8 kHz-rate bytes, two sub-band ADPCM
/// coders behind a quadrature mirror filter. RTP payload type 9, whose RTP clock is 8000
/// although the audio is sampled at 16 kHz (RFC 3551 §4.5.2). What SIP phones call "HD voice"
/// when Opus is not offered.
///
/// Written from the standard's algorithm rather than linked from libspandsp, whose Debian
/// package would bring its fax stack's image libraries into roomd (docs/calls.md, "G.722").
/// Bit-exact with libspandsp, the far end's coder in our tests (Tests/Fixtures/g722 holds its
/// output, made by scripts/g722-oracle), except that the decoder saturates an overloaded
/// output sample where Debian's libspandsp 0.0.6 wraps it.
///
/// Real-time safe: `encode` and `decode` allocate, lock and retain nothing; the filter
/// histories are allocated once, when a coder is made.
public final class G722Encoder {
    /// The last 24 input samples, newest first from `state.newest`, and again 24 later.
    private let memory = G722Memory()
    private var history: UnsafeMutablePointer<Int32> { memory.history }
    private var state: G722StreamState {
        get { memory.state }
        set { memory.state = newValue }
    }

    public init() {}

    /// Forgets the coder's state (a new stream).
    public func reset() { memory.reset() }

    /// Encodes `count` 16 kHz samples (an even number) into `count / 2` bytes; returns the
    /// number of bytes written. An odd last sample is ignored: G.722 codes samples in pairs,
    /// so callers keep to whole pairs (10 ms = 160 samples).
    public func encode(_ samples: UnsafePointer<Int16>, count: Int, into bytes: UnsafeMutablePointer<UInt8>) -> Int {
        let pairs = count / 2
        var low = state.low
        var high = state.high
        var newest = state.newest
        for pair in 0..<pairs {
            newest = push(Int32(samples[2 * pair]), at: newest)
            newest = push(Int32(samples[2 * pair + 1]), at: newest)
            // The analysis filter: even taps on one phase, odd taps on the other; their sum
            // is the 0-4 kHz band and their difference the 4-8 kHz band, each at 8 kHz. The
            // shift by 14 removes the coefficients' 2^13 and halves the signal into the
            // 15 bits the sub-band coders work in.
            var evenSum: Int32 = 0
            var oddSum: Int32 = 0
            let window = history + newest
            for k in 0..<12 {
                evenSum &+= G722Tables.qmf[2 * k] &* window[2 * k]
                oddSum &+= G722Tables.qmf[2 * k + 1] &* window[2 * k + 1]
            }
            let lowCode = Self.encodeLow((evenSum &+ oddSum) >> 14, &low)
            let highCode = Self.encodeHigh((evenSum &- oddSum) >> 14, &high)
            bytes[pair] = UInt8(truncatingIfNeeded: highCode << lowCodeBits | lowCode)
        }
        state = G722StreamState(low: low, high: high, newest: newest)
        return pairs
    }

    @inline(__always)
    private func push(_ sample: Int32, at newest: Int) -> Int {
        let position = newest == 0 ? 23 : newest - 1
        history[position] = sample
        history[position + 24] = sample
        return position
    }

    /// The lower band: quantize the prediction error to one of 60 levels scaled by the
    /// band's scale factor, then adapt from the code's top 4 bits as the decoder will.
    @inline(__always)
    private static func encodeLow(_ signal: Int32, _ band: inout G722SubBand) -> Int32 {
        let error = saturated16(signal &- band.estimate)
        // The standard compares the one's complement of a negative error (−error − 1), so
        // an error of −1 lands in the same interval as 0.
        let magnitude = error >= 0 ? error : ~error
        // The first interval whose upper level is above the magnitude (30 when none is),
        // found by halving: the levels only grow, so this is the standard's linear search's
        // answer in five comparisons instead of up to 29.
        var interval = 1
        var above = 30
        while interval < above {
            let middle = (interval + above) / 2
            if magnitude >= (G722Tables.lowDecisionLevels[middle] &* band.scale) >> 12 {
                interval = middle + 1
            } else {
                above = middle
            }
        }
        let code = error < 0 ? G722Tables.lowNegativeCodes[interval] : G722Tables.lowPositiveCodes[interval]
        band.adaptLow(toCode: code)
        return code
    }

    /// The higher band: two magnitude levels either side of zero.
    @inline(__always)
    private static func encodeHigh(_ signal: Int32, _ band: inout G722SubBand) -> Int32 {
        let error = saturated16(signal &- band.estimate)
        let magnitude = error >= 0 ? error : ~error
        let outer = magnitude >= (G722Tables.highDecisionLevel &* band.scale) >> 12 ? 1 : 0
        let code = error < 0 ? G722Tables.highNegativeCodes[outer] : G722Tables.highPositiveCodes[outer]
        band.adaptHigh(toCode: code)
        return code
    }
}

/// The receiving half: the far end's bytes back to 16 kHz samples. It rebuilds the encoder's
/// band state from the codes alone, so a lost or corrupted byte disturbs the sound only until
/// the predictors' leakage brings the two back together.
public final class G722Decoder {
    /// The last 12 sums and differences of the two bands' outputs, newest first from
    /// `state.newest` and again 12 later: sums at 0..<24, differences at 24..<48.
    private let memory = G722Memory()
    private var history: UnsafeMutablePointer<Int32> { memory.history }
    private var state: G722StreamState {
        get { memory.state }
        set { memory.state = newValue }
    }

    /// How an output sample beyond 16 bits (a far end sending clipped, full-scale sound) is
    /// stored. roomd saturates it, as current spandsp does; Debian's libspandsp 0.0.6, the
    /// tests' oracle, keeps the low 16 bits instead, which turns an overload into a full-scale
    /// click of the opposite sign. The bit-exact test switches this on to compare every sample.
    var wrapsOverloadedOutput = false

    public init() {}

    /// Forgets the decoder's state (a new stream).
    public func reset() { memory.reset() }

    /// Decodes `count` bytes into `2 * count` 16 kHz samples; returns the number of samples.
    public func decode(_ bytes: UnsafePointer<UInt8>, count: Int, into samples: UnsafeMutablePointer<Int16>) -> Int {
        var low = state.low
        var high = state.high
        var newest = state.newest
        let wraps = wrapsOverloadedOutput
        for index in 0..<count {
            let byte = Int32(bytes[index])
            let lowSignal = Self.decodeLow(byte & 0x3F, &low)
            let highSignal = Self.decodeHigh(byte >> lowCodeBits, &high)

            newest = newest == 0 ? 11 : newest - 1
            let sum = lowSignal &+ highSignal
            let difference = lowSignal &- highSignal
            history[newest] = sum
            history[newest + 12] = sum
            history[24 + newest] = difference
            history[24 + newest + 12] = difference
            // The synthesis filter: even taps on the differences give the first sample of
            // the pair, odd taps on the sums the second. Shifting by 11 removes the
            // coefficients' 2^12 per phase and restores the bit the analysis took off.
            var first: Int32 = 0
            var second: Int32 = 0
            let sums = history + newest
            let differences = history + 24 + newest
            for k in 0..<12 {
                first &+= G722Tables.qmf[2 * k] &* differences[k]
                second &+= G722Tables.qmf[2 * k + 1] &* sums[k]
            }
            samples[2 * index] = Self.sample(first >> 11, wraps: wraps)
            samples[2 * index + 1] = Self.sample(second >> 11, wraps: wraps)
        }
        state = G722StreamState(low: low, high: high, newest: newest)
        return 2 * count
    }

    @inline(__always)
    private static func sample(_ value: Int32, wraps: Bool) -> Int16 {
        wraps ? Int16(truncatingIfNeeded: value) : Int16(saturated16(value))
    }

    /// The lower band: the full 6-bit code gives the output (limited to the 15 bits the
    /// bands work in); only its top 4 bits adapt the band, as in the encoder.
    @inline(__always)
    private static func decodeLow(_ code: Int32, _ band: inout G722SubBand) -> Int32 {
        let quantized = (band.scale &* G722Tables.lowOutputLevels[Int(code)]) >> 15
        let output = min(max(band.estimate &+ quantized, -16_384), 16_383)
        band.adaptLow(toCode: code)
        return output
    }

    @inline(__always)
    private static func decodeHigh(_ code: Int32, _ band: inout G722SubBand) -> Int32 {
        let estimate = band.estimate
        let difference = band.adaptHigh(toCode: code)
        return min(max(estimate &+ difference, -16_384), 16_383)
    }
}

/// Each byte carries one pair of 16 kHz samples: the lower band's 6-bit code (bits 0-5, the
/// 0-4 kHz half) and the higher band's 2-bit code (bits 6-7, 4-8 kHz).
private let lowCodeBits = 6
