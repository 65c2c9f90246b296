import Foundation
import RoomSystem
import Glibc
import XCTest

/// A Janus (Debian's `janus` 1.1.2) of a test's own, as `scripts/janus-dev` configures it (the
/// one configuration of a Janus for appliances the repo has: docs/janus.md): its files in a
/// directory of its own, the WebSocket API on a random port of 127.0.0.1, AudioBridge rooms 1234
/// and 5678 at 48 kHz with talking events, nothing else loaded. It can be stopped and started
/// again on the same port, the way a restarted server looks to the appliance and the browsers
/// in its rooms. ICE runs on the machine's first non-loopback IPv4 interface: libnice, Janus's
/// ICE, gathers no loopback candidates (docs/janus.md, "Limits"), so browsers and appliances
/// reach Janus's media on that address — still local traffic.
final class JanusFixture {
    static let executable = "/usr/bin/janus"
    static let script = SimCard.repoRoot + "/scripts/janus-dev"

    /// The room every browser and appliance of these tests joins.
    static let room = 1234

    let directory: String
    let port: Int
    let interface: (name: String, address: String)
    private(set) var process: Process?
    /// Extra environment for scripts/janus-dev (JANUS_WSS_CERT, JANUS_DEBUG_LEVEL, …).
    var environment: [String: String] = [:]

    /// The WebSocket URL for browsers and roomd (subprotocol `janus-protocol`).
    var url: String { "ws://127.0.0.1:\(port)" }
    var logPath: String { directory + "/janus.log" }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Skips the test when janus is not installed or the machine has no interface but loopback.
    init(directory: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw XCTSkip("janus is not installed (\(Self.executable)); scripts/setup installs it")
        }
        guard let interface = Self.localInterface() else {
            throw XCTSkip("no IPv4 interface besides loopback: libnice (Janus's ICE) gathers no loopback candidates")
        }
        self.directory = directory
        self.interface = interface
        port = E2E.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// Starts Janus (scripts/janus-dev writes the configuration) and waits until its WebSocket
    /// completes a `janus-protocol` handshake. Janus appends to the same log across restarts.
    func start(timeout: TimeInterval = 10) throws {
        precondition(process == nil, "Janus is already running")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.script)
        p.arguments = [directory, "\(port)"]
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard p.isRunning else { break }
            if environment["JANUS_WSS_CERT"] != nil ? E2E.accepts(port: port) : Self.webSocketAnswers(port: port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw JanusFixtureError.notAnswering("Janus's WebSocket on 127.0.0.1:\(port) did not answer within \(timeout) s "
            + "(running: \(p.isRunning))\n\(log.suffix(2000))")
    }

    /// Ends the Janus this fixture started: SIGTERM to scripts/janus-dev (which ends its Janus),
    /// SIGKILL after 3 s; `crash: true` sends Janus itself SIGKILL at once, a server that vanishes
    /// without closing anything.
    func stop(crash: Bool = false) {
        guard let p = process else { return }
        process = nil
        guard p.isRunning else { return }
        if crash, let text = try? String(contentsOfFile: directory + "/janus.pid", encoding: .utf8),
           let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            kill(pid, SIGKILL)
        } else {
            kill(p.processIdentifier, SIGTERM)
        }
        let deadline = Date().addingTimeInterval(3)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
    }

    /// Stops Janus and starts it again on the same port with the same configuration: every
    /// session and room participant is gone, and clients must join again.
    func restart(crash: Bool = false) throws {
        stop(crash: crash)
        try start()
    }

    /// Removes the configuration and the log (after `stop`).
    func remove() {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// This machine's first IPv4 interface that is up and not loopback (roomd's own choice for
    /// a Janus on this machine, RoomSystem's `LocalAddress`).
    static func localInterface() -> (name: String, address: String)? {
        LocalAddress.firstNonLoopbackIPv4().map { ($0.interface, $0.address) }
    }

    /// Whether a WebSocket handshake with subprotocol `janus-protocol` on 127.0.0.1:`port`
    /// gets `101 Switching Protocols` — Janus's transport is up, not merely its port bound.
    static func webSocketAnswers(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return false }
        let request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Protocol: janus-protocol\r\n\r\n"
        let sent = request.utf8CString.withUnsafeBufferPointer { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
        guard sent > 0 else { return false }
        var reply = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &reply, reply.count, 0)
        guard n > 0 else { return false }
        return String(decoding: reply[0 ..< n], as: UTF8.self).hasPrefix("HTTP/1.1 101")
    }
}

enum JanusFixtureError: Error, CustomStringConvertible {
    case notAnswering(String)
    var description: String { switch self { case .notAnswering(let s): s } }
}
