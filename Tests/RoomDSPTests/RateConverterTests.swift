import RoomDSP
import XCTest

final class RateConverterTests: XCTestCase {
    private func tone(_ hz: Double, rate: Int, count: Int, amplitude: Float = 0.5) -> [Float] {
        (0..<count).map { amplitude * Float(sin(2 * Double.pi * hz * Double($0) / Double(rate))) }
    }

    private func rms(_ x: ArraySlice<Float>) -> Double {
        (x.reduce(0) { $0 + Double($1 * $1) } / Double(x.count)).squareRoot()
    }

    private func convert(_ input: [Float], _ converter: RateConverter, chunk: Int) -> [Float] {
        var out: [Float] = []
        var buffer = [Float](repeating: 0, count: converter.outputCapacity(forInput: chunk))
        var i = 0
        while i < input.count {
            let n = min(chunk, input.count - i)
            let made = input[i..<(i + n)].withUnsafeBufferPointer { inp in
                buffer.withUnsafeMutableBufferPointer { converter.process(inp.baseAddress!, count: n, into: $0.baseAddress!) }
            }
            out += buffer[0..<made]
            i += n
        }
        return out
    }

    func testOnlyWholeSupportedRatiosAreAccepted() {
        XCTAssertNotNil(RateConverter(from: 48_000, to: 8000))
        XCTAssertNotNil(RateConverter(from: 8000, to: 48_000))
        XCTAssertNotNil(RateConverter(from: 16_000, to: 16_000))
        XCTAssertNil(RateConverter(from: 44_100, to: 8000))
        XCTAssertNil(RateConverter(from: 48_000, to: 32_000))
        XCTAssertNil(RateConverter(from: 0, to: 8000))
    }

    /// Speech-band tones pass at their level down to 8 kHz and back; a tone above the low
    /// rate's Nyquist frequency is removed before it could fold back.
    func testPassBandKeepsItsLevelAndAliasesAreRemoved() throws {
        for (high, low) in [(48_000, 8000), (48_000, 16_000), (16_000, 8000)] {
            for hz in [300.0, 1000.0, Double(low) * 0.38] {
                let down = try XCTUnwrap(RateConverter(from: high, to: low))
                let up = try XCTUnwrap(RateConverter(from: low, to: high))
                let input = tone(hz, rate: high, count: high / 2)
                let back = convert(convert(input, down, chunk: high / 100), up, chunk: low / 100)
                XCTAssertEqual(back.count, input.count)
                let level = 20 * log10(rms(back[(high / 10)...]) / rms(input[(high / 10)...]))
                XCTAssertEqual(level, 0, accuracy: 0.5, "\(hz) Hz through \(high) → \(low) → \(high)")
            }
            let down = try XCTUnwrap(RateConverter(from: high, to: low))
            let alias = convert(tone(Double(low) * 0.6, rate: high, count: high / 2), down, chunk: high / 100)
            let level = 20 * log10(rms(alias[(low / 10)...]) / (0.5 / 2.0.squareRoot()))
            XCTAssertLessThan(level, -50, "\(Double(low) * 0.6) Hz into \(low) Hz")
        }
    }

    /// Converted in 10 ms pieces or in one go, the output is the same: the history carries over.
    func testPiecewiseEqualsWhole() throws {
        let input = tone(700, rate: 48_000, count: 4800)
        for (from, to) in [(48_000, 8000), (8000, 48_000), (48_000, 16_000)] {
            let piecewise = convert(input, try XCTUnwrap(RateConverter(from: from, to: to)), chunk: from / 100)
            let whole = convert(input, try XCTUnwrap(RateConverter(from: from, to: to)), chunk: input.count)
            XCTAssertEqual(piecewise, whole)
        }
    }
}
