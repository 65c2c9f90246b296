import RoomCaptureChain
import XCTest

/// The dereverberation's prediction is learnt through the beam in use; when the beam turns (or a
/// self-test ends on mic 0) it no longer fits, so its subtraction drops out and comes back over
/// 1 s (dereverb.h kSettleBlocks; docs/audio-engine.md, "The dereverberation"). Measured, not
/// assumed here: the far-field walking room 0.891 → 0.896 STOI.
final class DereverbSettleTests: XCTestCase {
    private static let rate = 48_000, block = 480

    /// `count` 10 ms blocks of each mic's own quiet noise through the chain.
    private func process(_ apm: AudioProcessor, _ count: Int, noise: inout TalkerLocatorTests.Noise) {
        let mics = (0..<4).map { _ in (0..<(count * Self.block)).map { _ in 1e-3 * noise.next() } }
        _ = apm.processOffline(mics: mics, block: Self.block)
    }

    func testWPEComesBackOverASecondAfterTheBeamTurns() throws {
        let apm = try AudioProcessor(rate: Self.rate, micChannels: 4, micPositions: TalkerLocatorTests.board,
                                     settings: ProcessingSettings(), arrayProcessing: true)
        var noise = TalkerLocatorTests.Noise(state: 17)
        process(apm, 20, noise: &noise)
        XCTAssertEqual(apm.dereverberationSettled, 1, "nothing turned yet")
        apm.steer(azimuthDegrees: 0, hasDirection: true)
        process(apm, 50, noise: &noise)
        let half = try XCTUnwrap(apm.dereverberationSettled)
        XCTAssertEqual(half, 0.5, accuracy: 0.02, "halfway back 0.5 s after the beam was taken up")
        apm.steer(azimuthDegrees: 2, hasDirection: true)   // the same beam: nothing turned
        process(apm, 1, noise: &noise)
        XCTAssertGreaterThan(try XCTUnwrap(apm.dereverberationSettled), half)
        process(apm, 60, noise: &noise)
        XCTAssertEqual(apm.dereverberationSettled, 1, "all of it after 1 s")
        apm.steer(azimuthDegrees: 120, hasDirection: true)
        process(apm, 10, noise: &noise)
        XCTAssertEqual(try XCTUnwrap(apm.dereverberationSettled), 0.1, accuracy: 0.02, "dropped when the beam turned")
        process(apm, 100, noise: &noise)
        apm.holdForSelfTest(true)
        process(apm, 10, noise: &noise)
        apm.holdForSelfTest(false)
        process(apm, 10, noise: &noise)
        XCTAssertEqual(try XCTUnwrap(apm.dereverberationSettled), 0.1, accuracy: 0.02, "dropped when a self-test left the chain on mic 0")

        var off = ProcessingSettings()
        off.dereverberation = .off
        let without = try AudioProcessor(rate: Self.rate, micChannels: 4, micPositions: TalkerLocatorTests.board,
                                         settings: off, arrayProcessing: true)
        XCTAssertNil(without.dereverberationSettled)
    }
}
