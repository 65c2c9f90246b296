import Foundation
import Glibc
import RoomCore
import XCTest

/// Browsers in a real Janus AudioBridge room (issue 12: "a browser in the same room, tested for
/// real"): headless Chromium on scripts/janus-page, Janus from `JanusFixture`. These prove the
/// fixture the appliance's end-to-end tests stand on — the page joins, sends its microphone,
/// records the room, and reports what the AudioBridge tells it — with two browsers and no
/// appliance. Skipped when janus, chromium, espeak-ng or sox is missing (scripts/setup installs
/// all four).
final class JanusBrowserTests: ProcessTestCase {
    var janus: JanusFixture?
    var server: BrowserPageServer?
    var browsers: [BrowserPeer] = []

    override func tearDown() {
        // Browsers first: a browser whose Janus vanished would start rejoining.
        for b in browsers { b.stop() }
        browsers = []
        server?.stop()
        server = nil
        janus?.stop()
        janus = nil
        super.tearDown()
    }

    /// Janus, the page server and a scratch directory for one test.
    private func room(_ test: String) throws -> (dir: String, janus: JanusFixture, server: BrowserPageServer) {
        let dir = SimCard.scratch(test)
        let janus = try JanusFixture(directory: dir + "/janus")
        self.janus = janus
        try janus.start()
        let server = try BrowserPageServer()
        self.server = server
        return (dir, janus, server)
    }

    private func browser(_ name: String, _ options: BrowserPeer.Options, in room: (dir: String, janus: JanusFixture, server: BrowserPageServer))
        throws -> BrowserPeer {
        let b = try BrowserPeer(name: name, server: room.server, janus: room.janus.url, options: options, directory: room.dir)
        browsers.append(b)
        return b
    }

    /// An English sentence from espeak-ng (8.3 s), at 48 kHz mono 16-bit normalized to −3 dBFS
    /// the way scripts/lib.sh `make_speech` makes the demos' and benches' speech. Real speech
    /// rather than a synthetic signal, so PESQ can be measured on the recording by hand.
    private func speech(_ dir: String) throws -> (path: String, samples: [Float]) {
        for tool in ["/usr/bin/espeak-ng", "/usr/bin/sox"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed; scripts/setup installs it")
        }
        let raw = dir + "/speech-22k.wav", path = dir + "/speech.wav"
        let text = "Good morning everyone, thanks for joining. Today we review the release schedule "
            + "and the results of the field trial in Berlin."
        var r = try run("/usr/bin/espeak-ng", ["-v", "en-us", "-s", "150", "-w", raw, text])
        XCTAssertEqual(r.status, 0, r.out)
        // 1 s of silence first: the microphone opens when A's PeerConnection is up, and the
        // jitter buffers on the way (Janus's per participant, B's) settle in the first second
        // of a stream — measured: without the lead-in the first 1-2 s of the sentence arrived
        // up to 200 ms early or with a gap on some runs.
        r = try run("/usr/bin/sox", [raw, "-r", "48000", "-c", "1", "-b", "16", path, "norm", "-3", "pad", "1", "0"])
        XCTAssertEqual(r.status, 0, r.out)
        let wav = try SimCard.readWAV(path)
        return (path, wav.samples.map { Float($0) / 32768 })
    }

