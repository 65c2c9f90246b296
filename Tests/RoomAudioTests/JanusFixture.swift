import Foundation
import RoomSystem
import Glibc
import XCTest

/// A Janus (Debian's `janus` 1.1.2) of a test's own: its configuration in a directory of its
/// own, the WebSocket API on a random port of 127.0.0.1, AudioBridge room 1234 at 48 kHz with
/// talking events, nothing else loaded. It can be stopped and started again on the same port,
/// the way a restarted server looks to the appliance and the browsers in its rooms.
///
/// The configuration is JanusLiveTests' (Tests/RoomJanusTests), copied rather than shared, so
/// the two test targets stay independent. ICE runs on the machine's first non-loopback IPv4
/// interface: libnice, Janus's ICE, gathers no loopback candidates (docs/janus.md, "Limits"),
/// so browsers and appliances reach Janus's media on that address — still local traffic.
final class JanusFixture {
    static let executable = "/usr/bin/janus"

    /// The room every browser and appliance of these tests joins.
    static let room = 1234

    let directory: String
    let port: Int
    let interface: (name: String, address: String)
    private(set) var process: Process?

    /// The WebSocket URL for browsers and roomd (subprotocol `janus-protocol`).
    var url: String { "ws://127.0.0.1:\(port)" }
    var logPath: String { directory + "/janus.log" }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Writes the configuration into `directory` (created); skips the test when janus is not
    /// installed or the machine has no interface but loopback.
    init(directory: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw XCTSkip("janus is not installed (\(Self.executable)); scripts/setup installs it")
        }
        guard let interface = Self.localInterface() else {
            throw XCTSkip("no IPv4 interface besides loopback: libnice (Janus's ICE) gathers no loopback candidates")
        }
        guard let lib = Self.moduleDirectory() else { throw XCTSkip("Janus's plugins are not under /usr/lib/*/janus") }
        self.directory = directory
        self.interface = interface
        port = E2E.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Only the AudioBridge and the WebSocket transport: the other plugins and transports
        // cost start-up time, and with Debian's stock config some of them log errors or give up
        // (docs/janus.md). `session_timeout = 60` is what the appliance's 25 s keepalive is
        // sized for. `audiolevel_event` makes Janus send `talking`/`stopped-talking`.
        let files = [
            "janus.jcfg": """
            general: { configs_folder = "\(directory)" plugins_folder = "\(lib)/plugins" transports_folder = "\(lib)/transports"
                       events_folder = "\(lib)/events" loggers_folder = "\(lib)/loggers" debug_level = 4 session_timeout = 60 }
            plugins: { disable = "libjanus_echotest.so,libjanus_videocall.so,libjanus_sip.so,libjanus_nosip.so,libjanus_streaming.so,libjanus_textroom.so,libjanus_recordplay.so,libjanus_voicemail.so,libjanus_lua.so,libjanus_duktape.so,libjanus_videoroom.so" }
            transports: { disable = "libjanus_http.so,libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_pfunix.so,libjanus_rabbitmq.so" }
            events: { broadcast = false }
            loggers: { disable = "libjanus_jsonlog.so" }
            nat: { ice_enforce_list = "\(interface.name)" ignore_mdns = true }
            """,
            "janus.transport.websockets.jcfg": """
            general: { json = "plain" ws = true ws_port = \(port) ws_interface = "lo" wss = false }
            admin: { admin_ws = false }
            """,
            "janus.plugin.audiobridge.jcfg": """
            general: { }
            room-\(Self.room): { description = "roomd test room" sampling_rate = 48000
                       audiolevel_event = true audio_active_packets = 50 audio_level_average = 40 }
            """,
        ]
        for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
    }

    /// Starts Janus and waits until its WebSocket completes a `janus-protocol` handshake.
    /// Janus appends to the same log across restarts.
    func start(timeout: TimeInterval = 10) throws {
        precondition(process == nil, "Janus is already running")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.executable)
        p.arguments = ["-C", directory + "/janus.jcfg", "-F", directory, "-L", logPath]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard p.isRunning else { break }
            if Self.webSocketAnswers(port: port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw JanusFixtureError.notAnswering("Janus's WebSocket on 127.0.0.1:\(port) did not answer within \(timeout) s "
            + "(running: \(p.isRunning))\n\(log.suffix(2000))")
    }

    /// Ends the Janus this fixture started (by its PID): SIGTERM, then SIGKILL after 3 s;
    /// `crash: true` sends SIGKILL at once, a server that vanishes without closing anything.
    func stop(crash: Bool = false) {
        guard let p = process else { return }
        process = nil
        guard p.isRunning else { return }
        kill(p.processIdentifier, crash ? SIGKILL : SIGTERM)
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

    /// Where Debian puts Janus's plugins and transports: /usr/lib/<multiarch triple>/janus.
    static func moduleDirectory() -> String? {
        let lib = "/usr/lib"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []
        return entries.sorted().map { "\(lib)/\($0)/janus" }.first {
            FileManager.default.fileExists(atPath: $0 + "/plugins/libjanus_audiobridge.so")
        }
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
