import Foundation
import RoomAudio
import RoomCaptureChain
import RoomOpus
import RoomSettings
import XCTest

/// Switching the audio profile on a running engine (real ALSA on the simulated card).
final class AudioProfileTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(SimCard.prepared, "run `swift build` first")
    }

    /// The sim board in loopback, in a room with nothing but white noise at the mics.
    private func startLoopbackEngine(_ name: String, noiseDBFS: Int) throws -> AudioEngine {
        let dir = SimCard.scratch(name)
        SimCard.useRoom(dir, ["input": "none", "echo": "off", "noise_dbfs": "\(noiseDBFS)"])
        var config = SimCard.simBoardConfiguration()
        config.loopback = true
        let engine = try AudioEngine(configuration: config)
        try engine.start()
        return engine
    }

    private func waitApplied(_ engine: AudioEngine, _ profile: AudioProfile) {
        let deadline = Date().addingTimeInterval(2)
        while engine.stats.appliedProfile != profile && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        XCTAssertEqual(engine.stats.appliedProfile, profile)
    }

    /// A quiet room: speech sends (almost) nothing — DTX and the voice gate — while music keeps
    /// sending every frame at a higher bitrate, because a quiet passage of music is not silence.
    func testMusicSendsQuietPassagesAndSpeechDoesNot() throws {
        let engine = try startLoopbackEngine("profile", noiseDBFS: -60)
        defer { engine.stop() }
        waitApplied(engine, .speech)
        Thread.sleep(forTimeInterval: 1.0)
        let s0 = engine.stats.snapshot()
        Thread.sleep(forTimeInterval: 1.5)
        let s1 = engine.stats.snapshot()
        engine.control.setProfile(.music)
        waitApplied(engine, .music)
        Thread.sleep(forTimeInterval: 0.3)
        let m0 = engine.stats.snapshot()
        Thread.sleep(forTimeInterval: 1.5)
        let m1 = engine.stats.snapshot()

        let speechEncoded = s1.packetsEncoded - s0.packetsEncoded
        let speechSuppressed = s1.packetsSuppressedByDTX - s0.packetsSuppressedByDTX
        XCTAssertGreaterThan(speechEncoded, 100)
        XCTAssertGreaterThan(Double(speechSuppressed), 0.9 * Double(speechEncoded), "speech: silence is not sent")
        let musicEncoded = m1.packetsEncoded - m0.packetsEncoded
        let musicSuppressed = m1.packetsSuppressedByDTX - m0.packetsSuppressedByDTX
        XCTAssertGreaterThan(musicEncoded, 100)
        XCTAssertEqual(musicSuppressed, 0, "music: every frame is sent")

        // And back: speech suppresses silence again.
        engine.control.setProfile(.speech)
        waitApplied(engine, .speech)
        Thread.sleep(forTimeInterval: 0.5)
        let b0 = engine.stats.snapshot()
        Thread.sleep(forTimeInterval: 1.0)
        let b1 = engine.stats.snapshot()
        XCTAssertGreaterThan(Double(b1.packetsSuppressedByDTX - b0.packetsSuppressedByDTX), 0.9 * Double(b1.packetsEncoded - b0.packetsEncoded))
    }

    /// Loud wide-band noise (hard to code, so VBR spends the whole budget): music frames carry
    /// about 128 kbps (160 bytes per 10 ms), more than speech's 96 kbps (120 bytes) can.
    func testMusicRunsAtTheHigherBitrate() throws {
        let engine = try startLoopbackEngine("profile-bitrate", noiseDBFS: -25)
        defer { engine.stop() }
        func bytesPerSentPacket(seconds: Double) -> Double {
            let a = engine.stats.snapshot()
            Thread.sleep(forTimeInterval: seconds)
            let b = engine.stats.snapshot()
            let sent = (b.packetsEncoded - b.packetsSuppressedByDTX) - (a.packetsEncoded - a.packetsSuppressedByDTX)
            return Double(b.encodedBytes - a.encodedBytes) / Double(max(1, sent))
        }
        waitApplied(engine, .speech)
        Thread.sleep(forTimeInterval: 0.5)
        let speech = bytesPerSentPacket(seconds: 2)
        engine.control.setProfile(.music)
        waitApplied(engine, .music)
        Thread.sleep(forTimeInterval: 0.3)
        let music = bytesPerSentPacket(seconds: 2)
        print("bytes per frame: music \(music), speech \(speech)")
        XCTAssertGreaterThan(music, 140, "music at 128 kbps: \(music) B/frame (speech \(speech))")
        XCTAssertLessThan(speech, 125, "speech at 96 kbps: \(speech) B/frame")
    }

    func testProfileSettingsKeepFeaturesTheBoardSwitchedOff() {
        var processing = ProcessingSettings()
        processing.noiseSuppress = false
        let speech = AudioProfileSettings(.speech, processing: processing, opus: OpusSettings())
        XCTAssertFalse(speech.noiseSuppression, "--disable ns holds in the speech profile")
        XCTAssertTrue(speech.gainControl)
        XCTAssertTrue(speech.voiceGate)
        var noVAD = ProcessingSettings()
        noVAD.voiceDetect = false
        XCTAssertFalse(AudioProfileSettings(.speech, processing: noVAD, opus: OpusSettings()).voiceGate,
                       "--disable vad: no voice to gate on, so the gate is off (it would hold back every frame)")
        let music = AudioProfileSettings(.music, processing: ProcessingSettings(), opus: OpusSettings())
        XCTAssertFalse(music.noiseSuppression)
        XCTAssertFalse(music.gainControl)
        XCTAssertFalse(music.encoder.dtx)
        XCTAssertTrue(music.fullBand)
        XCTAssertGreaterThanOrEqual(music.encoder.bitrate, 128000)
    }
}