    /// B records while A speaks: B's recording holds A's speech (envelope correlation, the delay
    /// where the events say it must be, the level), and B's event log shows A joining, talking,
    /// muting and unmuting, and leaving — what a test of the appliance asserts about browsers.
    func testBrowserHearsAnotherBrowsersSpeechAndSeesItJoinMuteAndLeave() throws {
        let room = try room("JanusBrowserTests-speech")
        let (speechPath, reference) = try speech(room.dir)
        let speechSeconds = Double(reference.count) / 48000

        // B listens only, recording Janus's mix from its page load (up to 40 s; the test
        // asks for the upload once A's speech is over).
        let b = try browser("B", BrowserPeer.Options(recordSeconds: 40), in: room)
        let bJoined = b.wait(timeout: 15) { $0.type == "joined" }
        let bRecording = b.wait(status: "recording", timeout: 1)
        XCTAssertNotNil(bJoined, "B joins room 1234\n\(b.diagnostics)\nJanus log:\n\(room.janus.log.suffix(1500))")
        let recordingStart = try XCTUnwrap(bRecording, "B's recorder runs\n\(b.diagnostics)")
        XCTAssertNotNil(b.wait(status: "pc-connected", timeout: 10), "B's PeerConnection with Janus is up\n\(b.diagnostics)")
        // Chrome offered real host addresses, not mDNS names (Janus ignores those).
        XCTAssertTrue(b.events.contains { $0.type == "candidate" && $0.candidate?.contains(room.janus.interface.address) == true },
                      "B's host candidate on \(room.janus.interface.address)\n\(b.diagnostics)")
        XCTAssertFalse(b.events.contains { $0.candidate?.contains(".local") == true }, "no mDNS candidates\n\(b.diagnostics)")

        // A speaks: the fake microphone plays the sentence once, from when A's PeerConnection is up.
        let a = try browser("A", BrowserPeer.Options(microphone: speechPath), in: room)
        let seenByB = b.wait(timeout: 15) { $0.type == "participant" && $0.display == "A" }
        XCTAssertNotNil(seenByB, "B sees A join\n\(b.diagnostics)\n\(a.diagnostics)")
        XCTAssertEqual(seenByB?.muted, false, "A joined unmuted")
        let microphone = try XCTUnwrap(a.wait(status: "microphone", timeout: 15), "A's microphone opens\n\(a.diagnostics)")
        XCTAssertTrue(a.events.contains { $0.type == "participant" && $0.display == "B" }, "A sees B in the room\n\(a.diagnostics)")

        // The sentence, then a second for the jitter buffer and the mix, then B's recording.
        Thread.sleep(forTimeInterval: speechSeconds + 1.0)
        b.send("upload")
        let wav = try XCTUnwrap(try b.recording(timeout: 5), "B uploads its recording\n\(b.diagnostics)")
        XCTAssertEqual(wav.sampleRate, 48000)
        XCTAssertEqual(wav.channels, 1)
        let recorded = wav.samples.map { Float($0) / 32768 }
        try? Data(WAVFile.encode(wav)).write(to: URL(fileURLWithPath: room.dir + "/B-recording.wav"))

        // Where A's speech is in B's recording: 10 ms log-energy envelopes, best lag.
        let refEnvelope = E2E.envelope(reference), recEnvelope = E2E.envelope(recorded)
        let maxLag = recEnvelope.count - refEnvelope.count
        XCTAssertGreaterThan(maxLag, 0, "B recorded \(recorded.count) samples, less than the speech")
        guard maxLag > 0 else { return }
        let (corr, lag) = E2E.bestCorrelation(refEnvelope, recEnvelope, maxLag: maxLag)
        // Where it must be: A's microphone opened (wall clock, same machine) this long after
        // B's recording started; the speech arrives after that by the path's latency
        // (capture, Opus, Janus's jitter buffer and mix, B's jitter buffer).
        let expectedLag = (microphone.wall - recordingStart.wall) / 10
        let latencyMs = Double(lag) * 10 - (microphone.wall - recordingStart.wall)
        let start = lag * 480, aligned = Array(recorded[start ..< min(recorded.count, start + reference.count)])
        func dBFS(_ x: [Float]) -> Double { 10 * log10(x.reduce(0) { $0 + Double($1 * $1) } / Double(max(x.count, 1)) + 1e-20) }
        let levelChange = dBFS(aligned) - dBFS(reference)
        print("JanusBrowserTests: envelope correlation \(String(format: "%.3f", corr)) at \(lag * 10) ms into B's recording "
              + "(A's microphone opened at \(Int(expectedLag * 10)) ms; latency \(Int(latencyMs)) ms), "
              + "level \(String(format: "%+.1f", levelChange)) dB; recording \(room.dir)/B-recording.wav")
        // Measured 0.957-0.983 over 6 runs on a loaded 2-core VM (load average 4); a stream
        // that loses or shifts a second of the sentence gave 0.71-0.80 (runs without the
        // lead-in, above); a recording without A's speech correlates near 0.
        XCTAssertGreaterThanOrEqual(corr, 0.85, "B's recording holds A's speech (envelope correlation)")
        XCTAssertGreaterThanOrEqual(latencyMs, 0, "the speech cannot arrive before A's microphone opened")
        XCTAssertLessThanOrEqual(latencyMs, 1000, "mouth-to-ear through Janus on one machine")
        XCTAssertLessThan(abs(levelChange), 6, "Janus passes A's speech at its level (no gain in the room's config)")

        // Janus's talking detection saw A speak, and B was told.
        XCTAssertTrue(b.events.contains { $0.type == "talking" && $0.display == "A" && $0.talking == true },
                      "B sees A talking\n\(b.diagnostics)")

        // Mute and unmute: B sees A's `muted` change.
        var mark = b.events.count
        a.send("mute")
        XCTAssertNotNil(b.wait(timeout: 5, after: mark) { $0.type == "participant" && $0.display == "A" && $0.muted == true },
                        "B sees A muted\n\(b.diagnostics)\n\(a.diagnostics)")
        mark = b.events.count
        a.send("unmute")
        XCTAssertNotNil(b.wait(timeout: 5, after: mark) { $0.type == "participant" && $0.display == "A" && $0.muted == false },
                        "B sees A unmuted\n\(b.diagnostics)")

        // A leaves: B sees who left.
        mark = b.events.count
        a.send("leave")
        XCTAssertNotNil(b.wait(timeout: 5, after: mark) { $0.type == "leaving" && $0.display == "A" },
                        "B sees A leave\n\(b.diagnostics)\n\(a.diagnostics)")
        XCTAssertNotNil(a.wait(status: "left", timeout: 5), "A left cleanly (leave, detach, destroy)\n\(a.diagnostics)")
        for peer in [a, b] {
            XCTAssertFalse(peer.events.contains { $0.type == "error" }, "no errors on \(peer.name)'s page\n\(peer.diagnostics)")
        }
    }

