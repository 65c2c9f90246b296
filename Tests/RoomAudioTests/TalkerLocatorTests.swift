// The talker's direction from board/sim's 4-mic array (TalkerLocator, talker_locator.h), fed
// plane waves built here sample by sample: broadband sound from a known azimuth reaches each mic
// at -(p·u)/c, placed with a windowed-sinc fractional delay. The far-field scenes through the
// sim card are `scripts/bench farfield`'s (farfield.localization_median_deg, farfield.lock_ms).
import CCaptureChain
@testable import RoomAudio
import RoomCaptureChain
import XCTest

final class TalkerLocatorTests: XCTestCase {
    static let rate = 48000, block = 480
    static let board: [(Float, Float, Float)] = [(0.032, 0, 0), (0, 0.032, 0), (-0.032, 0, 0), (0, -0.032, 0)]

    /// Deterministic white noise in -1...1.
    struct Noise {
        var state: UInt64
        mutating func next() -> Float {
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            return Float(Int64(bitPattern: state &* 2_685_821_657_736_338_717) >> 11) / Float(1 << 52)
        }
    }

    /// A source signal arriving from `azimuth` (degrees, 20° up, as a seated talker): per mic, the
    /// signal delayed by its arrival time (windowed sinc, 33 taps), plus an offset of 20 samples.
    static func planeWave(_ source: [Float], azimuth: Double) -> [[Float]] {
        let az = azimuth * .pi / 180, el = 20.0 * .pi / 180
        let u = (cos(el) * cos(az), cos(el) * sin(az), sin(el))
        return board.map { p in
            let delay = 20 - (Double(p.0) * u.0 + Double(p.1) * u.1 + Double(p.2) * u.2) / 343 * Double(rate)
            var out = [Float](repeating: 0, count: source.count)
            for n in 0..<source.count {
                var acc: Float = 0
                let centre = Int(Double(n) - delay)
                for k in (centre - 16)...(centre + 16) where k >= 0 && k < source.count {
                    let x = Double(n) - delay - Double(k)
                    let sinc = abs(x) < 1e-9 ? 1 : sin(.pi * x) / (.pi * x)
                    let window = 0.5 + 0.5 * cos(.pi * x / 17)
                    acc += source[k] * Float(sinc * window)
                }
                out[n] = acc
            }
            return out
        }
    }

    /// Speech-like bursts: 200 ms of noise, 100 ms of silence, so blocks have onsets.
    static func bursts(blocks: Int, seed: UInt64, level: Float = 0.1) -> [Float] {
        var noise = Noise(state: seed)
        return (0..<(blocks * block)).map { i in (i / 4800) % 3 == 2 ? 0 : noise.next() * level }
    }

    /// Runs the mics through the locator block by block; `listen` per block (default: all).
    static func run(_ locator: TalkerLocator, _ mics: [[Float]], listen: (Int) -> Bool = { _ in true },
                    each: (Int, TalkerLocatorState) -> Void = { _, _ in }) {
        let blocks = mics[0].count / block
        for b in 0..<blocks {
            let planes = mics.map { Array($0[(b * block)..<((b + 1) * block)]) }
            planes[0].withUnsafeBufferPointer { p0 in planes[1].withUnsafeBufferPointer { p1 in
                planes[2].withUnsafeBufferPointer { p2 in planes[3].withUnsafeBufferPointer { p3 in
                    let pointers: [UnsafePointer<Float>?] = [p0.baseAddress, p1.baseAddress, p2.baseAddress, p3.baseAddress]
                    pointers.withUnsafeBufferPointer { locator.process($0.baseAddress!, listen: listen(b)) }
                } }
            } }
            each(b, locator.state)
        }
    }

    static func angle(_ a: Float, _ b: Double) -> Double {
        var d = Double(a) - b
        while d > 180 { d -= 360 }
        while d <= -180 { d += 360 }
        return abs(d)
    }

    func testFindsATalkerAllAroundTheCircle() throws {
        for (i, azimuth) in [0.0, 45, 100, -135, 170, -60].enumerated() {
            let locator = try XCTUnwrap(TalkerLocator(rate: Self.rate, positions: Self.board))
            Self.run(locator, Self.planeWave(Self.bursts(blocks: 40, seed: UInt64(i + 1)), azimuth: azimuth))
            let s = locator.state
            XCTAssertTrue(s.locked, "\(azimuth)°: not locked")
            XCTAssertLessThanOrEqual(Self.angle(s.azimuthDegrees, azimuth), 5, "\(azimuth)°: found \(s.azimuthDegrees)°")
            XCTAssertEqual(s.changes, 1)
        }
    }

    func testMovesToANewTalkerWithin300Milliseconds() throws {
        let locator = try XCTUnwrap(TalkerLocator(rate: Self.rate, positions: Self.board))
        let first = Self.planeWave(Self.bursts(blocks: 60, seed: 7), azimuth: 30)
        let second = Self.planeWave(Self.bursts(blocks: 60, seed: 8), azimuth: -120)
        let mics = (0..<4).map { first[$0] + second[$0] }
        var movedAt: Int?
        Self.run(locator, mics, each: { b, s in
            if b >= 60, movedAt == nil, s.locked, Self.angle(s.azimuthDegrees, -120) <= 10 { movedAt = b }
        })
        let moved = try XCTUnwrap(movedAt, "never moved to the second talker")
        XCTAssertLessThanOrEqual((moved - 60) * 10, 300, "the new talker was found after \((moved - 60) * 10) ms")
        XCTAssertEqual(locator.state.changes, 2)
    }

