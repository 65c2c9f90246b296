// The beam and the echo canceller behind it (apm_shim.cpp, array_beam.h): a beam turned to a talker
// must leave the canceller an echo path it can learn. A caller bridged into a two-appliance room
// heard itself at -24 dB once an appliance's beam had chosen its designs per bin (scripts/bench
// call, docs/benchmarks.md "call"); while the echo is in the room every beam is now delay-and-sum.
import CCaptureChain
@testable import RoomAudio
import RoomCaptureChain
import XCTest

final class BeamEchoTests: XCTestCase {
    static let rate = 48000, block = 480

    /// Integer per-mic delays of a plane wave from `azimuth` (degrees, 20° up) on board/sim's array.
    static func micDelays(azimuth: Double) -> [Int] {
        let az = azimuth * .pi / 180, el = 20.0 * .pi / 180
        let u = (cos(el) * cos(az), cos(el) * sin(az), sin(el))
        return TalkerLocatorTests.board.map { p in
            Int((5 - (Double(p.0) * u.0 + Double(p.1) * u.1 + Double(p.2) * u.2) / 343 * Double(rate)).rounded())
        }
    }

    /// The far end plays for 4 s (the canceller learns the speaker's path with the array on mic
    /// 0), pauses for 3 s while a fan hums from another side and the talker's direction turns
    /// the beam (its designs chosen against the fan), then plays alone for 5 s: in its last 3 s
    /// the echo must be cancelled as a learnt path is (46.3 dB), not left where a beam mixing
    /// designs across frequency left it (21.2 dB with 994e84e's chain; the beam held on mic 0,
    /// 37.5 dB).
    func testABeamTurnedToATalkerLeavesTheEchoCancellable() throws {
        let (azimuth, reduction) = try echoReductionAfterTheBeamTurns(to: 120)
        XCTAssertEqual(azimuth, 120, accuracy: 0.01, "the beam turned to the talker in the pause")
        XCTAssertGreaterThan(reduction, 35, "echo removed in the far end's last 3 s with the beam on the talker: \(reduction) dB")
    }

    /// Beam 0 (a talker at 0°) starts from mic 0's learnt path as every other beam does. Its bank
    /// was once counted as used from the start, so turning there brought back empty taps: 25.9 dB
    /// in the same 3 s (41.0 dB now; 10.1 dB in the quarter second from the far end's second second
    /// back, 46.5 now).
    func testTheFirstBeamStartsFromALearntPathToo() throws {
        let (azimuth, reduction) = try echoReductionAfterTheBeamTurns(to: 0)
        XCTAssertEqual(azimuth, 0, accuracy: 0.01, "the beam turned to the talker in the pause")
        XCTAssertGreaterThan(reduction, 35, "echo removed in the far end's last 3 s with the beam on beam 0: \(reduction) dB")
    }

    /// The scene above with the talker at `talker` degrees: where the beam points at the end and
    /// the echo reduction (dB) over the far end's last 3 s.
    private func echoReductionAfterTheBeamTurns(to talker: Float) throws -> (azimuth: Float, reduction: Double) {
        var settings = ProcessingSettings()
        settings.gainControl = false
        settings.noiseSuppress = false
        settings.voiceDetect = false
        settings.dereverberation = .off
        let apm = try AudioProcessor(rate: Self.rate, micChannels: 4, micPositions: TalkerLocatorTests.board,
                                     settings: settings, arrayProcessing: true)
        XCTAssertTrue(apm.arrayProcessing)
        let blocks = 1200, n = blocks * Self.block
        let farActive = { (b: Int) in b < 400 || b >= 700 }
        // Speech-like: noise low-passed twice (~1.5 kHz, as speech's energy falls off; the
        // canceller's linear filter stops at 12 kHz), in syllables.
        var noise = TalkerLocatorTests.Noise(state: 3)
        var lp1: Float = 0, lp2: Float = 0
        let far: [Float] = (0..<n).map { i in
            let t = Double(i) / Double(Self.rate)
            let envelope = Float(max(0.15, sin(2 * Double.pi * 3 * t)))
            lp1 += 0.18 * (noise.next() - lp1)
            lp2 += 0.18 * (lp1 - lp2)
            return farActive(i / Self.block) ? 0.4 * envelope * lp2 : 0
        }
        // The speaker's sound: the direct path and three reflections, each a plane wave.
        let paths: [(delay: Int, gain: Float, azimuth: Double)] = [(48, 1, 0), (300, 0.4, 100), (700, 0.25, 220), (1500, 0.12, 300)]
        var mics = [[Float]](repeating: [Float](repeating: 0, count: n), count: 4)
        for path in paths {
            let d = Self.micDelays(azimuth: path.azimuth)
            for m in 0..<4 { for i in (path.delay + d[m])..<n { mics[m][i] += path.gain * far[i - path.delay - d[m]] } }
        }
        // The fan, from 250°, during the pause; every mic's own noise throughout.
        var fan = TalkerLocatorTests.Noise(state: 11)
        let fanDelays = Self.micDelays(azimuth: 250)
        let fanSource = (0..<n).map { i in (400..<700).contains(i / Self.block) ? 0.03 * fan.next() : 0 }
        var own = TalkerLocatorTests.Noise(state: 5)
        for m in 0..<4 {
            for i in fanDelays[m]..<n { mics[m][i] += fanSource[i - fanDelays[m]] }
            for i in 0..<n { mics[m][i] += 1e-4 * own.next() }
        }

        // As the engine steers after each block: the talker's direction known from block 420.
        let out = apm.processOffline(mics: mics, far: far, block: Self.block) { b in
            let active = farActive(b)
            apm.steer(azimuthDegrees: talker, hasDirection: b >= 420, echoAlone: active, farEndActive: active)
        }
        let from = 900 * Self.block
        let micPower = ArrayChainTests.power(mics[0], from: from), outPower = ArrayChainTests.power(out, from: from)
        return (apm.beamAzimuthDegrees ?? .nan, ArrayChainTests.dB(micPower, over: outPower))
    }
}