    /// Janus restarted on the same port (killed, as a crash looks): both pages see the
    /// WebSocket close, join the new Janus's room 1234 again on their own, and see each other.
    func testBrowsersJoinAgainAfterJanusRestarts() throws {
        let room = try room("JanusBrowserTests-restart")
        let b = try browser("B", BrowserPeer.Options(), in: room)
        XCTAssertNotNil(b.wait(timeout: 15) { $0.type == "joined" }, "B joins\n\(b.diagnostics)")
        let a = try browser("A", BrowserPeer.Options(), in: room)
        XCTAssertNotNil(b.wait(timeout: 15) { $0.type == "participant" && $0.display == "A" }, "B sees A\n\(b.diagnostics)")
        XCTAssertNotNil(a.wait(status: "pc-connected", timeout: 10), "A's PeerConnection is up\n\(a.diagnostics)")

        let markA = a.events.count, markB = b.events.count
        let restarted = Date()
        try room.janus.restart(crash: true)
        XCTAssertNotNil(b.wait(status: "ws-closed", timeout: 5, after: markB), "B sees Janus go\n\(b.diagnostics)")
        for peer in [a, b] {
            XCTAssertNotNil(peer.wait(timeout: 15, after: peer === a ? markA : markB) { $0.type == "joined" },
                            "\(peer.name) joins the restarted Janus\n\(peer.diagnostics)\nJanus log:\n\(room.janus.log.suffix(1500))")
        }
        XCTAssertNotNil(b.wait(timeout: 10, after: markB) { $0.type == "participant" && $0.display == "A" },
                        "after the restart B sees A in the room again\n\(a.diagnostics)\n\(b.diagnostics)")
        XCTAssertNotNil(a.wait(status: "pc-connected", timeout: 10, after: markA), "A's new PeerConnection is up\n\(a.diagnostics)")
        print("JanusBrowserTests: both browsers back in room 1234 \(String(format: "%.1f", Date().timeIntervalSince(restarted))) s after Janus was killed and restarted")
    }
}
