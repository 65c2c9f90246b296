import Glibc
import RoomSystem
import RoomTestSupport
import XCTest

/// A bound Unix datagram socket standing in for systemd's notify socket.
private final class FakeNotifySocket {
    let fd: Int32
    init(name: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 } else { bytes.append(0) }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + bytes.count)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        if rc != 0 { throw SystemError.errno("bind \(name)") }
    }
    deinit { close(fd) }

    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<200 {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n >= 0 { return String(decoding: buffer[0..<n], as: UTF8.self) }
            sleepMilliseconds(5)
        }
        return nil
    }
}

final class SignalAndNotifyTests: XCTestCase {
    func testSignalFDDeliversSIGHUPAsALoopEvent() throws {
        // Blocked in this thread only, and only for this test: raise() directs the signal at
        // this thread, where it stays pending for the signalfd instead of killing the process.
        let previous = SignalMask.block([SIGHUP])
        defer { previous.restore() }
        let loop = try EventLoop()
        var received: [Int32] = []
        let source = try SignalSource(signals: [SIGHUP], loop: loop, block: false) { received.append($0) }
        XCTAssertEqual(raise(SIGHUP), 0)
        XCTAssertTrue(try runLoop(loop) { !received.isEmpty })
        XCTAssertEqual(received, [SIGHUP])
        source.close()
        var pending = sigset_t()
        sigpending(&pending)
        XCTAssertEqual(sigismember(&pending, SIGHUP), 0, "consumed, so restoring the mask is safe")
    }

    func testNotifierSendsReadyWatchdogAndStatusToAPathSocket() throws {
        let tmp = makeTemporaryDirectory("notify")
        defer { tmp.remove() }
        let path = tmp.path + "/notify"
        let fake = try FakeNotifySocket(name: path)
        let notifier = SystemdNotifier(socketPath: path)
        XCTAssertTrue(notifier.isEnabled)
        XCTAssertTrue(try notifier.ready())
        XCTAssertEqual(fake.receive(), "READY=1")
        try notifier.watchdog()
        XCTAssertEqual(fake.receive(), "WATCHDOG=1")
        try notifier.status("in room lobby\nsecond line")
        XCTAssertEqual(fake.receive(), "STATUS=in room lobby second line")
        try notifier.ready(status: "joined")
        XCTAssertEqual(fake.receive(), "READY=1\nSTATUS=joined")
    }

    func testNotifierReadsNotifySocketFromTheEnvironmentAndSupportsAbstractNames() throws {
        let name = "@roomd-notify-test-\(getpid())"
        let fake = try FakeNotifySocket(name: name)
        let saved = Environment.get("NOTIFY_SOCKET")
        defer { if let saved { setenv("NOTIFY_SOCKET", saved, 1) } else { unsetenv("NOTIFY_SOCKET") } }
        setenv("NOTIFY_SOCKET", name, 1)
        let notifier = SystemdNotifier()
        XCTAssertEqual(notifier.destination?.host, name)
        XCTAssertTrue(try notifier.ready())
        XCTAssertEqual(fake.receive(), "READY=1")

        unsetenv("NOTIFY_SOCKET")
        let off = SystemdNotifier()
        XCTAssertFalse(off.isEnabled)
        XCTAssertFalse(try off.ready(), "no-op without NOTIFY_SOCKET")
        XCTAssertNotNil(SystemdNotifier(socketPath: "vsock:2:1234").configurationError)
    }

    func testNotifierToAMissingSocketThrowsWithThePath() {
        let notifier = SystemdNotifier(socketPath: "/nonexistent/roomd-notify")
        XCTAssertThrowsError(try notifier.ready()) { XCTAssertTrue("\($0)".contains("/nonexistent/roomd-notify"), "\($0)") }
    }

    func testWatchdogInterval() {
        XCTAssertEqual(SystemdNotifier.watchdogInterval(usec: "20000000", pid: nil), .seconds(10))
        XCTAssertEqual(SystemdNotifier.watchdogInterval(usec: "20000000", pid: "\(getpid())"), .seconds(10))
        XCTAssertNil(SystemdNotifier.watchdogInterval(usec: "20000000", pid: "1"))
        XCTAssertNil(SystemdNotifier.watchdogInterval(usec: nil, pid: nil))
        XCTAssertNil(SystemdNotifier.watchdogInterval(usec: "0", pid: nil))
    }
}
