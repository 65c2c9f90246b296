/// Sine and cosine for the FFT twiddle factors and the self-test sweep. They live beside
/// `RoomMath.ln`/`exp` for the same reason: RoomDSP may not import libm.
extension RoomMath {
    static let halfPi = 1.570_796_326_794_896_619_231_321_691_639
    // π/2 as the Double nearest to it plus the remainder: subtracting q·π/2 in two fused steps
    // keeps the reduced argument accurate even for the ~1e5 rad a long sweep reaches.
    private static let halfPiHigh = 1.570_796_326_794_896_558
    private static let halfPiLow = 6.123_233_995_736_766_036e-17

    /// sin x and cos x together (the FFT needs both for each twiddle). NaN for non-finite x.
    static func sinCos(_ x: Double) -> (sin: Double, cos: Double) {
        guard x.isFinite else { return (.nan, .nan) }
        // x = q·π/2 + r with |r| ≤ π/4, where both Taylor series converge in a dozen terms.
        let q = (x / halfPi).rounded()
        let r = x.addingProduct(-q, halfPiHigh).addingProduct(-q, halfPiLow)
        let s = sinSeries(r)
        let c = cosSeries(r)
        // q mod 4 picks the quadrant; truncatingRemainder avoids trapping on Int(q) for huge x.
        var quadrant = Int(q.truncatingRemainder(dividingBy: 4))
        if quadrant < 0 { quadrant += 4 }
        switch quadrant {
        case 0: return (s, c)
        case 1: return (c, -s)
        case 2: return (-s, -c)
        default: return (-c, s)
        }
    }

    /// The angle of (x, y) in radians, −π…π, as libm's atan2 (0 for the origin; NaN for a
    /// non-finite argument): the self-test's direction of the speaker in the board's frame.
    static func atan2(_ y: Double, _ x: Double) -> Double {
        guard x.isFinite, y.isFinite else { return .nan }
        if x == 0 && y == 0 { return 0 }
        // atan of the smaller ratio (≤ 1), then the octant and quadrant.
        let swap = y.magnitude > x.magnitude
        var a = atanSmall(swap ? x.magnitude / y.magnitude : y.magnitude / x.magnitude)
        if swap { a = halfPi - a }
        if x < 0 { a = 2 * halfPi - a }
        return y < 0 ? -a : a
    }

    /// atan t for 0 ≤ t ≤ 1: halving the angle twice (atan t = 2·atan(t / (1 + √(1 + t²))))
    /// brings t under tan(π/16) ≈ 0.2, where the odd series converges in a dozen terms.
    private static func atanSmall(_ t: Double) -> Double {
        var u = t
        for _ in 0..<2 { u = u / (1 + (1 + u * u).squareRoot()) }
        let u2 = u * u
        var term = u
        var sum = u
        var k = 3.0
        while k < 80 {
            term *= -u2
            let next = sum + term / k
            if next == sum { break }
            sum = next
            k += 2
        }
        return 4 * sum
    }

    private static func sinSeries(_ r: Double) -> Double { alternatingSeries(r, first: r, k: 2) }

    private static func cosSeries(_ r: Double) -> Double { alternatingSeries(r, first: 1, k: 1) }

    /// Sums first − first·r²/(k(k+1)) + … (the Taylor series of sin with first = r, k = 2, and
    /// of cos with first = 1, k = 1) until a term no longer changes the sum.
    private static func alternatingSeries(_ r: Double, first: Double, k start: Double) -> Double {
        let r2 = r * r
        var term = first
        var sum = first
        var k = start
        while k < 40 {
            term *= -r2 / (k * (k + 1))
            let next = sum + term
            if next == sum { break }
            sum = next
            k += 2
        }
        return sum
    }
}
