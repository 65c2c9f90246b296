import Foundation
import Glibc
import RoomDSP
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

    /// B records while A speaks: B's recording holds A's speech (envelope correlation, the delay
    /// where the events say it must be, the level), and B's event log shows A joining, talking,
    /// muting and unmuting, leaving and coming back — what a test of the appliance asserts about
    /// browsers.
    func testBrowserHearsAnotherBrowsersSpeechAndSeesItJoinMuteAndLeave() throws {
        let room = try room("JanusBrowserTests-speech")
        let speechPath = room.dir + "/speech.wav"
        let reference = try SpeechMatch.sentence(speechPath)
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

        // A speaks: the fake microphone plays the file once, from when A's PeerConnection is up.
        let a = try browser("A", BrowserPeer.Options(microphone: speechPath), in: room)
        let seenByB = b.sees("A", timeout: 15)
        XCTAssertNotNil(seenByB, "B sees A join\n\(b.diagnostics)\n\(a.diagnostics)")
        XCTAssertEqual(seenByB?.muted, false, "A joined unmuted")
        let microphone = try XCTUnwrap(a.wait(status: "microphone", timeout: 15), "A's microphone opens\n\(a.diagnostics)")
        XCTAssertNotNil(a.sees("B", timeout: 1), "A sees B in the room\n\(a.diagnostics)")

        // The file, then a second for the jitter buffers and the mix, then B's recording.
        Thread.sleep(forTimeInterval: speechSeconds + 1.0)
        b.send("upload")
        let wav = try XCTUnwrap(try b.recording(timeout: 5), "B uploads its recording\n\(b.diagnostics)")
        XCTAssertEqual(wav.sampleRate, 48000)
        XCTAssertEqual(wav.channels, 1)
        let recorded = wav.samples.map { Float($0) / 32768 }
        try? Data(WAVFile.encode(wav)).write(to: URL(fileURLWithPath: room.dir + "/B-recording.wav"))

        // Where A's speech is in B's recording, and where it must be: A's microphone opened
        // (wall clock, same machine) this long after B's recording started; the file arrives
        // after that by the path's latency (capture, Opus, Janus's jitter buffer and mix, B's
        // jitter buffer).
        let found = try XCTUnwrap(SpeechMatch.locate(reference, in: recorded),
                                  "B recorded \(recorded.count) samples, less than the speech")
        let micOpenedMs = microphone.wall - recordingStart.wall
        let latencyMs = found.offset * 1000 - micOpenedMs
        print("JanusBrowserTests: envelope correlation \(String(format: "%.3f", found.correlation)) at "
              + "\(Int(found.offset * 1000)) ms into B's recording (A's microphone opened at \(Int(micOpenedMs)) ms; "
              + "latency \(Int(latencyMs)) ms), level \(String(format: "%+.1f", found.levelChangeDB)) dB; "
              + "recording \(room.dir)/B-recording.wav")
        // Measured 0.957-0.983 over 12 runs on a loaded 2-core VM (load average 3-5); a stream
        // that lost or shifted a second of the sentence gave 0.71-0.84 (runs without the
        // lead-in, docs/janus.md); a recording without A's speech correlates near 0.
        XCTAssertGreaterThanOrEqual(found.correlation, 0.85, "B's recording holds A's speech (envelope correlation)")
        // Measured 195-262 ms over 12 runs.
        XCTAssertGreaterThanOrEqual(latencyMs, 0, "the speech cannot arrive before A's microphone opened")
        XCTAssertLessThanOrEqual(latencyMs, 1000, "mouth-to-ear through Janus on one machine")
        XCTAssertLessThan(abs(found.levelChangeDB), 6, "Janus passes A's speech at its level (no gain in the room's config)")
        // Before A's microphone opened B was alone, and Janus sends each participant the mix
        // without itself: silence (measured below −100 dBFS).
        let alone = recorded.prefix(max(0, Int(micOpenedMs / 1000 * 48000)))
        let aloneDBFS = 10 * log10(alone.reduce(0) { $0 + Double($1) * Double($1) } / Double(max(alone.count, 1)) + 1e-20)
        print("JanusBrowserTests: B alone in the room: \(String(format: "%.1f", aloneDBFS)) dBFS over \(alone.count) samples")
        XCTAssertGreaterThan(alone.count, 4800, "B recorded before A spoke")
        XCTAssertLessThan(aloneDBFS, -60, "B alone in the room hears nothing")

        // Janus's talking detection saw A speak, and B was told.
        XCTAssertNotNil(b.seesTalking("A", timeout: 0), "B sees A talking\n\(b.diagnostics)")

        // Mute and unmute: B sees A's `muted` change.
        var mark = b.mark
        a.send("mute")
        XCTAssertNotNil(b.sees("A", muted: true, timeout: 5, after: mark), "B sees A muted\n\(b.diagnostics)\n\(a.diagnostics)")
        mark = b.mark
        a.send("unmute")
        XCTAssertNotNil(b.sees("A", muted: false, timeout: 5, after: mark), "B sees A unmuted\n\(b.diagnostics)")

        // A leaves: B sees who left.
        mark = b.mark
        a.send("leave")
        XCTAssertNotNil(b.seesLeave("A", timeout: 5, after: mark), "B sees A leave\n\(b.diagnostics)\n\(a.diagnostics)")
        XCTAssertNotNil(a.wait(status: "left", timeout: 5), "A left cleanly (leave, detach, destroy)\n\(a.diagnostics)")

        // A comes back: a new session and PeerConnection; B sees A again.
        mark = b.mark
        a.send("join")
        XCTAssertNotNil(b.sees("A", timeout: 10, after: mark), "B sees A come back\n\(b.diagnostics)\n\(a.diagnostics)")
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
        XCTAssertNotNil(b.sees("A", timeout: 15), "B sees A\n\(b.diagnostics)")
        XCTAssertNotNil(a.wait(status: "pc-connected", timeout: 10), "A's PeerConnection is up\n\(a.diagnostics)")

        let markA = a.mark, markB = b.mark
        let restarted = Date()
        try room.janus.restart(crash: true)
        XCTAssertNotNil(b.wait(status: "ws-closed", timeout: 5, after: markB), "B sees Janus go\n\(b.diagnostics)")
        for peer in [a, b] {
            XCTAssertNotNil(peer.wait(timeout: 15, after: peer === a ? markA : markB) { $0.type == "joined" },
                            "\(peer.name) joins the restarted Janus\n\(peer.diagnostics)\nJanus log:\n\(room.janus.log.suffix(1500))")
        }
        XCTAssertNotNil(b.sees("A", timeout: 10, after: markB),
                        "after the restart B sees A in the room again\n\(a.diagnostics)\n\(b.diagnostics)")
        XCTAssertNotNil(a.wait(status: "pc-connected", timeout: 10, after: markA), "A's new PeerConnection is up\n\(a.diagnostics)")
        print("JanusBrowserTests: both browsers back in room 1234 \(String(format: "%.1f", Date().timeIntervalSince(restarted))) s after Janus was killed and restarted")
    }
}
