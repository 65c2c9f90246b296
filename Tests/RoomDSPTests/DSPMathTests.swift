import Foundation
import RoomDSP
import XCTest

final class DSPMathTests: XCTestCase {
    func testDBFSAgainstFoundation() {
        for x: Float in [1, 0.5, 0.1, 0.001, 2, 0.891, 1e-4, 3.3e-5, 0.7071068, 123.4] {
            XCTAssertEqual(dBFS(fromLinear: x), Float(20 * log10(Double(x))), accuracy: 1e-4, "x = \(x)")
            XCTAssertEqual(dBFS(fromLinear: -x), dBFS(fromLinear: x), "sign must not matter")
        }
        XCTAssertEqual(dBFS(fromLinear: 1), 0)
    }

    func testDBFSFloor() {
        XCTAssertEqual(dBFS(fromLinear: 0), -100)
        XCTAssertEqual(dBFS(fromLinear: 1e-9), -100, "-180 dB is below the floor")
        XCTAssertEqual(dBFS(fromLinear: .nan), -100)
        XCTAssertEqual(dBFS(fromLinear: 0, floor: -120), -120)
        XCTAssertEqual(dBFS(fromLinear: .leastNonzeroMagnitude), -100)
    }

    func testLinearFromDBAgainstFoundation() {
        for db: Float in [0, -1, -3, -6.0206, -20, -60, -100, 6, 12, 0.5, -0.1] {
            let expected = Float(pow(10, Double(db) / 20))
            XCTAssertEqual(linear(fromDB: db), expected, accuracy: expected * 1e-6, "dB = \(db)")
        }
        XCTAssertEqual(linear(fromDB: 0), 1)
        XCTAssertEqual(linear(fromDB: -2000), 0)
        XCTAssertEqual(linear(fromDB: .nan), 0)
        XCTAssertEqual(linear(fromDB: 1e6), .infinity)
    }

    func testRoundTrip() {
        for db in stride(from: Float(-90), through: 20, by: 0.7) {
            XCTAssertEqual(dBFS(fromLinear: linear(fromDB: db)), db, accuracy: 1e-4)
        }
    }

    func testInt16FloatConversion() {
        XCTAssertEqual(SampleConversion.float(fromInt16: -32768), -1)
        XCTAssertEqual(SampleConversion.float(fromInt16: 16384), 0.5)
        XCTAssertEqual(SampleConversion.int16(fromFloat: 0.5), 16384)
        XCTAssertEqual(SampleConversion.int16(fromFloat: 1), 32767, "full scale clips by one step")
        XCTAssertEqual(SampleConversion.int16(fromFloat: -1), -32768)
        XCTAssertEqual(SampleConversion.int16(fromFloat: 7), 32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: -7), -32768)
        XCTAssertEqual(SampleConversion.int16(fromFloat: .nan), 0)
        XCTAssertEqual(SampleConversion.int16(fromFloat: .infinity), 32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: -.infinity), -32768)
        // Every Int16 survives the round trip.
        for v in Int16.min...Int16.max {
            if SampleConversion.int16(fromFloat: SampleConversion.float(fromInt16: v)) != v { XCTFail("\(v)"); break }
        }
    }

    func testBufferConversionCountsClips() {
        let floats: [Float] = [0, 0.25, 1.5, -2, .nan, -0.25]
        var ints = [Int16](repeating: 99, count: 6)
        let clipped = floats.withUnsafeBufferPointer { src in
            ints.withUnsafeMutableBufferPointer { SampleConversion.toInt16(src, into: $0) }
        }
        XCTAssertEqual(ints, [0, 8192, 32767, -32768, 0, -8192])
        XCTAssertEqual(clipped, 3, "1.5, -2 and NaN")
        var back = [Float](repeating: 9, count: 4)   // shorter destination: converts 4 only
        let n = ints.withUnsafeBufferPointer { src in
            back.withUnsafeMutableBufferPointer { SampleConversion.toFloat(src, into: $0) }
        }
        XCTAssertEqual(n, 4)
        XCTAssertEqual(back, [0, 0.25, 32767 / 32768, -1])
    }

    /// The loop's output conversion: full scale without a clip, and no trap on NaN or infinity
    /// (a broken mix plays silence or full scale, it does not stop the audio thread).
    func testOutputConversionNeverTraps() {
        let k = SampleConversion.outputScale
        XCTAssertEqual(SampleConversion.int16(fromFloat: 1.0, scale: k), 32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: -1.0, scale: k), -32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: 0.5, scale: k), 16384)
        XCTAssertEqual(SampleConversion.int16(fromFloat: .nan, scale: k), 0)
        XCTAssertEqual(SampleConversion.int16(fromFloat: .infinity, scale: k), 32767)
        XCTAssertEqual(SampleConversion.int16(fromFloat: -.infinity, scale: k), -32768)
    }
}
