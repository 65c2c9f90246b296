import RoomAudio
import RoomCaptureChain
import XCTest

/// webrtc's stages on the low band (Sources/CCaptureChain/band_split.h) must do what they did at
/// 48 kHz: the HPF still removes rumble, the AGC still lifts a quiet talker, and the band above
/// 8 kHz — which the low-band path never sees — comes out at its level (music keeps it).
final class WebRTCBandTests: XCTestCase {
    private let rate = 48000, block = 480

    /// Level (dBFS of a sine) of `frequency` in `x`, by Goertzel.
    private func level(_ x: ArraySlice<Float>, _ frequency: Double) -> Double {
        let w = 2 * Double.pi * frequency / Double(rate), coeff = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for v in x { let s0 = Double(v) + coeff * s1 - s2; s2 = s1; s1 = s0 }
        let power = s1 * s1 + s2 * s2 - coeff * s1 * s2
        return 20 * log10(max(2 * sqrt(power) / Double(x.count), 1e-12))
    }

    /// Runs `seconds` of `input` through an APM with roomd's canceller (silent far end) and
    /// `band`; returns the output.
    private func run(_ input: [Float], band: WebRTCBand, agc: Bool) throws -> [Float] {
        var s = ProcessingSettings()
        s.beamform = false
        s.noiseSuppress = false
        s.gainControl = agc
        s.webrtcBand = band
        let apm = try AudioProcessor(rate: rate, micChannels: 1, micPositions: [], settings: s)
        return apm.processOffline(input, block: block)
    }

    private func tones(_ parts: [(Double, Double)], seconds: Double) -> [Float] {
        (0..<Int(seconds * Double(rate))).map { n in
            Float(parts.reduce(0.0) { $0 + $1.1 * sin(2 * Double.pi * $1.0 * Double(n) / Double(rate)) })
        }
    }

    func testHighPassAndTheUpperBandMatchTheFullBandChain() throws {
        // 40 Hz rumble, 1 kHz and 12 kHz at -26 dBFS each.
        let a = 0.05
        let input = tones([(40, a), (1000, a), (12000, a)], seconds: 3)
        let low = try run(input, band: .low, agc: false), full = try run(input, band: .full, agc: false)
        let tail = input.count - rate ..< input.count
        let reference = level(input[tail], 1000)
        for (name, out) in [("low", low), ("full", full)] {
            print("webrtc band \(name): 40 Hz \(level(out[tail], 40)), 1 kHz \(level(out[tail], 1000)), 12 kHz \(level(out[tail], 12000)) dBFS (in: \(reference))")
        }
        XCTAssertEqual(level(low[tail], 1000), reference, accuracy: 0.5, "speech band passes")
        XCTAssertEqual(level(low[tail], 12000), level(input[tail], 12000), accuracy: 0.5, "the band above 8 kHz keeps its level")
        // The HPF at 16 kHz takes as much of the rumble as at 48 kHz.
        XCTAssertLessThan(level(low[tail], 40), reference - 6, "the high-pass filter still removes rumble")
        XCTAssertEqual(level(low[tail], 40), level(full[tail], 40), accuracy: 2)
    }

    func testGainControlStillLiftsAQuietTalker() throws {
        // A quiet 500 Hz "talker" with a syllable rhythm (the AGC follows speech-like input).
        let quiet = (0..<(4 * rate)).map { n -> Float in
            let t = Double(n) / Double(rate)
            return Float(0.01 * sin(2 * Double.pi * 500 * t) * (0.5 + 0.5 * sin(2 * Double.pi * 3 * t)))
        }
        let low = try run(quiet, band: .low, agc: true), full = try run(quiet, band: .full, agc: true)
        let tail = quiet.count - rate ..< quiet.count
        let gainLow = level(low[tail], 500) - level(quiet[tail], 500), gainFull = level(full[tail], 500) - level(quiet[tail], 500)
        print("webrtc band: AGC gain at 500 Hz low \(gainLow) dB, full \(gainFull) dB")
        XCTAssertGreaterThan(gainLow, 3, "the AGC lifts a quiet talker on the low band")
        XCTAssertEqual(gainLow, gainFull, accuracy: 2)
    }
}
