import Foundation
import Glibc
import RoomDSP
import XCTest

/// A headless Chromium in a Janus AudioBridge room: scripts/janus-page served by a
/// `BrowserPageServer`, a fresh profile, and Chromium's fake microphone playing a WAV file.
/// The browser users an appliance shares a room with, for end-to-end tests (issue 12).
///
/// Chromium runs in a process group of its own (Foundation's `Process` starts every child as
/// the leader of a new group), so `stop` ends the browser with its renderer, GPU and utility
/// processes by signalling that group — only processes this fixture started.
final class BrowserPeer {
    /// Chromium's own binary: Debian's /usr/bin/chromium is a shell wrapper that adds flags
    /// (extensions, Google API keys) and then execs this.
    static let executable: String? = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    let name: String
    let server: BrowserPageServer
    let profile: String
    let logPath: String
    private(set) var process: Process?

    struct Options {
        /// Display name in the room (the peer's name when nil).
        var display: String?
        /// A WAV file the fake microphone plays once (`%noloop`: looping would put the speech
        /// into the recording several times); nil: receive only.
        var microphone: String?
        /// Seconds of the room's mix to record from page load, then upload; 0: no recording.
        /// The `upload` command uploads what was recorded so far.
        var recordSeconds: Double = 0
        var joinMuted = false
        /// Join again when Janus's WebSocket closes (a restarted Janus).
        var rejoin = true
        var room = JanusFixture.room
    }

    /// Starts Chromium on the page. Skips the test when Chromium is not installed.
    init(name: String, server: BrowserPageServer, janus: String, options: Options, directory: String) throws {
        guard let exe = Self.executable else {
            throw XCTSkip("chromium is not installed; scripts/setup installs it")
        }
        self.name = name
        self.server = server
        profile = directory + "/chromium-\(name)"
        logPath = directory + "/chromium-\(name).log"
        try? FileManager.default.removeItem(atPath: profile)
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)

        var query = URLComponents()
        query.queryItems = [
            URLQueryItem(name: "janus", value: janus),
            URLQueryItem(name: "room", value: "\(options.room)"),
            URLQueryItem(name: "display", value: options.display ?? name),
            URLQueryItem(name: "peer", value: name),
            URLQueryItem(name: "send", value: options.microphone == nil ? "0" : "1"),
            URLQueryItem(name: "muted", value: options.joinMuted ? "1" : "0"),
            URLQueryItem(name: "record", value: "\(options.recordSeconds)"),
            URLQueryItem(name: "rejoin", value: options.rejoin ? "1" : "0"),
        ]
        let url = server.origin + "/index.html?" + (query.percentEncodedQuery ?? "")

        var arguments = [
            "--headless=new",
            "--no-sandbox", // as root, Chromium refuses to start with its sandbox
            // Footprint on a 2-core machine: no GPU process work, no audio out, nothing
            // fetched or synchronised in the background, no first-run work.
            "--disable-gpu", "--mute-audio", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--disable-dev-shm-usage", "--disable-breakpad",
            // A page nobody looks at keeps its timers and its audio running.
            "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
            "--disable-backgrounding-occluded-windows", "--autoplay-policy=no-user-gesture-required",
            // getUserMedia granted without a prompt, from the fake device.
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            // Real host candidates: Janus ignores mDNS (.local) ones (ignore_mdns = true).
            "--disable-features=WebRtcHideLocalIpsWithMdns",
            "--user-data-dir=" + profile,
            // The page's console and Chromium's errors in the log.
            "--enable-logging=stderr", "--v=0",
        ]
        if let microphone = options.microphone {
            arguments.append("--use-file-for-fake-audio-capture=\(microphone)%noloop")
        }
        arguments.append(url)

        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = arguments
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        p.standardOutput = log
        p.standardError = log
        try p.run()
        try? log.close()
        process = p
    }

    /// Ends Chromium and every process it started (its process group): SIGTERM, SIGKILL after
    /// 3 s; removes the profile.
    func stop() {
        if let p = process {
            process = nil
            let group = p.processIdentifier
            if p.isRunning {
                kill(-group, SIGTERM)
                let deadline = Date().addingTimeInterval(3)
                while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
                if p.isRunning { kill(-group, SIGKILL) }
                p.waitUntilExit()
            }
            // Helpers that outlived the browser (the group is ours while any member lives).
            kill(-group, SIGKILL)
        }
        try? FileManager.default.removeItem(atPath: profile)
    }

    /// Queues a command for the page: mute, unmute, leave, join, upload.
    func send(_ command: String) { server.send(command, to: name) }

    var events: [BrowserEvent] { server.events(name) }
    var eventLog: String { server.eventLog(name) }
    var chromiumLog: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The first event (from `after` on) that satisfies `predicate`, waiting up to `timeout`
    /// seconds; nil when none came (or Chromium exited).
    func wait(timeout: TimeInterval, after: Int = 0, for predicate: (BrowserEvent) -> Bool) -> BrowserEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            let all = events
            if all.count > after, let hit = all[after...].first(where: predicate) { return hit }
            if let p = process, !p.isRunning { return nil }
            Thread.sleep(forTimeInterval: 0.05)
        } while Date() < deadline
        return nil
    }

    /// A `status` event with this status.
    func wait(status: String, timeout: TimeInterval, after: Int = 0) -> BrowserEvent? {
        wait(timeout: timeout, after: after) { $0.type == "status" && $0.status == status }
    }

    /// How many events have come so far: pass it as `after` to wait for what happens next.
    var mark: Int { events.count }

    /// The AudioBridge's news of participant `display` (a join, or a change such as `muted`),
    /// optionally with that `muted` state — "the browser saw the appliance mute / go on stage
    /// (unmuted) / come back".
    func sees(_ display: String, muted: Bool? = nil, timeout: TimeInterval, after: Int = 0) -> BrowserEvent? {
        wait(timeout: timeout, after: after) {
            $0.type == "participant" && $0.display == display && (muted == nil || $0.muted == muted)
        }
    }

    /// Participant `display` leaving the room.
    func seesLeave(_ display: String, timeout: TimeInterval, after: Int = 0) -> BrowserEvent? {
        wait(timeout: timeout, after: after) { $0.type == "leaving" && $0.display == display }
    }

    /// Janus's talking detection on participant `display` (needs `audiolevel_event`, which
    /// `JanusFixture`'s room has).
    func seesTalking(_ display: String, timeout: TimeInterval, after: Int = 0) -> BrowserEvent? {
        wait(timeout: timeout, after: after) { $0.type == "talking" && $0.display == display && $0.talking == true }
    }

    /// The recording the page uploaded, waiting up to `timeout` seconds for it.
    func recording(timeout: TimeInterval) throws -> WAVAudio? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let data = server.upload(name) { return try WAVFile.decode(bytes: [UInt8](data)) }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return nil
    }

    /// A description for failure messages: the page's events and the end of Chromium's log.
    var diagnostics: String {
        "\(name)'s events:\n\(eventLog)\n\(name)'s Chromium log (end):\n\(chromiumLog.suffix(1500))"
    }
}
