// The array's beam (array_beam.h) and the chain around it on board/sim's 4-mic array, fed plane
// waves built as in TalkerLocatorTests. The far-field rooms through the sim card are
// `scripts/bench farfield`'s (farfield.pesq_roomd, farfield.stoi_roomd).
import CCaptureChain
@testable import RoomAudio
import RoomCaptureChain
import XCTest

final class ArrayChainTests: XCTestCase {
    static let rate = 48000, block = 480

    /// Runs `mics` (one array per mic) through rbeam steered at `azimuth`: the output.
    static func beam(_ mics: [[Float]], steeredAt azimuth: Float) throws -> [Float] {
        let xyz = TalkerLocatorTests.board.flatMap { [$0.0, $0.1, $0.2] }
        let beam = try XCTUnwrap(xyz.withUnsafeBufferPointer { rbeam_create(Int32(rate), 4, $0.baseAddress) })
        defer { rbeam_destroy(beam) }
        XCTAssertEqual(Int(rbeam_frames_per_block(beam)), block)
        rbeam_steer(beam, azimuth)
        var out = [Float](repeating: 0, count: mics[0].count)
        var planes = [Float](repeating: 0, count: 4 * block)
        for b in 0..<(mics[0].count / block) {
            for m in 0..<4 { for i in 0..<block { planes[m * block + i] = mics[m][b * block + i] } }
            planes.withUnsafeBufferPointer { p in
                let pointers: [UnsafePointer<Float>?] = (0..<4).map { p.baseAddress! + $0 * block }
                out.withUnsafeMutableBufferPointer { o in
                    pointers.withUnsafeBufferPointer { rbeam_process(beam, $0.baseAddress!, o.baseAddress! + b * block) }
                }
            }
        }
        return out
    }

    static func power(_ x: [Float], from: Int = 0) -> Double {
        x[from...].reduce(0) { $0 + Double($1) * Double($1) } / Double(x.count - from)
    }

    static func dB(_ a: Double, over b: Double) -> Double { 10 * log10(a / b) }

    /// Sound from where the beam looks passes at its level; sound from the other side of the table
    /// is lowered. (White noise: the whole band, aliasing above ~4 kHz included.)
    func testBeamPassesItsDirectionAndLowersTheOtherSide() throws {
        var noise = TalkerLocatorTests.Noise(state: 7)
        let source = (0..<(60 * Self.block)).map { _ in noise.next() * 0.1 }
        let skip = 10 * Self.block
        for azimuth in [0.0, 100, -135] {
            let front = TalkerLocatorTests.planeWave(source, azimuth: azimuth)
            let back = TalkerLocatorTests.planeWave(source, azimuth: azimuth + 180)
            let passed = Self.dB(Self.power(try Self.beam(front, steeredAt: Float(azimuth)), from: skip), over: Self.power(front[0], from: skip))
            let lowered = Self.dB(Self.power(try Self.beam(back, steeredAt: Float(azimuth)), from: skip), over: Self.power(back[0], from: skip))
            XCTAssertEqual(passed, 0, accuracy: 1.0, "\(azimuth)°: the talker's direction changed level by \(passed) dB")
            XCTAssertLessThan(lowered, -3, "\(azimuth)°: the other side only changed by \(lowered) dB")
        }
    }

    /// The processor with every stage but the array off: its output is the beam.
    static func arrayOnlyProcessor() throws -> AudioProcessor {
        var settings = ProcessingSettings()
        settings.highPass = false; settings.echoCancel = false; settings.noiseSuppress = false
        settings.gainControl = false; settings.voiceDetect = false
        return try AudioProcessor(rate: rate, micChannels: 4, micPositions: TalkerLocatorTests.board,
                                  settings: settings, arrayProcessing: true)
    }

    /// Steering changes while a tone plays: the output fades from one beam to the other, no step
    /// larger than the tone's own (a click would be one).
    func testChangingTheBeamDoesNotClick() throws {
        let apm = try Self.arrayOnlyProcessor()
        XCTAssertTrue(apm.arrayProcessing)
        let tone = (0..<(40 * Self.block)).map { Float(0.3 * sin(2 * Double.pi * 1000 * Double($0) / Double(Self.rate))) }
        let mics = TalkerLocatorTests.planeWave(tone, azimuth: 30)
        let out = apm.processOffline(mics: mics, block: Self.block) { b in   // steers from the next block on
            if b == 14 { apm.steer(azimuthDegrees: 30, hasDirection: true) }
            if b == 24 { apm.steer(azimuthDegrees: 200, hasDirection: true) }
        }
        XCTAssertEqual(apm.beamAzimuthDegrees ?? .nan, -165, accuracy: 0.01, "the beam nearest 200°")
        // the tone's largest step from one sample to the next: 0.3 · 2π · 1000/48000
        let toneStep: Float = 0.3 * 2 * .pi * 1000 / 48000
        var worst: Float = 0
        for i in (5 * Self.block)..<out.count { worst = max(worst, abs(out[i] - out[i - 1])) }
        XCTAssertLessThan(worst, 1.3 * toneStep, "a step of \(worst) (the tone's own: \(toneStep))")
        // and the beams did change what is heard: 30° passes the tone, 200° (−165°) lowers it
        let at30 = Self.power(Array(out[(20 * Self.block)..<(25 * Self.block)]))
        let at200 = Self.power(Array(out[(32 * Self.block)..<(40 * Self.block)]))
        XCTAssertEqual(Self.dB(at30, over: Self.power(tone)), 0, accuracy: 1.0)
        XCTAssertLessThan(Self.dB(at200, over: at30), -1)
    }
}
