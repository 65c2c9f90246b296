import Foundation
import RoomCore
import XCTest

/// Real processes on loopback: one roomserver and three roomd on their own simulated sound
/// cards. What A's microphones hear must come out of B's and C's speakers, and not out of A's.
final class RoomEndToEndTests: XCTestCase {
    private var processes: [Process] = []

    override func tearDown() {
        for p in processes where p.isRunning { p.terminate() }
        for p in processes { p.waitUntilExit() }
        processes = []
    }

    private func executable(_ name: String) throws -> String {
        let path = SimCard.buildDirectory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else { throw XCTSkip("\(name) not built: run `swift build` first (scripts/test does)") }
        return path
    }

    @discardableResult
    private func launch(_ exe: String, _ args: [String], env: [String: String] = [:], log: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "ALSA_CONFIG_PATH")
        environment.removeValue(forKey: "ALSA_PLUGIN_DIR")
        for (k, v) in env { environment[k] = v }
        p.environment = environment
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        processes.append(p)
        return p
    }

    private func run(_ exe: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
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

    /// `first_start_ns` of a stream from the simulated card's status file (docs/sim-card.md).
    private func startNanoseconds(_ path: String, stream: String) throws -> Int64 {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix(stream + " ") }, "no \(stream) line in \(path)")
        let field = try XCTUnwrap(line.split(separator: " ").first { $0.hasPrefix("first_start_ns=") })
        return try XCTUnwrap(Int64(field.dropFirst("first_start_ns=".count)))
    }

    /// 10 ms log-energy envelope.
    private func envelope(_ x: [Float]) -> [Double] {
        stride(from: 0, to: max(0, x.count - 480), by: 480).map { i in
            var e = 0.0
            for k in i..<(i + 480) { e += Double(x[k] * x[k]) }
            return log10(e + 1e-9)
        }
    }

    /// Best normalized correlation of b's envelope against a's, over lags 0...maxLag periods.
    private func bestCorrelation(_ a: [Double], _ b: [Double], maxLag: Int) -> (corr: Double, lag: Int) {
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

    func testSpeechFromAReachesBAndCButNotA() throws {
        let roomd = try executable("roomd"), server = try executable("roomserver")
        let dir = SimCard.scratch("e2e")
        let tcp = freePort(), udp = freePort()
        let example = try String(contentsOfFile: SimCard.repoRoot + "/docs/roomserver.conf.example", encoding: .utf8)
        let config = example.replacingOccurrences(of: "127.0.0.1:7700", with: "127.0.0.1:\(tcp)")
            .replacingOccurrences(of: "127.0.0.1:7701", with: "127.0.0.1:\(udp)")
        try config.write(toFile: dir + "/server.conf", atomically: true, encoding: .utf8)
        try launch(server, ["--config", dir + "/server.conf"], log: dir + "/server.log")

        func token(_ user: String, publish: Bool) throws -> String {
            try run(server, ["mint-token", "--config", dir + "/server.conf", "--key", "dev", "--room", "e2e",
                             "--user", user, "--name", user.capitalized] + (publish ? ["--publish"] : []))
        }
        // A talks (speech-like signal from the beamformer's look direction); B and C listen.
        let speech = SimCard.speechLike(seconds: 6, seed: 0.9, level: 0.25)
        SimCard.writeWAV(dir + "/a-mic.wav", speech)
        func room(_ name: String, input: String?) throws -> String {
            var lines = ["echo = on", "echo_gain_db = -10", "noise_dbfs = -70", "output = \(dir)/\(name)-speaker.wav",
                         "status = \(dir)/\(name).status"]
            if let input { lines += ["input = \(input)", "input_end = silence", "input_mic_delays = 4 9 4 0"] }
            let path = dir + "/\(name).conf"
            try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let seconds = "9"
        let board = SimCard.repoRoot + "/board/sim"
        for (name, role, publish) in [("b", "audience", false), ("c", "audience", false)] {
            try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token(name, publish: publish),
                               "--role", role, "--duration", seconds],
                       env: ["ROOMSIM_CONFIG": try room(name, input: nil)], log: dir + "/\(name).log")
        }
        Thread.sleep(forTimeInterval: 0.5)
        // A starts last so its speech begins after the listeners joined; it starts 1 s into its
        // run, the time the join takes, because the mic file starts when A's capture does.
        try launch(roomd, ["--board", board, "--server", "127.0.0.1:\(tcp)", "--token", try token("a", publish: true),
                           "--role", "streamer", "--duration", seconds],
                   env: ["ROOMSIM_CONFIG": try room("a", input: dir + "/a-mic.wav")], log: dir + "/a.log")
        for p in processes.dropFirst() { p.waitUntilExit(); XCTAssertEqual(p.terminationStatus, 0) }

        let a = envelope(speech)
        let micStart = try startNanoseconds(dir + "/a.status", stream: "capture")
        for name in ["b", "c"] {
            let out = try SimCard.readWAV(dir + "/\(name)-speaker.wav").floatSamples
            let e = envelope(out)
            let (corr, lag) = bestCorrelation(a, e, maxLag: 400)
            XCTAssertGreaterThan(corr, 0.6, "\(name)'s speaker must carry A's speech (best lag \(lag * 10) ms); logs in \(dir)")
            // Sample 0 of A's mic and sample lag×480 of the listener's speaker, on one clock:
            // the mouth-to-ear delay, to 10 ms (the envelope's resolution).
            let speakerStart = try startNanoseconds(dir + "/\(name).status", stream: "playback")
            let delayMs = (Double(speakerStart) - Double(micStart)) / 1e6 + Double(lag * 10)
            print("e2e: A's mic → \(name)'s speaker: envelope correlation \(corr), delay \(delayMs) ms")
            XCTAssertGreaterThan(delayMs, 0, "sound cannot arrive before it was spoken")
            XCTAssertLessThan(delayMs, 250, "loose sanity bound; scripts/bench measures it properly")
        }
        let own = try SimCard.readWAV(dir + "/a-speaker.wav").floatSamples
        let ownRMS = sqrt(own.reduce(0) { $0 + Double($1 * $1) } / Double(max(own.count, 1)))
        XCTAssertLessThan(ownRMS, 0.001, "A must not hear itself from the server")
    }
}
