import Foundation
import RoomTestSupport
import XCTest

/// Base for tests that run the real executables (roomd, roomserver, roomctl, roomproxy) as
/// processes, the way systemd and the rig do. Every process a test launches is ended in
/// tearDown, so a failing test leaves nothing running.
class ProcessTestCase: XCTestCase {
    var processes: [Process] = []

    override func tearDown() {
        for p in processes where p.isRunning { p.terminate() }
        for p in processes { p.waitUntilExit() }
        processes = []
        super.tearDown()
    }

    /// A built executable next to the test bundle, or a skip that says how to build it.
    func executable(_ name: String) throws -> String {
        let path = SimCard.buildDirectory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw XCTSkip("\(name) not built at \(path): run `swift build` first (scripts/test does)")
        }
        return path
    }

    /// Starts a long-running process with stdout and stderr in `log`. The ALSA variables are
    /// cleared: roomd sets them itself from the board profile.
    @discardableResult
    func launch(_ exe: String, _ args: [String], env: [String: String] = [:], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args + Self.signallingTrust(exe, args)
        p.environment = Self.environment(env)
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        processes.append(p)
        return p
    }

    /// Signalling is TLS, as installed: every roomserver these tests start serves the test
    /// certificate (`writeServerConfig`), so a roomd joining one with `--server` is given the
    /// test CA, unless the test chose its own TLS or plain settings.
    static func signallingTrust(_ exe: String, _ args: [String]) -> [String] {
        guard exe.hasSuffix("/roomd"), args.contains("--server") || args.contains("--config") else { return [] }
        if args.contains(where: { $0 == "--tls-ca-file" || $0 == "--tls-pin" || $0 == "--plaintext-signalling" }) { return [] }
        // A configuration file that turns TLS off is the test's own choice too (and roomd
        // refuses a command-line CA beside plaintext_signalling = yes).
        if let i = args.firstIndex(of: "--config"), i + 1 < args.count,
           let text = try? String(contentsOfFile: args[i + 1], encoding: .utf8),
           text.split(separator: "\n").contains(where: { line in
               let key = line.split(separator: "=").first?.trimmingCharacters(in: .whitespaces) ?? ""
               return key == "plaintext_signalling"
           }) {
            return []
        }
        return ["--tls-ca-file", testCertificates + "/ca.pem"]
    }

    /// A CA and a server certificate for 127.0.0.1, 127.0.0.2 (roomproxy) and localhost, made
    /// once per test run with scripts/make-dev-certs.
    static let testCertificates: String = {
        let dir = TestScratch.directory("roomd-test-tls")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: SimCard.repoRoot + "/scripts/make-dev-certs")
        p.arguments = [dir]
        p.standardOutput = FileHandle.nullDevice
        try? p.run()
        p.waitUntilExit()
        return dir
    }()

    /// This process's environment plus `extra`, without the ALSA variables: roomd sets them
    /// itself from the board profile.
    static func environment(_ extra: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "ALSA_CONFIG_PATH")
        environment.removeValue(forKey: "ALSA_PLUGIN_DIR")
        for (k, v) in extra { environment[k] = v }
        return environment
    }

    /// Runs a command to completion keeping stdout and stderr apart (stderr goes through a
    /// file, so a chatty stderr cannot block the child while stdout is being read).
    func runSeparated(_ exe: String, _ args: [String], env: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.environment = Self.environment(env)
        let errPath = NSTemporaryDirectory() + "roomd-test-stderr-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errPath) }
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let out = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try err.close()
        let e = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), e)
    }

    /// Runs a short command to completion; stdout and stderr together, trimmed.
    @discardableResult
    func run(_ exe: String, _ args: [String]) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Waits until a daemon's control socket exists (roomctl exits 69 while it does not).
    func waitForSocket(_ path: String, timeout: TimeInterval = 10) {
        let deadline = Date().addingTimeInterval(timeout)
        while !FileManager.default.fileExists(atPath: path) && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "no control socket at \(path)")
    }

    /// A development token from `roomserver mint-token`.
    func mintToken(_ server: String, config: String, room: String, user: String, _ extra: [String] = []) throws -> String {
        let r = try run(server, ["mint-token", "--config", config, "--key", "dev", "--room", room,
                                 "--user", user, "--name", user.capitalized] + extra)
        XCTAssertEqual(r.status, 0, r.out)
        return r.out
    }

    /// roomserver on free loopback ports with docs/roomserver.conf.example (and `replacing`) as
    /// `dir/server.conf`, waited for until it accepts connections.
    @discardableResult
    func startServer(_ exe: String, dir: String, replacing: [String: String] = [:], log: String = "server.log")
        throws -> (tcp: Int, udp: Int, process: Process) {
        let tcp = E2E.freePort(), udp = E2E.freePort(udp: true)
        try writeServerConfig(dir + "/server.conf", tcp: tcp, udp: udp, replacing: replacing)
        let process = try launch(exe, ["--config", dir + "/server.conf"], log: dir + "/" + log)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && !E2E.accepts(port: tcp) { Thread.sleep(forTimeInterval: 0.05) }
        return (tcp, udp, process)
    }

    /// docs/roomserver.conf.example on the given loopback ports, with optional text replacements.
    func writeServerConfig(_ path: String, tcp: Int, udp: Int, replacing: [String: String] = [:]) throws {
        var text = try String(contentsOfFile: SimCard.repoRoot + "/docs/roomserver.conf.example", encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:7700", with: "127.0.0.1:\(tcp)")
            .replacingOccurrences(of: "127.0.0.1:7701", with: "127.0.0.1:\(udp)")
            .replacingOccurrences(of: "cert_file = tls/server.pem", with: "cert_file = \(Self.testCertificates)/server.pem")
            .replacingOccurrences(of: "key_file = tls/server.key", with: "key_file = \(Self.testCertificates)/server.key")
        for (from, to) in replacing { text = text.replacingOccurrences(of: from, with: to) }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// Measurements shared by the end-to-end tests.
enum E2E {
    /// The simulated room of one appliance in an end-to-end test (docs/sim-card.md): echo on,
    /// its speaker recorded to `dir/NAME-speaker.wav` with a status file `dir/NAME.status`,
    /// and `input` (when given) a talker from the beamformer's look direction. Returns the path
    /// of `dir/NAME.conf`, for ROOMSIM_CONFIG.
    /// The talker/listener rooms the receive-path and impairment tests share: A's mic hears
    /// `seconds − 1` s of speech-like sound (`dir/a-mic.wav`); returns that sound (the
    /// reference) and the room files of the talker A and the listener B (echo at −10 dB,
    /// −70 dBFS noise).
    static func writeTalkerAndListenerRooms(_ dir: String, seconds: Double) throws
        -> (speech: [Float], talker: String, listener: String) {
        let speech = SimCard.speechLike(seconds: seconds - 1, seed: 0.9, level: 0.25)
        SimCard.writeWAV(dir + "/a-mic.wav", speech)
        let extra = ["echo_gain_db = -10", "noise_dbfs = -70"]
        return (speech, try writeRoom(dir, "a", input: dir + "/a-mic.wav", inputEnd: "silence", extra: extra),
                try writeRoom(dir, "b", input: nil, inputEnd: "silence", extra: extra))
    }

    static func writeRoom(_ dir: String, _ name: String, input: String? = nil, inputEnd: String = "silence",
                          extra: [String] = []) throws -> String {
        var lines = ["echo = on", "output = \(dir)/\(name)-speaker.wav", "status = \(dir)/\(name).status"] + extra
        if let input { lines += ["input = \(input)", "input_end = \(inputEnd)", "input_mic_delays = 4 9 4 0"] }
        let path = dir + "/\(name).conf"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A port free on 127.0.0.1 for TCP (or UDP): bind port 0, read it back, release it.
    /// Whether something listens on 127.0.0.1:`port` (TCP).
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func freePort(udp: Bool = false) -> Int {
        let fd = socket(AF_INET, Int32((udp ? SOCK_DGRAM : SOCK_STREAM).rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// CLOCK_MONOTONIC in nanoseconds: the clock the simulated card stamps stream starts with.
    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// `first_start_ns` of a stream from the simulated card's status file (docs/sim-card.md).
    static func startNanoseconds(_ path: String, stream: String) throws -> Int64 {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix(stream + " ") }, "no \(stream) line in \(path)")
        let field = try XCTUnwrap(line.split(separator: " ").first { $0.hasPrefix("first_start_ns=") })
        return try XCTUnwrap(Int64(field.dropFirst("first_start_ns=".count)))
    }

    /// 10 ms log-energy envelope.
    static func envelope(_ x: [Float]) -> [Double] {
        stride(from: 0, to: max(0, x.count - 480), by: 480).map { i in
            var e = 0.0
            for k in i..<(i + 480) { e += Double(x[k] * x[k]) }
            return log10(e + 1e-9)
        }
    }

    /// Best normalized correlation of b's envelope against a's, over lags 0...maxLag periods.
    static func bestCorrelation(_ a: [Double], _ b: [Double], maxLag: Int) -> (corr: Double, lag: Int) {
        var best = (-1.0, 0)
        for lag in 0...maxLag {
            let n = min(a.count, b.count - lag)
            guard n > 100 else { continue }
            let xa = a[0..<n], xb = b[lag..<(lag + n)]
            let ma = xa.reduce(0, +) / Double(n), mb = xb.reduce(0, +) / Double(n)
            var num = 0.0, da = 0.0, db = 0.0
            for (u, v) in zip(xa, xb) { num += (u - ma) * (v - mb); da += (u - ma) * (u - ma); db += (v - mb) * (v - mb) }
            let c = num / sqrt(da * db + 1e-12)
            if c > best.0 { best = (c, lag) }
        }
        return best
    }

    /// The JSON objects among a log's lines (roomd's status lines, the proxy's counters).
    /// A roomd status or summary line's xruns, capture and playback (absent counts 0): a run
    /// with any measured the machine, not the code under test.
    static func xruns(_ status: [String: Any]) -> Int {
        ["capture_xruns", "playback_xruns"].reduce(0) { $0 + max(0, (status[$1] as? NSNumber)?.intValue ?? 0) }
    }

    static func jsonLines(_ path: String) throws -> [[String: Any]] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard line.hasPrefix("{") else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}
