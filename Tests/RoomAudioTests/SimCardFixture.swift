import Foundation
import RoomAudio
import RoomDSP
import RoomTestSupport
import XCTest

/// Points alsa-lib at the simulated card once per test process and writes per-test room files.
/// alsa-lib reads ALSA_CONFIG_PATH/ALSA_PLUGIN_DIR once, at its first use; ROOMSIM_CONFIG is read
/// by the plugin at every open, so each test gets its own room.
enum SimCard {
    static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    static let buildDirectory: String = {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        // …/.build/<triple>/debug/roomdPackageTests.xctest
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }()

    static let prepared: Bool = {
        setenv("ALSA_PLUGIN_DIR", buildDirectory, 1)
        setenv("ALSA_CONFIG_PATH", "/usr/share/alsa/alsa.conf:\(repoRoot)/board/sim/asound.conf", 1)
        return FileManager.default.fileExists(atPath: buildDirectory + "/libasound_module_pcm_roomsim.so")
    }()

    /// A scratch directory for one test.
    static func scratch(_ name: String) -> String {
        let dir = TestScratch.directory("roomd-tests") + "/\(name)"
        try? FileManager.default.removeItem(atPath: dir)
        try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A copy of board/sim in `dir`/board with `audioKeys` added to its `[audio]` section (a key
    /// the profile already sets is replaced): for a test whose subject is not the board's own
    /// timing, e.g. one that runs several daemons on one machine and needs more room for a
    /// preempted audio thread than the shipped 5 ms of playback headroom leaves.
    static func simBoard(in dir: String, audioKeys: [String: String]) throws -> String {
        let source = repoRoot + "/board/sim", board = dir + "/board"
        try FileManager.default.createDirectory(atPath: board, withIntermediateDirectories: true)
        for file in ["asound.conf", "room.conf"] {
            try? FileManager.default.removeItem(atPath: board + "/" + file)
            try FileManager.default.copyItem(atPath: source + "/" + file, toPath: board + "/" + file)
        }
        var lines = try String(contentsOfFile: source + "/board.conf", encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeAll { line in audioKeys.keys.contains { line.hasPrefix("\($0) =") || line.hasPrefix("\($0)=") } }
        let audio = try XCTUnwrap(lines.firstIndex(of: "[audio]"), "board/sim/board.conf has no [audio] section")
        lines.insert(contentsOf: audioKeys.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }, at: audio + 1)
        try lines.joined(separator: "\n").write(toFile: board + "/board.conf", atomically: true, encoding: .utf8)
        return board
    }

    /// Writes a room file (the keys of docs/sim-card.md) and selects it for the next opens.
    static func useRoom(_ dir: String, _ settings: [String: String]) {
        var keys: [String: String] = [
            "input": "none", "output": "none", "echo": "on", "echo_delay_ms": "2.0", "echo_gain_db": "-10",
            "ir": "generated", "ir_length_ms": "150", "ir_rt60_ms": "250", "mic_delays": "0 4 9 4",
            "mic_gains": "1.0 0.97 0.94 0.97", "noise_dbfs": "-70",
        ]
        for (k, v) in settings { keys[k] = v }
        let text = keys.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n") + "\n"
        let path = dir + "/room.conf"
        try! text.write(toFile: path, atomically: true, encoding: .utf8)
        setenv("ROOMSIM_CONFIG", path, 1)
    }

    static func simBoardConfiguration() -> EngineConfiguration {
        EngineConfiguration(captureDevice: "roomsim", playbackDevice: "roomsim", rate: 48000, micChannels: 4,
                            playbackChannels: 1,
                            micPositions: [(0.032, 0, 0), (0, 0.032, 0), (-0.032, 0, 0), (0, -0.032, 0)])
    }

    /// Deterministic speech-like signal: a gliding harmonic series under a syllable envelope,
    /// with pauses, so VAD, NS and AGC treat it roughly as they treat a voice.
    static func speechLike(seconds: Double, rate: Int = 48000, seed: Double, level: Float = 0.25) -> [Float] {
        let n = Int(seconds * Double(rate))
        var out = [Float](repeating: 0, count: n)
        var phase = 0.0
        for i in 0..<n {
            let t = Double(i) / Double(rate)
            let f0 = 110 + 40 * sin(2 * .pi * 0.5 * t + seed)
            phase += 2 * .pi * f0 / Double(rate)
            var s = 0.0
            for h in 1...10 { s += sin(Double(h) * phase + seed * Double(h)) / Double(h) }
            let syllable = max(0, sin(2 * .pi * 2.5 * t + seed))
            let pause = sin(2 * .pi * 0.2 * t + seed) > -0.6 ? 1.0 : 0.0
            out[i] = Float(s * syllable * pause) * level * 0.5
        }
        return out
    }

    static func writeWAV(_ path: String, _ samples: [Float], channels: Int = 1, rate: Int = 48000) {
        let ints = samples.map { Int16(clamping: Int(($0 * 32767).rounded())) }
        let bytes = WAVFile.encode(WAVAudio(sampleRate: rate, channels: channels, samples: ints))
        try! Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func readWAV(_ path: String) throws -> WAVAudio {
        try WAVFile.decode(bytes: [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
    }
}

extension AudioEngine {
    /// Runs for `seconds`, collecting every event; returns them in order.
    func run(seconds: Double) throws -> [EngineEvent] {
        try start()
        var events: [EngineEvent] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            while let e = self.events.pop() { events.append(e) }
        }
        stop()
        while let e = self.events.pop() { events.append(e) }
        return events
    }
}