    /// x band-passed to lo...hi Hz (windowed sinc, 201 taps).
    static func bandPass(_ x: [Float], lo: Double, hi: Double) -> [Float] {
        let taps = (-100...100).map { n -> Float in
            let t = Double(n)
            func lowpass(_ f: Double) -> Double { n == 0 ? 2 * f / Double(rate) : sin(2 * .pi * f / Double(rate) * t) / (.pi * t) }
            return Float((lowpass(hi) - lowpass(lo)) * (0.54 + 0.46 * cos(.pi * t / 101)))
        }
        return x.indices.map { i in
            var acc: Float = 0
            for (k, h) in taps.enumerated() where i - k + 100 >= 0 && i - k + 100 < x.count { acc += h * x[i - k + 100] }
            return acc
        }
    }

    func testAStationaryNoiseSourceDoesNotPullTheDirection() throws {
        // A fan at 90°, always on, broadband; the talker at -30° has its energy at 300-1500 Hz
        // (as voiced speech does), so the fan owns most of the band the locator looks at
        // (300-4000 Hz) while the talker owns its own bins by ~13 dB. Whitening alone would
        // follow the fan; the noise-floor weighting steers with the talker's bins only.
        let locator = try XCTUnwrap(TalkerLocator(rate: Self.rate, positions: Self.board))
        var noise = Noise(state: 99)
        let fan = Self.planeWave((0..<(200 * Self.block)).map { _ in noise.next() * 0.01 }, azimuth: 90)
        // the fan runs alone for 1 s (the locator learns its floor without listening), then the
        // talker starts
        let talker = [[Float]](repeating: [Float](repeating: 0, count: 100 * Self.block), count: 4)
        let speech = Self.planeWave(Self.bandPass(Self.bursts(blocks: 100, seed: 5), lo: 300, hi: 1500), azimuth: -30)
        let mics = (0..<4).map { m in zip(fan[m], talker[m] + speech[m]).map { $0 + $1 } }
        var errors: [Double] = []
        // listen while the talker talks, as the chain's voice detector would say
        Self.run(locator, mics, listen: { b in b >= 100 && ((b - 100) / 10) % 3 != 2 }, each: { b, s in
            if b >= 130, s.locked { errors.append(Self.angle(s.azimuthDegrees, -30)) }
        })
        XCTAssertFalse(errors.isEmpty, "never locked")
        let sorted = errors.sorted()
        XCTAssertLessThanOrEqual(sorted.isEmpty ? 180 : sorted[sorted.count / 2], 5, "median error: \(sorted.isEmpty ? 180 : sorted[sorted.count / 2])°")
        XCTAssertLessThanOrEqual(sorted.last ?? 180, 20, "the direction strayed \(sorted.last ?? 180)° (towards the fan?)")
    }

    func testBlocksItIsNotToListenToLeaveTheDirectionAlone() throws {
        let locator = try XCTUnwrap(TalkerLocator(rate: Self.rate, positions: Self.board))
        // 60 blocks: the first silence (blocks 20-29) teaches the noise floor, then it locks
        Self.run(locator, Self.planeWave(Self.bursts(blocks: 60, seed: 3), azimuth: 60))
        XCTAssertLessThanOrEqual(Self.angle(locator.state.azimuthDegrees, 60), 5)
        // the far end plays from below (same arrival at every mic): not listened to
        var noise = Noise(state: 4)
        let echo = [Float]((0..<(30 * Self.block)).map { _ in noise.next() * 0.3 })
        Self.run(locator, [echo, echo, echo, echo], listen: { _ in false })
        XCTAssertLessThanOrEqual(Self.angle(locator.state.azimuthDegrees, 60), 5)
        XCTAssertTrue(locator.state.locked, "0.3 s without voice must not unlock")
        Self.run(locator, [echo, echo, echo, echo] .map { Array(repeating: $0, count: 6).flatMap { $0 } }, listen: { _ in false })
        XCTAssertFalse(locator.state.locked, "2 s without voice unlocks")
        XCTAssertLessThanOrEqual(Self.angle(locator.state.azimuthDegrees, 60), 5, "and keeps the last direction")
    }

    func testGeometriesThatCannotTellDirectionsAreNamed() {
        XCTAssertNil(TalkerLocator.problem(rate: 48000, positions: Self.board))
        let two = TalkerLocator.problem(rate: 48000, positions: [(0.03, 0, 0), (-0.03, 0, 0)])
        XCTAssertTrue(two?.contains("3 to 8 microphones") == true, two ?? "nil")
        let line = TalkerLocator.problem(rate: 48000, positions: [(-0.05, 0, 0), (0, 0, 0), (0.05, 0, 0), (0.1, 0, 0)])
        XCTAssertTrue(line?.contains("one line") == true, line ?? "nil")
        // a square 0.2 m across the diagonal: aliased above 1 kHz; the 4-mic HAT's 91 mm is fine
        let wide = TalkerLocator.problem(rate: 48000, positions: [(0.1, 0, 0), (0, 0.1, 0), (-0.1, 0, 0), (0, -0.1, 0)])
        XCTAssertTrue(wide?.contains("more than 0.17 m apart") == true, wide ?? "nil")
        XCTAssertNil(TalkerLocator.problem(rate: 48000, positions: [(0.0323, 0.0323, 0), (-0.0323, 0.0323, 0), (-0.0323, -0.0323, 0), (0.0323, -0.0323, 0)]))
        XCTAssertNil(TalkerLocator(rate: 48000, positions: [(0, 0, 0)]))
    }
}
