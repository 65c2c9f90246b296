import RoomDSP
import XCTest

/// `SampleConversion.int16(fromFloat:scale:)` rounds without libm's `roundf` (a call per sample
/// on the baseline x86-64 target). Its contract is unchanged: the value `rounded()` gives
/// (half away from zero), clipped to Int16, NaN as 0. Checked against that reference on every
/// quarter step of the whole range and beyond it (the .5 cases are where a different rounding
/// would show), on random floats, and on the special values.
final class SampleConversionRoundingTests: XCTestCase {
    private func reference(_ sample: Float, _ scale: Float) -> Int16 {
        let v = (sample * scale).rounded()
        if v >= 32767 { return 32767 }
        if v <= -32768 { return -32768 }
        if v.isNaN { return 0 }
        return Int16(v)
    }

    func testEveryQuarterStepRoundsAsRoundedDoes() {
        var mismatches: [Float] = []
        for k in -140_000...140_000 {
            let x = Float(k) / 4   // exact: ..., 0.25, 0.5, 0.75, 1, ... up to ±35000
            if SampleConversion.int16(fromFloat: x, scale: 1) != reference(x, 1) { mismatches.append(x) }
        }
        XCTAssertEqual(mismatches.prefix(10), [], "\(mismatches.count) quarter steps round differently")
    }

    func testRandomSamplesAtBothScalesRoundAsRoundedDoes() {
        var rng = SystemRandomNumberGenerator()
        for scale in [SampleConversion.scale, SampleConversion.outputScale] {
            for _ in 0..<200_000 {
                let x = Float.random(in: -1.2...1.2, using: &rng)
                XCTAssertEqual(SampleConversion.int16(fromFloat: x, scale: scale), reference(x, scale), "x = \(x), scale \(scale)")
            }
        }
        // The neighbours of every half step near full scale, where the clip and the rounding meet.
        for v in stride(from: Float(32760.5), through: 32770.5, by: 1) {
            for x in [v.nextDown, v, v.nextUp, -v.nextDown, -v, -v.nextUp] {
                XCTAssertEqual(SampleConversion.int16(fromFloat: x, scale: 1), reference(x, 1), "x = \(x)")
            }
        }
    }

    func testSpecialValues() {
        for x: Float in [.nan, -.nan, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                         0, -0.0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 0.49999997, -0.49999997] {
            XCTAssertEqual(SampleConversion.int16(fromFloat: x, scale: 1), reference(x, 1), "x = \(x)")
        }
        XCTAssertEqual(SampleConversion.int16(fromFloat: .nan), 0)
        XCTAssertEqual(SampleConversion.int16(fromFloat: 1.0, scale: SampleConversion.outputScale), 32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: -1.0), -32768)
    }
}
