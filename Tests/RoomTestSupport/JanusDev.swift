import Foundation

/// A Janus started by scripts/janus-dev (the repo's one Janus configuration, docs/janus.md) for a
/// test: the script picks a free WebSocket port and writes it to `DIR/ws_port` once the transport
/// accepts connections. Shared by the test targets that talk to Janus directly (the WebSocket
/// and wss tests, RTCP, the capture test), so there is one way they start it and wait for it.
public enum JanusDev {
    public static let executable = "/usr/bin/janus"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs scripts/janus-dev on `directory` (created) with `environment` added, and returns the
    /// process and its WebSocket port once Janus answers. A Janus that does not come up within
    /// `timeout` is started once more in a fresh directory beside it (a random port once collided
    /// and Janus exited: "Error creating vhost for Secure Websockets server"); both logs are in
    /// the failure when the second does not either.
    public static func start(directory: String, environment: [String: String] = [:], timeout: TimeInterval = 12)
        throws -> (process: Process, port: Int, directory: String) {
        let script = packageRoot + "/scripts/janus-dev"
        var logs: [String] = []
        for attempt in 1 ... 2 {
            let dir = attempt == 1 ? directory : directory + "-again"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: dir + "/ws_port")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: script)
            p.arguments = [dir]
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let text = try? String(contentsOfFile: dir + "/ws_port", encoding: .utf8),
                   let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) { return (p, port, dir) }
                if !p.isRunning { break }
                usleep(50_000)
            }
            if p.isRunning { p.terminate(); p.waitUntilExit() }
            logs.append(String(((try? String(contentsOfFile: dir + "/janus.log", encoding: .utf8)) ?? "").suffix(1500)))
            try? FileManager.default.removeItem(atPath: dir)
        }
        throw Failure(description: "Janus did not start (scripts/janus-dev, twice); logs:\n" + logs.joined(separator: "\n---\n"))
    }
}
