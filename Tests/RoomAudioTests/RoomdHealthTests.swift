import Foundation
import RoomControl
import RoomJSON
import RoomSystem
import RoomTestSupport
import Synchronization
import XCTest

/// Issue 10 (4, 5, 6): what roomd tells systemd about its health, its audio thread's name and
/// memory, and an event loop that keeps serving while a self-test is analysed.
final class RoomdHealthTests: ProcessTestCase {
    private var board: String { SimCard.repoRoot + "/board/sim" }

    /// The self-test's analysis (~0.2 s in release, seconds in a debug build) ran on the event
    /// loop: a `status` asked meanwhile waited for it (as did signalling, RTP receive and the
    /// buttons). It runs on a worker now. A client asks `status` over and over while a self-test
    /// runs; the slowest answer must come well inside the analysis time the test reports.
    func testControlSocketAnswersWhileTheSelfTestIsAnalysed() throws {
        let dir = SimCard.scratch("selftest-loop")
        SimCard.useRoom(dir, ["echo": "on"])
        let socket = dir + "/ctl.sock"
        try launch(try executable("roomd"),
                   ["--board", board, "--loopback", "--duration", "40", "--stats-interval", "0",
                    "--control-socket", socket, "--state-dir", "none", "--config", "none"],
                   env: ["ROOMSIM_CONFIG": dir + "/room.conf"], log: dir + "/roomd.log")
        waitForSocket(socket)
        // One self-test, with status requests asked every ~10 ms while it runs and is analysed.
        func selfTestWhilePolling() throws -> (answer: [String: JSONValue]?, failure: String?, slowest: Double, asked: Int) {
            let got = Mutex<[String: JSONValue]?>(nil)
            let failed = Mutex<String?>(nil)
            Thread.detachNewThread {
                do {
                    let client = try ControlClient(path: socket)
                    let result = try client.request("selftest", timeout: .seconds(60))
                    got.withLock { $0 = result }
                } catch {
                    failed.withLock { $0 = "\(error)" }
                }
            }
            let client = try ControlClient(path: socket)
            var slowest = 0.0
            var asked = 0
            let deadline = Date().addingTimeInterval(60)
            while got.withLock({ $0 == nil }) && failed.withLock({ $0 == nil }) && Date() < deadline {
                let t0 = monotonicNanoseconds()
                _ = try client.request("status", timeout: .seconds(30))
                slowest = max(slowest, Double(monotonicNanoseconds() - t0) / 1e6)
                asked += 1
                Thread.sleep(forTimeInterval: 0.01)
            }
            return (got.withLock { $0 }, failed.withLock { $0 }, slowest, asked)
        }
        // A self-test whose recording had an xrun answers device_error, "run it again".
        let run = try Disturbance.rerun("RoomdHealthTests", disturbed: {
            $0.failure?.contains("device_error") == true || $0.answer?["error"]?.objectValue?["code"]?.stringValue == "device_error"
        }, selfTestWhilePolling)
        let (answer, failureText, slowest, asked) = (run.answer, run.failure, run.slowest, run.asked)
        XCTAssertNil(failureText)
        let result = try XCTUnwrap(answer, "the self-test did not answer in 60 s")
        let analysisMs = try XCTUnwrap(result["analysis_ms"]?.doubleValue)
        let attempts = result["attempts"]?.intValue ?? 1
        print("self-test analysis \(analysisMs) ms (attempts \(attempts)); \(asked) status requests, slowest \(slowest) ms")
        // In a debug build the analysis takes well over a second; on the loop, a request asked
        // every ~10 ms waited for nearly all of it.
        guard analysisMs >= 150 else { throw XCTSkip("analysis took \(analysisMs) ms: too short to tell a blocked loop") }
        XCTAssertLessThan(slowest, analysisMs / 2, "a status request waited for the self-test's analysis (slowest \(slowest) ms)")
    }

