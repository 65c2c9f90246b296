import Foundation
import XCTest

/// Speech for tests that put a talker into a room and look for it in a listener's recording
/// (browsers or appliances in a Janus room): a real sentence, and where it is in a recording.
enum SpeechMatch {
    /// An English sentence from espeak-ng (8.3 s) at 48 kHz mono 16-bit, normalized to −3 dBFS
    /// the way scripts/lib.sh `make_speech` makes the demos' and benches' speech, after
    /// `leadIn` seconds of silence. Real speech rather than a synthetic signal, so PESQ can be
    /// measured on the recordings by hand. The lead-in lets a new stream settle before the
    /// sentence starts (docs/janus.md, "Browser test": without it, 3 runs of 6 lost or shifted
    /// the first 1-2 s). Skips the test when espeak-ng or sox is missing.
    static func sentence(_ path: String, leadIn: Double = 1) throws -> [Float] {
        for tool in ["/usr/bin/espeak-ng", "/usr/bin/sox"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed; scripts/setup installs it")
        }
        let raw = path + ".espeak.wav"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let text = "Good morning everyone, thanks for joining. Today we review the release schedule "
            + "and the results of the field trial in Berlin."
        try run("/usr/bin/espeak-ng", ["-v", "en-us", "-s", "150", "-w", raw, text])
        try run("/usr/bin/sox", [raw, "-r", "48000", "-c", "1", "-b", "16", path, "norm", "-3", "pad", "\(leadIn)", "0"])
        return try SimCard.readWAV(path).samples.map { Float($0) / 32768 }
    }

    /// Where `reference` is in `recording` (both 48 kHz): the best normalized correlation of
    /// their 10 ms log-energy envelopes (`E2E.envelope`) with the reference wholly inside the
    /// recording, its offset, and the recording's level there relative to the reference's.
    /// Envelopes rather than waveforms: a codec and jitter buffers keep the envelope but not
    /// the phase, and the delay of a WebRTC path changes by tens of ms while it runs.
    static func locate(_ reference: [Float], in recording: [Float]) -> (correlation: Double, offset: Double, levelChangeDB: Double)? {
        let ref = E2E.envelope(reference), rec = E2E.envelope(recording)
        guard rec.count > ref.count else { return nil }
        let (correlation, lag) = E2E.bestCorrelation(ref, rec, maxLag: rec.count - ref.count)
        let start = lag * 480
        let aligned = recording[start ..< min(recording.count, start + reference.count)]
        func power<C: Collection>(_ x: C) -> Double where C.Element == Float {
            x.reduce(0) { $0 + Double($1) * Double($1) } / Double(max(x.count, 1))
        }
        return (correlation, Double(lag) * 0.010, 10 * log10((power(aligned) + 1e-20) / (power(reference) + 1e-20)))
    }

    private static func run(_ exe: String, _ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw BrowserError.tool("\(exe) exited with \(p.terminationStatus): \(text)")
        }
    }
}
