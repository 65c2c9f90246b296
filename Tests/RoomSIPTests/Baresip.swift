import Foundation
import Glibc
import RoomTestSupport

/// baresip as a far end, started from board/sip-test/baresip/ (its config with free ports, an
/// account of the test's) and driven through its ctrl_tcp module: netstring-framed JSON
/// commands in, responses and events (CALL_ESTABLISHED, CALL_CLOSED, …) out. Stopped by PID.
final class Baresip {
    static let executable = "/usr/bin/baresip"
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    let process = Process()
    let directory: String
    let sipPort: Int
    private var control: Int32 = -1
    private var pending: [UInt8] = []
    /// Every event and response received, in order.
    private(set) var messages: [[String: Any]] = []

    /// `account` is the accounts-file line (`<sip:far@127.0.0.1:PORT>;auth_pass=…`).
    init(account: String) throws {
        sipPort = try freeLoopbackPort()
        let ctrlPort = try freeLoopbackPort()
        directory = TestScratch.directory("roomsip-baresip") + "/\(sipPort)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let template = try String(contentsOfFile: packageRoot + "/board/sip-test/baresip/config", encoding: .utf8)
        let config = template.replacingOccurrences(of: "@SIP_PORT@", with: "\(sipPort)")
            .replacingOccurrences(of: "@OUT_DIR@", with: directory)
            + "module_app\t\tctrl_tcp.so\nctrl_tcp_listen\t\t127.0.0.1:\(ctrlPort)\n"
        try config.write(toFile: directory + "/config", atomically: true, encoding: .utf8)
        try (account + "\n").write(toFile: directory + "/accounts", atomically: true, encoding: .utf8)
        try "".write(toFile: directory + "/contacts", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = ["-f", directory]
        _ = FileManager.default.createFile(atPath: directory + "/baresip.log", contents: nil)
        let log = FileHandle(forWritingAtPath: directory + "/baresip.log")
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, process.isRunning {
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
    func command(_ name: String, _ params: String? = nil) {
        var object: [String: Any] = ["command": name, "token": name]
        if let params { object["params"] = params }
        let json = try! JSONSerialization.data(withJSONObject: object)
        let frame = Array("\(json.count):".utf8) + Array(json) + Array(",".utf8)
        _ = frame.withUnsafeBytes { send(control, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads what ctrl_tcp sent since the last call (never blocks).
    func poll() {
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
    func events(_ type: String) -> [[String: Any]] {
        messages.filter { ($0["event"] as? Bool) == true && ($0["type"] as? String) == type }
    }

    func responses(_ token: String) -> [[String: Any]] {
        messages.filter { ($0["response"] as? Bool) == true && ($0["token"] as? String) == token }
    }

    func log() -> String {
        String(((try? String(contentsOfFile: directory + "/baresip.log", encoding: .utf8)) ?? "").suffix(3000))
    }

    func stop() {
        if control >= 0 { close(control); control = -1 }
        // SIGKILL: on SIGTERM baresip first unregisters and may wait for a registrar that the
        // test already stopped; nothing of its state is needed afterwards.
        stopProcess(process, signal: SIGKILL)
    }
}

/// Stops a child by its PID and reaps it with waitpid (at most 5 s). Not Process.waitUntilExit:
/// with an EventLoop alive in the test process, Foundation did not notice a child's exit and
/// the wait never returned (seen with baresip in BaresipCallTests' class tearDown).
func stopProcess(_ process: Process, signal: Int32) {
    guard process.isRunning else { return }
    let pid = process.processIdentifier
    kill(pid, signal)
    let deadline = Date().addingTimeInterval(5)
    while Date() < deadline {
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid || r < 0 { return }
        usleep(10_000)
    }
    kill(pid, SIGKILL)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
}