    /// Issue 10 (4): WATCHDOG=1 came from an event-loop timer whatever the audio did, so a card
    /// whose clock stopped left the room silent with systemd content. Now: the simulated card's
    /// clock stops (`stall`, docs/sim-card.md) → the keep-alives stop and STATUS says the audio
    /// stalled; the clock comes back → they resume. A device loss (`lose`) is a recovery roomd
    /// does itself: the keep-alives go on and STATUS says the card is being reopened. The audio
    /// thread carries its name (issue 10 (5)).
    func testWatchdogFollowsTheAudioThreadAndStatusSaysWhy() throws {
        let dir = SimCard.scratch("watchdog")
        SimCard.useRoom(dir, ["echo": "on", "control": dir + "/card.ctl"])
        let notify = try NotifyListener(path: dir + "/notify.sock")
        let p = try launch(try executable("roomd"),
                           ["--board", board, "--loopback", "--duration", "30", "--stats-interval", "0",
                            "--control-socket", "none", "--state-dir", "none", "--config", "none"],
                           env: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000", "ROOMSIM_CONFIG": dir + "/room.conf"],
                           log: dir + "/roomd.log")
        notify.collect(seconds: 10) { $0.filter { $0.text.contains("WATCHDOG=1") }.count >= 5 }
        XCTAssertTrue(notify.messages.contains { $0.text.contains("READY=1") }, "\(notify.messages)")

        // The audio thread is named (top -H, ps -L, /proc/PID/task/TID/comm).
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(p.processIdentifier)/task")) ?? []
        let names = tasks.compactMap { try? String(contentsOfFile: "/proc/\(p.processIdentifier)/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertEqual(names.filter { $0 == "roomd-audio" }.count, 1, "thread names: \(names)")

        // The card's clock stops for 2.5 s.
        let stallAt = monotonicNanoseconds()
        try SimCardControl.send("stall 2500", to: dir + "/card.ctl")
        notify.collect(seconds: 6) { messages in
            messages.contains { $0.at > stallAt + 2_500_000_000 && $0.text.contains("WATCHDOG=1") }
                && messages.last { $0.text.contains("STATUS=") }.map { !$0.text.contains("STALLED") } ?? false
        }
        let afterStall = notify.messages.filter { $0.at > stallAt }
        let stalledStatus = afterStall.first { $0.text.contains("STATUS=AUDIO STALLED") }
        XCTAssertNotNil(stalledStatus, "STATUS should say the audio stalled: \(afterStall.map(\.text))")
        XCTAssertTrue(afterStall.contains { $0.text.contains("STALLED") && $0.text.contains("watchdog not fed") }, "\(afterStall.map(\.text))")
        let gap = NotifyListener.longestGap(between: afterStall.filter { $0.text.contains("WATCHDOG=1") }, from: stallAt)
        // Keep-alives every 0.2 s while the audio runs; none for (nearly) the whole stall.
        XCTAssertGreaterThan(gap, 1.5, "WATCHDOG=1 must stop while the card is stalled (longest gap \(gap) s)")
        XCTAssertTrue(afterStall.contains { $0.at > stallAt + 2_500_000_000 && $0.text.contains("WATCHDOG=1") },
                      "WATCHDOG=1 resumes once the card's clock runs again")

        // The device is lost for 3 s: roomd reopens it itself, and is not to be restarted for it.
        let loseAt = monotonicNanoseconds()
        try SimCardControl.send("lose 3000", to: dir + "/card.ctl")
        notify.collect(seconds: 10) { messages in
            messages.contains { $0.at > loseAt + 3_000_000_000 && $0.text.contains("STATUS=") && !$0.text.contains("card error") }
        }
        let afterLoss = notify.messages.filter { $0.at > loseAt }
        XCTAssertTrue(afterLoss.contains { $0.text.contains("STATUS=audio card error, reopening") }, "\(afterLoss.map(\.text))")
        let lossGap = NotifyListener.longestGap(between: afterLoss.filter { $0.text.contains("WATCHDOG=1") }, from: loseAt)
        XCTAssertLessThan(lossGap, 1.5, "WATCHDOG=1 goes on while the card is being reopened (longest gap \(lossGap) s)")
        XCTAssertTrue(afterLoss.contains { $0.at > loseAt + 3_000_000_000 && $0.text.contains("STATUS=loopback test") },
                      "STATUS back to normal after the card returned: \(afterLoss.map(\.text))")
        // Issue 10 (5): 3 s in, the memory is locked on fault: locked, yet only what was touched
        // is resident (a full mlockall faulted in the whole address space, ~49 MB in release).
        let status = (try? String(contentsOfFile: "/proc/\(p.processIdentifier)/status", encoding: .utf8)) ?? ""
        func kB(_ key: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(key + ":") }.flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? -1
        }
        // Not under a sanitizer (scripts/sanitize): their shadow mappings (VmSize 123 TB under
        // TSan, 21 TB under ASan) make mlockall fail, and roomd says so in one warning and runs
        // unlocked, as designed.
        let environment = ProcessInfo.processInfo.environment
        if environment["TSAN_OPTIONS"] == nil && environment["ASAN_OPTIONS"] == nil {
            XCTAssertGreaterThan(kB("VmLck"), 0, "memory locked (mlockall on fault): \(status)")
            XCTAssertLessThan(kB("VmRSS"), kB("VmLck") / 2, "locking must not fault everything in: \(status)")
        }
        p.terminate()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        XCTAssertTrue(notify.drain().contains { $0.text.contains("STOPPING=1") })
    }

    /// Issue 10 (4): STATUS was set once, at READY. It now follows the room: joined and on
    /// stage, muted, and back.
    func testStatusFollowsTheRoom() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("status-room")
        let (tcp, _, _) = try startServer(server, dir: dir)
        SimCard.useRoom(dir, ["echo": "off"])
        let token = try mintToken(server, config: dir + "/server.conf", room: "lobby", user: "a", ["--publish"])
        let notify = try NotifyListener(path: dir + "/notify.sock")
        let socket = dir + "/a.sock"
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", token, "--role", "streamer",
                           "--duration", "30", "--stats-interval", "0", "--config", "none", "--state-dir", "none",
                           "--control-socket", socket],
                   env: ["NOTIFY_SOCKET": notify.path, "ROOMSIM_CONFIG": dir + "/room.conf"], log: dir + "/a.log")
        func statuses() -> [String] { notify.messages.compactMap { m in m.text.split(separator: "\n").first { $0.hasPrefix("STATUS=") }.map(String.init) } }
        notify.collect(seconds: 10) { _ in statuses().last == "STATUS=in room lobby: on stage" }
        XCTAssertEqual(statuses().last, "STATUS=in room lobby: on stage", "\(statuses())")
        waitForSocket(socket)
        XCTAssertEqual(try run(roomctl, ["--socket", socket, "mute"]).status, 0)
        notify.collect(seconds: 5) { _ in statuses().last == "STATUS=in room lobby: on stage, muted" }
        XCTAssertEqual(statuses().last, "STATUS=in room lobby: on stage, muted", "\(statuses())")
        XCTAssertEqual(try run(roomctl, ["--socket", socket, "leave"]).status, 0)
        notify.collect(seconds: 5) { _ in statuses().last?.hasPrefix("STATUS=not in a room") ?? false }
        XCTAssertEqual(statuses().last, "STATUS=not in a room (left)", "\(statuses())")
    }

    /// A card that stalls for good: roomd still exits on SIGTERM (the stuck audio thread is
    /// left behind after 2 s, exit 70) instead of waiting for systemd's stop timeout.
    func testStuckAudioThreadDoesNotHangTheExit() throws {
        let dir = SimCard.scratch("stuck")
        SimCard.useRoom(dir, ["echo": "off", "control": dir + "/card.ctl"])
        let p = try launch(try executable("roomd"),
                           ["--board", board, "--loopback", "--duration", "30", "--stats-interval", "0",
                            "--control-socket", "none", "--state-dir", "none", "--config", "none"],
                           env: ["ROOMSIM_CONFIG": dir + "/room.conf"], log: dir + "/roomd.log")
        Thread.sleep(forTimeInterval: 1.5)
        try SimCardControl.send("stall 600000", to: dir + "/card.ctl")
        Thread.sleep(forTimeInterval: 1)
        let t0 = Date()
        p.terminate()
        let deadline = Date().addingTimeInterval(15)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        let log = (try? String(contentsOfFile: dir + "/roomd.log", encoding: .utf8)) ?? ""
        XCTAssertEqual(p.terminationStatus, 70, log)
        XCTAssertLessThan(Date().timeIntervalSince(t0), 10, log)
        XCTAssertTrue(log.contains("audio stalled"), log)
        XCTAssertTrue(log.contains("audio thread did not stop"), log)
    }
}

