import CCaptureChain
import Foundation
@testable import RoomAudio
import RoomBase
import RoomCaptureChain
import XCTest

/// The Swift side of the C beam (`rbeam_*`) that `roomctl selftest` measures the array with.
final class ArrayBeamTests: XCTestCase {
    private let sim = [Point3(x: 0.032, y: 0, z: 0), Point3(x: 0, y: 0.032, z: 0),
                       Point3(x: -0.032, y: 0, z: 0), Point3(x: 0, y: -0.032, z: 0)]

    /// Gaussian-ish noise (sum of four uniforms), RMS about 0.1.
    private func noise(_ count: Int, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in Float((rng.unit() + rng.unit() + rng.unit() + rng.unit() - 2) * 0.17) }
    }

    private func power(_ x: ArraySlice<Float>) -> Double { x.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(x.count) }

    func testRefusesWhatTheCSideCannotBuild() {
        XCTAssertNil(ArrayBeam(rate: 48_000, micPositions: [sim[0]]), "one mic")
        XCTAssertNil(ArrayBeam(rate: 48_000, micPositions: Array(repeating: sim, count: 3).flatMap { $0 }), "12 mics")
        XCTAssertNil(ArrayBeam(rate: 44_123, micPositions: sim), "not a multiple of 100 Hz")
        XCTAssertNil(ArrayBeam(rate: 48_000, micPositions: [sim[0], Point3(x: .nan, y: 0, z: 0)]))
        let beam = ArrayBeam(rate: 48_000, micPositions: sim)
        XCTAssertEqual(beam?.blockFrames, 480)
        XCTAssertEqual(beam?.latency, 96)
        XCTAssertEqual(beam?.process([[0, 0], [0, 0]]), [], "two planes for four mics")
        XCTAssertEqual(beam?.process(Array(repeating: [Float](repeating: 0, count: 479), count: 4)), [], "less than a block")
        XCTAssertEqual(beam?.process([[Float](repeating: 0, count: 960), [], [], []]), [], "planes of different lengths")
        XCTAssertNil(ArrayBeamMeter(rate: 48_000, micPositions: [sim[0]]).make())
        XCTAssertNotNil(ArrayBeamMeter(rate: 48_000, micPositions: sim).make())
    }

    func testIndependentNoiseIsQuieterThroughTheBeam() throws {
        // Each mic its own noise, as the sim card's floor: the beam adds them incoherently.
        let mics = (0..<4).map { noise(48_000, seed: UInt64(10 + $0)) }
        let beam = try XCTUnwrap(ArrayBeam(rate: 48_000, micPositions: sim))
        let latency = beam.latency
        for az in [0.0, 45, 90, 200] {
            beam.steer(az)
            let out = beam.process(mics)
            XCTAssertEqual(out.count, 48_000)
            let gain = 10 * log10(power(out[(2_400 + latency)...]) / power(mics[0][2_400..<(48_000 - latency)]))
            print("array beam, independent noise: \(gain) dB at \(az)°")
            XCTAssertLessThan(gain, -0.5, "azimuth \(az)")
            XCTAssertGreaterThan(gain, -7, "four mics cannot take more than 6 dB off independent noise (azimuth \(az))")
        }
    }

    func testASourceInTheLookDirectionPassesAndTheOppositeOneIsLowered() throws {
        // A plane wave from +x, as the sim room's echo reaches the mics: mic0 first, mic1 and
        // mic3 4 samples later, mic2 9 (mic_delays 0 4 9 4).
        let source = noise(48_000 + 16, seed: 99)
        let delays = [0, 4, 9, 4]
        let mics = delays.map { d in Array(source[(16 - d)..<(16 - d + 48_000)]) }
        func gain(_ az: Double) throws -> Double {
            let beam = try XCTUnwrap(ArrayBeam(rate: 48_000, micPositions: sim))
            beam.steer(az)
            let out = beam.process(mics), latency = beam.latency
            return 10 * log10(power(out[(960 + latency)...]) / power(mics[0][960..<(48_000 - latency)]))
        }
        let toward = try gain(0), away = try gain(180)
        print("array beam, plane wave from +x: \(toward) dB steered at it, \(away) dB steered away")
        XCTAssertEqual(toward, 0, accuracy: 1.5, "the look direction passes")
        XCTAssertLessThan(away, toward - 3, "from behind it is lowered (toward \(toward) dB, away \(away) dB)")

        // The output lags the mics by `latency`: the same signal on every mic (a source straight
        // above) comes out as itself, that much later.
        let same = Array(repeating: Array(source.prefix(48_000)), count: 4)
        let beam = try XCTUnwrap(ArrayBeam(rate: 48_000, micPositions: sim))
        let out = beam.process(same), latency = beam.latency
        var best = (lag: -1, value: 0.0)
        for lag in 0...200 {
            var sum = 0.0
            for n in 4_800..<40_000 { sum += Double(same[0][n]) * Double(out[n + lag]) }
            if sum > best.value { best = (lag, sum) }
        }
        XCTAssertEqual(best.lag, latency)
    }

    private func adaptiveBeam() throws -> OpaquePointer {
        let xyz = sim.flatMap { [Float($0.x), Float($0.y), Float($0.z)] }
        return try XCTUnwrap(xyz.withUnsafeBufferPointer { rbeam_create_adaptive(48_000, 4, $0.baseAddress) })
    }

    /// The 10 ms blocks `blocks` of the four mics through the C beam.
    private func process(_ beam: OpaquePointer, _ mics: [[Float]], blocks: Range<Int>) {
        var out = [Float](repeating: 0, count: 480)
        for b in blocks {
            let planes = mics.map { Array($0[(b * 480)..<((b + 1) * 480)]) }
            planes[0].withUnsafeBufferPointer { p0 in planes[1].withUnsafeBufferPointer { p1 in
                planes[2].withUnsafeBufferPointer { p2 in planes[3].withUnsafeBufferPointer { p3 in
                    let pointers: [UnsafePointer<Float>?] = [p0.baseAddress, p1.baseAddress, p2.baseAddress, p3.baseAddress]
                    pointers.withUnsafeBufferPointer { rbeam_process(beam, $0.baseAddress, &out) }
                } }
            } }
        }
    }

    /// Noise from all round, as a reverberant room's: a plane wave from each of eight directions
    /// 45° apart (whole-sample delays across the 64 mm array: 0-9 samples), over each mic's own
    /// noise (`own`) 40 dB down.
    private func fromAllRound(_ samples: Int, own: [[Float]]) -> [[Float]] {
        let sources = (0..<8).map { noise(samples + 16, seed: UInt64(70 + $0)) }
        return (0..<4).map { m in
            (0..<samples).map { i -> Float in
                var x: Float = 0.01 * own[m][i]
                for (s, src) in sources.enumerated() {
                    let az = Double(s) * .pi / 4
                    // a plane wave from az reaches mic m (p_m·u)/c earlier than the centre
                    let lead = (sim[m].x * cos(az) + sim[m].y * sin(az)) / 343 * 48_000
                    x += src[8 - Int(lead.rounded()) + i] / 3
                }
                return x
            }
        }
    }

    /// The first beam the chain takes up (before it, mic 0 alone: nothing to take choices from)
    /// chooses its designs within ~0.1 s once 0.3 s of the room has been heard (array_beam.h
    /// kFirstChoiceBlocks), rather than starting from delay-and-sum and revisiting 8 bins a block
    /// after ~1 s: the first talker's first words are heard through the room's design. Taken up
    /// 0.2 s into noise from all round, the beam waits for 0.3 s heard, and its choice 0.15 s
    /// after that is the one it still has 1.2 s later (superdirective where a design can be: the
    /// low kHz); with only each mic's own noise it stays delay-and-sum.
    func testTheFirstBeamChoosesItsDesignsAtOnce() throws {
        let samples = 2 * 48_000
        let own = (0..<4).map { noise(samples, seed: UInt64(140 + $0)) }
        func shares(_ mics: [[Float]]) throws -> [Float] {
            let beam = try adaptiveBeam()
            defer { rbeam_destroy(beam) }
            process(beam, mics, blocks: 0..<20)
            rbeam_take_up(beam, 90)
            process(beam, mics, blocks: 20..<29)
            var shares = [rbeam_superdirective_share(beam, 90)]   // 0.29 s heard
            process(beam, mics, blocks: 29..<45)
            shares.append(rbeam_superdirective_share(beam, 90))
            process(beam, mics, blocks: 45..<165)
            shares.append(rbeam_superdirective_share(beam, 90))
            return shares
        }
        let round = try shares(fromAllRound(samples, own: own)), independent = try shares(own)
        print("first beam: share of bins not delay-and-sum 0.29 s, 0.45 s and 1.65 s into the room: \(round) (noise from all round), \(independent) (each mic's own)")
        XCTAssertEqual(round[0], 0, "nothing chosen before 0.3 s of the room was heard")
        XCTAssertGreaterThan(round[1], 0.1, "superdirective where the room calls for it, within 0.15 s")
        XCTAssertGreaterThan(round[1], 0.9 * round[2], "the first choice is the room's")
        XCTAssertLessThan(independent[2], 0.02, "delay-and-sum where each mic hears its own noise")
    }

    /// The echo-time design a beam takes up (array_beam.h, choose_echo_design) is the room's
    /// noise's to choose: delay-and-sum where each mic hears its own noise, a superdirective
    /// design where it comes from all round, and nothing before ~1 s of blocks nobody talks in.
    func testTheEchoTimeDesignFollowsTheRoomsNoise() throws {
        func design(_ mics: [[Float]], quiet: Bool) throws -> Int32 {
            let beam = try adaptiveBeam()
            defer { rbeam_destroy(beam) }
            rbeam_set_room_quiet(beam, quiet ? 1 : 0)
            process(beam, mics, blocks: 0..<(mics[0].count / 480))
            return rbeam_echo_design(beam, 90)
        }
        let samples = 48_000 * 2
        let own = (0..<4).map { noise(samples, seed: UInt64(40 + $0)) }
        let directional = fromAllRound(samples, own: own)
        let independent = try design(own, quiet: true)
        let vent = try design(directional, quiet: true)
        let unheard = try design(directional, quiet: false)
        print("echo-time design: independent noise \(independent), noise from all round \(vent), nothing quiet heard \(unheard)")
        XCTAssertEqual(independent, 0, "delay-and-sum takes the most off each mic's own noise")
        XCTAssertGreaterThan(vent, 0, "a superdirective design lets less of a noise from all round through")
        XCTAssertEqual(unheard, -1, "no block was quiet: nothing to choose by")
    }
}
