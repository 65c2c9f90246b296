import Foundation
import Glibc

/// baresip as a far end, started from board/sip-test/baresip/ (its config with free ports, an
/// account of the test's) and driven through its ctrl_tcp module: netstring-framed JSON
/// commands in, responses and events (CALL_ESTABLISHED, CALL_CLOSED, …) out. Stopped by PID.
public final class Baresip {
    public static let executable = "/usr/bin/baresip"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// Spawned without Foundation's `Process` (`SpawnedProcess` says why).
    public private(set) var process: SpawnedProcess?
    public let directory: String
    public let sipPort: Int
    private var control: Int32 = -1
    private var pending: [UInt8] = []
    /// Every event and response received, in order.
    public private(set) var messages: [[String: Any]] = []

    /// `account` is the accounts-file line (`<sip:far@127.0.0.1:PORT>;auth_pass=…`).
    /// `account` is the accounts-file line (`<sip:far@127.0.0.1:PORT>;auth_pass=…`); `source`
    /// replaces the template's audio source (e.g. `aufile,/path/speech.wav`).
    /// `recordCalls`: each call's decoded audio is written to `recording` (baresip's sndfile).
    /// `config`: lines added to the configuration (`sip_cafile PATH` for a TLS account).
    public init(account: String, source: String? = nil, recordCalls: Bool = false, config extra: [String] = []) throws {
        sipPort = try freeLoopbackPort()
        let ctrlPort = try freeLoopbackPort()
        directory = TestScratch.directory("roomsip-baresip") + "/\(sipPort)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let template = try String(contentsOfFile: packageRoot + "/board/sip-test/baresip/config", encoding: .utf8)
        let config = template.replacingOccurrences(of: "@SIP_PORT@", with: "\(sipPort)")
            .replacingOccurrences(of: "@OUT_DIR@", with: directory)
            + "module_app\t\tctrl_tcp.so\nctrl_tcp_listen\t\t127.0.0.1:\(ctrlPort)\n"
        var lines = config.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if let source { lines = lines.map { $0.hasPrefix("audio_source") ? "audio_source\t\t" + source : $0 } }
        lines += extra
        if recordCalls {
            try FileManager.default.createDirectory(atPath: directory + "/dumps", withIntermediateDirectories: true)
            lines += ["module\t\t\tsndfile.so", "snd_path\t\t" + directory + "/dumps"]
        }
        try lines.joined(separator: "\n").write(toFile: directory + "/config", atomically: true, encoding: .utf8)
        try (account + "\n").write(toFile: directory + "/accounts", atomically: true, encoding: .utf8)
        try "".write(toFile: directory + "/contacts", atomically: true, encoding: .utf8)
        process = try SpawnedProcess(Self.executable, ["-f", directory], log: directory + "/baresip.log")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, process?.isRunning == true {
            if connect(port: ctrlPort) { return }
            usleep(20_000)
        }
        stop()
        throw NSError(domain: "baresip", code: 1, userInfo: [NSLocalizedDescriptionKey: "baresip did not start: " + self.log()])
    }

