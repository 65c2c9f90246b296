import Foundation
import Glibc
import RoomDSP
import XCTest

/// Issue 12's end-to-end acceptance: real roomd appliances (`room.backend = janus`), a real
/// Janus (Debian's 1.1.2) and headless Chromium browsers (scripts/janus-page) in one AudioBridge
/// room. Audio both ways with real speech — the browser records the appliance's talker, and the
/// appliance's speaker plays the browser's file; the browser sees the appliance join, talk,
/// mute and unmute, step down, raise its hand and lower it; both rejoin a restarted Janus; the
/// browser sees the appliance leave. Skipped (with the reason) without janus, chromium,
/// espeak-ng or sox; scripts/setup installs them for the suite.
final class JanusApplianceBrowserTests: ProcessTestCase {
    private var janus: JanusFixture?
    private var server: BrowserPageServer?
    private var browsers: [BrowserPeer] = []
    private var roomctl = ""

    override func tearDown() {
        for b in browsers { b.stop() }
        browsers = []
        server?.stop()
        janus?.remove()
        super.tearDown()
    }

    private func json(_ socket: String, _ command: [String]) -> [String: Any] {
        guard let r = try? runSeparated(roomctl, ["--socket", socket, "--json"] + command) else { return [:] }
        let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any]
        return (object?["result"] as? [String: Any]) ?? object ?? [:]
    }

    func testApplianceAndBrowserHearEachOtherAndTheBrowserSeesTheApplianceStates() throws {
        let roomd = try executable("roomd")
        roomctl = try executable("roomctl")
        let dir = SimCard.scratch("janus-appliance-browser")
        let janus = try JanusFixture(directory: dir + "/janus")
        self.janus = janus
        try janus.start()
        let server = try BrowserPageServer()
        self.server = server
        let reference = try SpeechMatch.sentence(dir + "/speech.wav")
        func appliance(_ name: String, room: String, _ extra: [String]) throws -> Process {
            try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--backend", "janus", "--janus-room", "\(JanusFixture.room)",
                               "--server", "127.0.0.1:\(janus.port)", "--plaintext-signalling", "--duration", "90",
                               "--stats-interval", "0", "--config", "none", "--state-dir", "none",
                               "--control-socket", dir + "/\(name).sock"] + extra,
                       env: ["ROOMSIM_CONFIG": room], log: dir + "/\(name).log")
        }
        func log(_ name: String) -> String { ((try? String(contentsOfFile: dir + "/\(name).log", encoding: .utf8)) ?? "").suffix(1500).description }

        // Appliance → browser: A talks the sentence (looped); browser B records the room's mix.
        let b = try BrowserPeer(name: "B", server: server, janus: janus.url, options: .init(recordSeconds: 60), directory: dir)
        browsers.append(b)
        XCTAssertNotNil(b.wait(timeout: 15) { $0.type == "joined" }, b.diagnostics)
        let talkerRoom = try E2E.writeRoom(dir, "a", input: dir + "/speech.wav", inputEnd: "loop", extra: ["echo_gain_db = -30", "noise_dbfs = -70"])
        _ = try appliance("a", room: talkerRoom, ["--role", "streamer", "--display-name", "Room 4.12"])
        let a = dir + "/a.sock"
        waitForSocket(a)
        XCTAssertNotNil(b.sees("Room 4.12", muted: false, timeout: 15), "B sees the appliance join, on stage\n\(b.diagnostics)\n\(log("a"))")
        XCTAssertNotNil(b.seesTalking("Room 4.12", timeout: 10), "Janus detects the appliance talking\n\(b.diagnostics)")
        // Two passes of the sentence (it loops at the appliance's mic), then the recording.
        Thread.sleep(forTimeInterval: 2 * Double(reference.count) / 48000 + 1)
        b.send("upload")
        let wav = try XCTUnwrap(try b.recording(timeout: 5), b.diagnostics)
        try? Data(WAVFile.encode(wav)).write(to: URL(fileURLWithPath: dir + "/B-recording.wav"))
        let found = SpeechMatch.locate(reference, in: wav.samples.map { Float($0) / 32768 })
        print("JanusApplianceBrowserTests: appliance -> browser \(String(describing: found))")
        XCTAssertGreaterThan(found?.correlation ?? 0, 0.85,
                             "the browser's recording holds the appliance's sentence (\(String(describing: found))); \(dir)/B-recording.wav")

        // The appliance's states as the browser sees them.
        var mark = b.mark
        _ = json(a, ["mute"])
        XCTAssertNotNil(b.sees("Room 4.12", muted: true, timeout: 5, after: mark), "mute seen\n\(b.diagnostics)")
        mark = b.mark
        _ = json(a, ["unmute"])
        XCTAssertNotNil(b.sees("Room 4.12", muted: false, timeout: 5, after: mark), "unmute seen\n\(b.diagnostics)")
        mark = b.mark
        _ = json(a, ["step_down"])
        XCTAssertNotNil(b.sees("Room 4.12", muted: true, timeout: 5, after: mark), "stepping down seen as muted\n\(b.diagnostics)")
        mark = b.mark
        _ = json(a, ["raise_hand"])
        XCTAssertNotNil(b.sees("Room 4.12 (hand raised)", timeout: 5, after: mark), "the raised hand seen in the name\n\(b.diagnostics)")
        mark = b.mark
        _ = json(a, ["lower_hand"])
        XCTAssertNotNil(b.sees("Room 4.12", timeout: 5, after: mark), "the hand lowered\n\(b.diagnostics)")

        // Janus restarts: the appliance and the browser both come back, and see each other.
        mark = b.mark
        try janus.restart()
        XCTAssertNotNil(b.sees("Room 4.12", timeout: 20, after: mark), "B sees the appliance after the restart\n\(b.diagnostics)\n\(log("a"))")
        XCTAssertEqual(json(a, ["status"])["connection"] as? String, "connected")

        // The appliance leaves; the browser sees it go.
        mark = b.mark
        _ = json(a, ["leave"])
        XCTAssertNotNil(b.seesLeave("Room 4.12", timeout: 5, after: mark), "leave seen\n\(b.diagnostics)")

        // Browser → appliance: browser C says the sentence once; appliance L (audience)
        // records its speaker.
        let listenerRoom = try E2E.writeRoom(dir, "l", extra: ["echo_gain_db = -30", "noise_dbfs = -70"])
        let l = try appliance("l", room: listenerRoom, ["--role", "audience", "--display-name", "Listener L"])
        waitForSocket(dir + "/l.sock")
        XCTAssertNotNil(b.sees("Listener L", muted: true, timeout: 15), "an audience appliance is muted in the room\n\(b.diagnostics)")
        let c = try BrowserPeer(name: "C", server: server, janus: janus.url, options: .init(microphone: dir + "/speech.wav"), directory: dir)
        browsers.append(c)
        XCTAssertNotNil(c.wait(status: "microphone", timeout: 15), c.diagnostics)
        Thread.sleep(forTimeInterval: Double(reference.count) / 48000 + 1.5)
        l.terminate()
        l.waitUntilExit()
        let speaker = try SimCard.readWAV(dir + "/l-speaker.wav")
        let mono: [Float] = speaker.channels == 1 ? speaker.samples.map { Float($0) / 32768 }
            : stride(from: 0, to: speaker.samples.count, by: speaker.channels).map { Float(speaker.samples[$0]) / 32768 }
        let heard = SpeechMatch.locate(reference, in: mono)
        print("JanusApplianceBrowserTests: browser -> appliance \(String(describing: heard))")
        XCTAssertGreaterThan(heard?.correlation ?? 0, 0.85,
                             "the appliance's speaker plays the browser's sentence (\(String(describing: heard))); \(dir)/l-speaker.wav")
    }
}
