/// Sine and cosine for the FFT twiddle factors and the self-test sweep. They live beside
/// `RoomMath.ln`/`exp` for the same reason: RoomCore may not import libm.
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