    private func connect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        guard ok else { close(fd); return false }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        control = fd
        return true
    }

    /// Sends a command (`dial`, `accept`, `hangup`, `reginfo`, …).
    public func command(_ name: String, _ params: String? = nil) {
        var object: [String: Any] = ["command": name, "token": name]
        if let params { object["params"] = params }
        let json = try! JSONSerialization.data(withJSONObject: object)
        let frame = Array("\(json.count):".utf8) + Array(json) + Array(",".utf8)
        _ = frame.withUnsafeBytes { send(control, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads what ctrl_tcp sent since the last call (never blocks).
    public func poll() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(control, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            pending += buffer[0 ..< n]
        }
        while let colon = pending.firstIndex(of: UInt8(ascii: ":")),
              let length = Int(String(decoding: pending[..<colon], as: UTF8.self)),
              pending.count >= colon + 1 + length + 1 {
            let body = Data(pending[(colon + 1) ..< (colon + 1 + length)])
            pending.removeFirst(colon + 1 + length + 1)
            if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] { messages.append(object) }
        }
    }

    /// Events of `type` received so far (CALL_ESTABLISHED, CALL_CLOSED, CALL_INCOMING, …).
    public func events(_ type: String) -> [[String: Any]] {
        messages.filter { ($0["event"] as? Bool) == true && ($0["type"] as? String) == type }
    }

    public func responses(_ token: String) -> [[String: Any]] {
        messages.filter { ($0["response"] as? Bool) == true && ($0["token"] as? String) == token }
    }

    /// What baresip heard, decoded: with `recordCalls`, its sndfile module's dump of the last
    /// call's decoder output (`dump-<call>-dec.wav`), nil before one was written.
    public var recording: String? {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/dumps")) ?? []
        return files.filter { $0.hasSuffix("-dec.wav") }.sorted().last.map { directory + "/dumps/" + $0 }
    }

    /// Registered at its registrar: its log shows the registrar's 200 (the REGISTER_OK event may
    /// come before the control connection is up).
    public var registered: Bool { log().contains("} 200 OK") }

    /// The DTMF digits received in calls so far, in order (CALL_DTMF_START events).
    public var receivedDigits: String { events("CALL_DTMF_START").compactMap { $0["param"] as? String }.joined() }

    public func log() -> String {
        String(((try? String(contentsOfFile: directory + "/baresip.log", encoding: .utf8)) ?? "").suffix(3000))
    }

    public func stop(graceful: Bool = false) {
        if control >= 0 { close(control); control = -1 }
        // SIGKILL unless asked to end gracefully: on SIGTERM baresip first unregisters and may
        // wait for a registrar the test already stopped. Graceful when its recording is wanted
        // (the sndfile dump's WAV header is written when the file is closed).
        process?.stop(grace: graceful ? 3 : 0)
    }
}

/// A kamailio started from the repo's test configuration (board/sip-test/kamailio.cfg: users
/// and passwords in the file, no database) on a free loopback UDP port; stopped by its PID.
public final class Kamailio {
    public static let executable = "/usr/sbin/kamailio"
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// Spawned without Foundation's `Process` (`SpawnedProcess` says why).
    public private(set) var process: SpawnedProcess?
    public let port: Int
    public let directory: String

    /// The TLS listener's port, when started with a certificate.
    public let tlsPort: Int?

    /// `tls`: also listen for TLS on `tlsPort` with this certificate and key (made at test time
    /// by `TestCertificates`), as the configuration's WITH_TLS part describes.
    public init(tls: (certificate: String, key: String)? = nil) throws {
        port = try freeLoopbackPort()
        tlsPort = tls == nil ? nil : try freeLoopbackPort()
        directory = TestScratch.directory("roomsip-kamailio") + "/\(port)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = ["-f", packageRoot + "/board/sip-test/kamailio.cfg", "-DD", "-E", "-n", "1", "-m", "16", "-M", "8",
                         "-Y", directory, "-l", "udp:127.0.0.1:\(port)"]
        if let tls, let tlsPort {
            arguments += ["-l", "tls:127.0.0.1:\(tlsPort)", "-A", "WITH_TLS",
                          "-A", "TLS_CERTIFICATE=\"\(tls.certificate)\"", "-A", "TLS_PRIVATE_KEY=\"\(tls.key)\""]
        }
        process = try SpawnedProcess(Self.executable, arguments, log: directory + "/kamailio.log")
        // Listening once the port shows in /proc/net/udp (bound by kamailio's main process), and
        // the TLS port in /proc/net/tcp. Read to the end: String(contentsOfFile:) stopped after
        // the first chunk of this size-0 file.
        func listed(_ file: String, _ port: Int) -> Bool {
            guard let data = FileHandle(forReadingAtPath: file)?.readDataToEndOfFile() else { return false }
            let needle = "0100007F" + String(format: ":%04X ", port)
            return String(decoding: data, as: UTF8.self).split(separator: "\n").contains(where: { $0.contains(needle) })
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if listed("/proc/net/udp", port), tlsPort.map({ listed("/proc/net/tcp", $0) }) ?? true { return }
            if process?.isRunning != true { break }
            usleep(20_000)
        }
        stop()
        throw NSError(domain: "kamailio", code: 1, userInfo: [NSLocalizedDescriptionKey: "kamailio did not start: " + self.log()])
    }

    /// The end of kamailio's log, without the tls module's start-up report (a screenful that
    /// would push out what a failing test needs).
    public func log() -> String {
        let text = (try? String(contentsOfFile: directory + "/kamailio.log", encoding: .utf8)) ?? ""
        return String(text.split(separator: "\n").filter { !$0.contains("tls_domain.c") }.joined(separator: "\n").suffix(2000))
    }

    public func stop() {
        process?.stop()
    }
}