/// The simulated card's control file (docs/sim-card.md): written atomically, read within 5 ms
/// while a stream runs.
enum SimCardControl {
    static func send(_ command: String, to path: String) throws {
        try (command + "\n").write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
        XCTAssertEqual(rename(path + ".tmp", path), 0)
    }
}

/// A fake NOTIFY_SOCKET: a Unix datagram socket whose messages are kept with the monotonic
/// time they were read.
final class NotifyListener {
    let path: String
    private let fd: Int32
    private(set) var messages: [(at: UInt64, text: String)] = []

    init(path: String) throws {
        self.path = path
        unlink(path)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0 else { throw NSError(domain: "notify socket \(path)", code: Int(errno)) }
        var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Reads messages for at most `seconds`, or until `done` says enough.
    func collect(seconds: Double, until done: ([(at: UInt64, text: String)]) -> Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 1024)
        while Date() < deadline && !done(messages) {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { messages.append((monotonicNanoseconds(), String(decoding: buffer[0..<n], as: UTF8.self))) }
        }
    }

    /// Whatever is left to read (after the daemon exited).
    func drain() -> [(at: UInt64, text: String)] {
        collect(seconds: 0.3) { _ in false }
        return messages
    }

    /// The longest time, in seconds, from `start` or one message to the next.
    static func longestGap(between messages: [(at: UInt64, text: String)], from start: UInt64) -> Double {
        var last = start, longest: UInt64 = 0
        for m in messages {
            longest = max(longest, m.at &- last)
            last = m.at
        }
        return Double(longest) / 1e9
    }
}
