/// A radix-2 complex FFT, in Double on split real/imaginary arrays.
///
/// Written for analysis off the audio thread (the installer self-test correlates seconds of
/// audio), where clarity beats the last factor of speed: iterative decimation in time,
/// twiddles from a table built once per size. Double rather than Float because a 2^17-point
/// correlation sums ~10^5 products and the normalised peak should not depend on rounding.
public struct FFT: Sendable {
    /// Number of points; a power of two.
    public let count: Int
    // cos and sin of 2πk/count for k < count/2: every twiddle factor any stage needs.
    private let cosTable: [Double]
    private let sinTable: [Double]

    /// `count` must be a power of two (see `size(atLeast:)`).
    public init(count: Int) {
        precondition(count > 0 && count & (count - 1) == 0, "FFT size must be a power of two")
        self.count = count
        var c = [Double](repeating: 1, count: count / 2)
        var s = [Double](repeating: 0, count: count / 2)
        for k in 0..<count / 2 {
            (s[k], c[k]) = RoomMath.sinCos(2 * Double.pi * Double(k) / Double(count))
        }
        cosTable = c
        sinTable = s
    }

    /// The smallest power of two ≥ n (1 for n ≤ 1): zero-padding to it turns a circular
    /// transform into a linear one when n covers both signals.
    public static func size(atLeast n: Int) -> Int {
        var size = 1
        while size < n { size <<= 1 }
        return size
    }

    /// X[k] = Σ x[n]·e^(−2πikn/count), in place.
    public func forward(real: inout [Double], imaginary: inout [Double]) {
        transform(&real, &imaginary, inverse: false)
    }

    /// x[n] = (1/count)·Σ X[k]·e^(+2πikn/count), in place: scaled so `inverse(forward(x)) == x`.
    public func inverse(real: inout [Double], imaginary: inout [Double]) {
        transform(&real, &imaginary, inverse: true)
        let scale = 1 / Double(count)
        for i in 0..<count {
            real[i] *= scale
            imaginary[i] *= scale
        }
    }

    private func transform(_ real: inout [Double], _ imaginary: inout [Double], inverse: Bool) {
        precondition(real.count == count && imaginary.count == count, "FFT input must have count points")
        let n = count
        guard n > 1 else { return }
        // Unsafe buffers: the test suite runs debug builds, where Array subscripts in this loop
        // would cost several times the arithmetic.
        real.withUnsafeMutableBufferPointer { re in
            imaginary.withUnsafeMutableBufferPointer { im in
                cosTable.withUnsafeBufferPointer { cosT in
                    sinTable.withUnsafeBufferPointer { sinT in
                        // Bit-reversed order first, so each stage combines neighbouring blocks.
                        var j = 0
                        for i in 1..<n {
                            var bit = n >> 1
                            while j & bit != 0 { j ^= bit; bit >>= 1 }
                            j |= bit
                            if i < j {
                                re.swapAt(i, j)
                                im.swapAt(i, j)
                            }
                        }
                        // Butterflies: blocks of 2·half points, twiddle e^(∓2πik/(2·half)).
                        let sign: Double = inverse ? 1 : -1
                        var half = 1
                        while half < n {
                            let stride = n / (2 * half)
                            for k in 0..<half {
                                let wr = cosT[k * stride]
                                let wi = sign * sinT[k * stride]
                                var a = k
                                while a < n {
                                    let b = a + half
                                    let tr = wr * re[b] - wi * im[b]
                                    let ti = wr * im[b] + wi * re[b]
                                    re[b] = re[a] - tr
                                    im[b] = im[a] - ti
                                    re[a] += tr
                                    im[a] += ti
                                    a += 2 * half
                                }
                            }
                            half *= 2
                        }
                    }
                }
            }
        }
    }
}
