/// Level conversions for meters, gains and limiter thresholds.
///
/// RoomDSP may not import Glibc, and the standard library has no `log10`/`exp`, so the
/// two functions here are computed in pure Swift (`RoomMath`). They are accurate to about
/// 1e-9 relative error, far below anything audible or visible on a meter.

/// Level of a linear amplitude (1.0 = full scale) in dBFS, never below `floor`.
///
/// The floor keeps silence at a finite number (-100 dBFS by default) so meters, JSON
/// output and comparisons never see `-inf` or NaN.
public func dBFS(fromLinear amplitude: Float, floor: Float = -100) -> Float {
    let a = amplitude.magnitude
    guard a.isFinite else { return a.isNaN ? floor : Float.infinity }
    guard a > 0 else { return floor }
    let db = Float(20 * RoomMath.log10(Double(a)))
    return db < floor ? floor : db
}

/// Linear amplitude factor for a level in dB (0 dB = 1.0, -6.02 dB ≈ 0.5).
public func linear(fromDB decibels: Float) -> Float {
    guard !decibels.isNaN else { return 0 }
    return Float(RoomMath.pow10(Double(decibels) / 20))
}

/// A power (energy) ratio in dB: 10·log10(ratio), e.g. the echo removed (ERLE) from the
/// energies before and after the canceller. The ratio must be positive (0 gives -infinity).
public func decibels(powerRatio ratio: Double) -> Double { 10 * RoomMath.log10(ratio) }

/// Elementary functions without libm. Only the few the audio code needs, evaluated in
/// Double so that the Float results are correctly rounded in practice.
@usableFromInline
enum RoomMath {
    static let ln2 = 0.693_147_180_559_945_309_417_232_121_458
    static let log2of10 = 3.321_928_094_887_362_347_870_319_429_489
    static let log2ofE = 1.442_695_040_888_963_407_359_924_681_002

    /// Natural logarithm for finite x > 0 (returns -infinity for 0, NaN for negatives).
    static func ln(_ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return -.infinity }
        if x.isInfinite { return .infinity }
        // x = m · 2^e with m in [1, 2); fold m into [√½, √2) so the series below converges fast.
        var e = Double(x.exponent)
        var m = x.significand
        if m > 1.414_213_562_373_095 { m *= 0.5; e += 1 }
        // ln(m) = 2·atanh(s), s = (m-1)/(m+1), |s| < 0.172: the odd series converges quickly.
        let s = (m - 1) / (m + 1)
        let s2 = s * s
        var term = s
        var sum = s
        var k = 3.0
        while k < 30 {
            term *= s2
            let next = sum + term / k
            if next == sum { break }
            sum = next
            k += 2
        }
        return 2 * sum + e * ln2
    }

    static func log10(_ x: Double) -> Double { ln(x) / (ln2 * log2of10) }

    /// 2^y for any y (0 for very negative y, +infinity for very large y).
    static func pow2(_ y: Double) -> Double {
        if y.isNaN { return .nan }
        if y > 1024 { return .infinity }
        if y < -1080 { return 0 }
        let n = y.rounded(.down)
        let f = (y - n) * ln2            // in [0, ln 2)
        // e^f by its Taylor series; 20 terms are far more than needed for f < 0.7.
        var term = 1.0
        var sum = 1.0
        var k = 1.0
        while k < 25 {
            term *= f / k
            let next = sum + term
            if next == sum { break }
            sum = next
            k += 1
        }
        // Scale by 2^n in two steps so subnormal results and n = 1024 edge cases stay exact.
        let n1 = Int(n) / 2
        let n2 = Int(n) - n1
        return sum * Double(sign: .plus, exponent: n1, significand: 1)
                   * Double(sign: .plus, exponent: n2, significand: 1)
    }

    static func pow10(_ y: Double) -> Double { pow2(y * log2of10) }

    static func exp(_ x: Double) -> Double { pow2(x * log2ofE) }
}
