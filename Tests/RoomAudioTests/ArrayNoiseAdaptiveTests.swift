// The beam's noise-adaptive choice (array_beam.h, adapt) inside the processor, against the fixed
// −3 dB design rbeam keeps: in a quiet room, where the mics' own noise is all there is, the beam
// must stop amplifying it (delay-and-sum takes 6 dB off four independent noises); in a room whose
// noise comes from all around, it must take more of it away than the fixed design does; and the
// talker it looks at passes at their level either way.
import Foundation
@testable import RoomAudio
import RoomBase
import RoomCaptureChain
import XCTest

final class ArrayNoiseAdaptiveTests: XCTestCase {
    static let rate = 48000, block = 480
    private let sim = [Point3(x: 0.032, y: 0, z: 0), Point3(x: 0, y: 0.032, z: 0),
                       Point3(x: -0.032, y: 0, z: 0), Point3(x: 0, y: -0.032, z: 0)]

    /// The processor with every stage but the array off, steered at `azimuth`: its output is the beam.
    private func adaptiveBeam(_ mics: [[Float]], azimuth: Float) throws -> [Float] {
        let apm = try ArrayChainTests.arrayOnlyProcessor()
        apm.steer(azimuthDegrees: azimuth, hasDirection: true)
        return apm.processOffline(mics: mics, block: Self.block)
    }

    private func fixedBeam(_ mics: [[Float]], azimuth: Double) throws -> [Float] {
        let beam = try XCTUnwrap(ArrayBeam(rate: Self.rate, micPositions: sim))
        beam.steer(azimuth)
        return beam.process(mics)
    }

    /// Mean power of the last `seconds` (the choices have settled by then).
    private func tailPower(_ x: [Float], seconds: Double = 2) -> Double {
        let n = Int(seconds * Double(Self.rate))
        return ArrayChainTests.power(x, from: x.count - n)
    }

    /// Noise from `sources` directions spread over the sphere (integer-sample plane waves: a field
    /// that arrives from all around, as a room's reverberant noise does).
    private func noiseFromAllAround(seconds: Double, sources: Int = 40) -> [[Float]] {
        let n = Int(seconds * Double(Self.rate))
        var mics = [[Float]](repeating: [Float](repeating: 0, count: n), count: 4)
        var rng = TalkerLocatorTests.Noise(state: 99)
        for s in 0..<sources {
            // a Fibonacci sphere: directions spread evenly
            let z = 1 - 2 * (Double(s) + 0.5) / Double(sources), r = (1 - z * z).squareRoot()
            let phi = Double(s) * Double.pi * (3 - 5.0.squareRoot())
            let u = (r * cos(phi), r * sin(phi), z)
            // a room's noise is mostly low (ventilation, traffic, voices far off), where the
            // designs differ most: white noise through a one-pole low-pass at ~1 kHz
            var low: Float = 0
            let source = (0..<n).map { _ -> Float in low += 0.12 * (rng.next() - low); return low * 0.2 }
            for (m, p) in TalkerLocatorTests.board.enumerated() {
                let delay = 12 + Int((-(Double(p.0) * u.0 + Double(p.1) * u.1 + Double(p.2) * u.2) / 343 * Double(Self.rate)).rounded())
                for i in delay..<n { mics[m][i] += source[i - delay] }
            }
        }
        return mics
    }

    func testAQuietRoomsMicNoiseIsNotAmplified() throws {
        // each mic its own noise, nothing else: the sim card's floor in an empty quiet room
        let seconds = 7.0, n = Int(seconds * Double(Self.rate))
        var rng = TalkerLocatorTests.Noise(state: 5)
        let mics = (0..<4).map { _ in (0..<n).map { _ in rng.next() * 0.01 } }
        let mic0 = tailPower(mics[0])
        let adaptive = 10 * log10(tailPower(try adaptiveBeam(mics, azimuth: 30)) / mic0)
        let fixed = 10 * log10(tailPower(try fixedBeam(mics, azimuth: 30)) / mic0)
        print("array noise-adaptive, mics' own noise: adaptive \(adaptive) dB, fixed −3 dB design \(fixed) dB (over mic 0)")
        XCTAssertLessThan(adaptive, -5.5, "delay-and-sum takes 6 dB off four independent noises")
        XCTAssertLessThan(adaptive, fixed - 1, "the fixed design amplifies the mics' noise where it is superdirective")
    }

    func testNoiseFromAllAroundIsLoweredMoreThanByTheFixedDesign() throws {
        let mics = noiseFromAllAround(seconds: 7)
        let mic0 = tailPower(mics[0])
        let adaptiveOut = try adaptiveBeam(mics, azimuth: 30)
        let adaptive = 10 * log10(tailPower(adaptiveOut) / mic0)
        let fixed = 10 * log10(tailPower(try fixedBeam(mics, azimuth: 30)) / mic0)
        print("array noise-adaptive, noise from all around: adaptive \(adaptive) dB, fixed −3 dB design \(fixed) dB (over mic 0)")
        XCTAssertLessThan(adaptive, fixed - 0.3, "most of this noise lies below 1 kHz, where every design leans towards delay-and-sum")

        // A talker where the beam looks, after the choice settled on that noise: still at their
        // level. The same noise with and without the talker's last 1.5 s: the difference of the
        // two outputs is what the beam made of the talker.
        let n = mics[0].count, talkerFrames = 3 * Self.rate / 2
        let tone = (0..<talkerFrames).map { Float(0.05 * sin(2 * Double.pi * 2000 * Double($0) / Double(Self.rate))) }
        let talker = TalkerLocatorTests.planeWave(tone, azimuth: 30)
        let withTalker = (0..<4).map { m in Array(mics[m][0..<(n - talkerFrames)]) + zip(mics[m][(n - talkerFrames)...], talker[m]).map { $0 + $1 } }
        let heard = try adaptiveBeam(withTalker, azimuth: 30)
        let difference = zip(heard, adaptiveOut).map { $0 - $1 }
        let level = 10 * log10(tailPower(difference, seconds: 1) / ArrayChainTests.power(Array(talker[0].suffix(Self.rate))))
        print("array noise-adaptive, a talker in the look direction: \(level) dB")
        XCTAssertEqual(level, 0, accuracy: 1.0, "the talker passes at their level")
    }
}
