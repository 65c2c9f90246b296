import RoomTelephony
import XCTest

final class G711Tests: XCTestCase {
    /// Values every G.711 implementation agrees on (the standard's tables): silence, the
    /// loudest codes and the smallest steps.
    func testKnownCodes() {
        XCTAssertEqual(G711.muLaw(fromLinear: 0), 0xFF)
        XCTAssertEqual(G711.muLaw(fromLinear: 32_767), 0x80)
        XCTAssertEqual(G711.muLaw(fromLinear: -32_768), 0x00)
        XCTAssertEqual(G711.linear(fromMuLaw: 0xFF), 0)
        XCTAssertEqual(G711.linear(fromMuLaw: 0x80), 32_124)
        XCTAssertEqual(G711.linear(fromMuLaw: 0x00), -32_124)
        XCTAssertEqual(G711.aLaw(fromLinear: 0), 0xD5)
        XCTAssertEqual(G711.aLaw(fromLinear: 32_767), 0xAA)
        XCTAssertEqual(G711.aLaw(fromLinear: -32_768), 0x2A)
        XCTAssertEqual(G711.linear(fromALaw: 0xD5), 8)
        XCTAssertEqual(G711.linear(fromALaw: 0x55), -8)
        XCTAssertEqual(G711.linear(fromALaw: 0xAA), 32_256)
    }

    /// Each code decodes to a value that encodes back to the same code (μ-law's two zeros
    /// excepted: 0x7F is −0 and comes back as +0, 0xFF), and larger codes mean larger values.
    func testEveryCodeSurvivesARoundTripAndTheCurveIsMonotonic() {
        for code in 0...255 {
            let byte = UInt8(code)
            let mu = G711.linear(fromMuLaw: byte)
            XCTAssertEqual(G711.muLaw(fromLinear: mu), byte == 0x7F ? 0xFF : byte, "μ-law \(code)")
            XCTAssertEqual(G711.aLaw(fromLinear: G711.linear(fromALaw: byte)), byte, "A-law \(code)")
        }
        var previousMu = Int16.min, previousA = Int16.min
        for s in stride(from: -32_768, through: 32_767, by: 7) {
            let mu = G711.linear(fromMuLaw: G711.muLaw(fromLinear: Int16(s)))
            let a = G711.linear(fromALaw: G711.aLaw(fromLinear: Int16(s)))
            XCTAssertGreaterThanOrEqual(mu, previousMu)
            XCTAssertGreaterThanOrEqual(a, previousA)
            previousMu = mu
            previousA = a
        }
    }

    /// The quantization error stays within half a step of the segment the sample falls in: a
    /// speech-level sine keeps ~38 dB SNR through either law (the standard's figure is 35-38 dB).
    func testSignalToQuantizationNoise() {
        var signal = 0.0, muNoise = 0.0, aNoise = 0.0
        for n in 0..<8000 {
            let x = 8000 * sin(2 * Double.pi * 440 * Double(n) / 8000)
            let s = Int16(x.rounded())
            signal += Double(s) * Double(s)
            let mu = Double(G711.linear(fromMuLaw: G711.muLaw(fromLinear: s))) - Double(s)
            let a = Double(G711.linear(fromALaw: G711.aLaw(fromLinear: s))) - Double(s)
            muNoise += mu * mu
            aNoise += a * a
        }
        XCTAssertGreaterThan(10 * log10(signal / muNoise), 35)
        XCTAssertGreaterThan(10 * log10(signal / aNoise), 35)
    }
}
