import Foundation
import RoomSystem
import RoomTestSupport
import XCTest
@testable import RoomSIP

enum SocketAddressForTests {
    static func loopback(_ port: Int) throws -> SocketAddress { try SocketAddress(ip: "127.0.0.1", port: UInt16(port)) }
}

/// A kamailio started from the repo's test configuration (board/sip-test/kamailio.cfg: users
/// and passwords in the file, no database) on a free loopback UDP port; stopped by its PID.
final class Kamailio {
    static let executable = "/usr/sbin/kamailio"
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    let process = Process()
    let port: Int
    let directory: String

    init() throws {
        port = try freeLoopbackPort()
        directory = TestScratch.directory("roomsip-kamailio") + "/\(port)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = ["-f", packageRoot + "/board/sip-test/kamailio.cfg", "-DD", "-E", "-n", "1", "-m", "16", "-M", "8",
                             "-Y", directory, "-l", "udp:127.0.0.1:\(port)"]
        _ = FileManager.default.createFile(atPath: directory + "/kamailio.log", contents: nil)
        let log = FileHandle(forWritingAtPath: directory + "/kamailio.log")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        // Listening once the port shows in /proc/net/udp (bound by kamailio's main process). Read
        // to the end: String(contentsOfFile:) stopped after the first chunk of this size-0 file.
        let needle = String(format: ":%04X ", port)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let data = FileHandle(forReadingAtPath: "/proc/net/udp")?.readDataToEndOfFile(),
               case let table = String(decoding: data, as: UTF8.self), table.split(separator: "\n").contains(where: { $0.contains("0100007F" + needle) }) { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        stop()
        throw NSError(domain: "kamailio", code: 1, userInfo: [NSLocalizedDescriptionKey: "kamailio did not start: " + self.log()])
    }

    func log() -> String {
        String(((try? String(contentsOfFile: directory + "/kamailio.log", encoding: .utf8)) ?? "").suffix(2000))
    }

    func stop() {
        stopProcess(process, signal: SIGTERM)
    }
}

/// Registration against a real registrar with digest authentication (issue 29): the right
/// password registers and is refreshed before it expires, a wrong one fails clearly after one
/// answered challenge, and unregistering takes the binding off.
final class KamailioRegistrationTests: XCTestCase {
    private var kamailio: Kamailio!

    override func setUpWithError() throws {
        guard Kamailio.isInstalled else {
            throw XCTSkip("kamailio is not installed (apt-get install kamailio; scripts/setup installs it)")
        }
        kamailio = try Kamailio()
    }

    override func tearDown() {
        kamailio?.stop()
    }

    private func account(password: String, expires: Int = 60) throws -> SIPAccount {
        try SIPAccount(registrar: SocketAddressForTests.loopback(kamailio.port), domain: "127.0.0.1",
                       user: "room", password: password, expires: expires)
    }

    func testRightPasswordRegistersAndUnregisters() throws {
        let loop = try EventLoop()
        let ua = try SIPUserAgent(loop: loop, account: account(password: "room-secret"))
        defer { ua.close() }
        var states: [SIPRegistrationState] = []
        ua.onRegistrationChange = { states.append($0) }
        ua.register()
        let registered = try run(loop, seconds: 5) { if case .registered = ua.registrationState { true } else { false } }
        XCTAssertTrue(registered, "state \(ua.registrationState), kamailio log:\n\(kamailio.log())")
        XCTAssertEqual(ua.registrationState, .registered(expires: 60))
        XCTAssertEqual(states.first, .registering)
        XCTAssertEqual(ua.registersSent, 2, "one REGISTER, one answering the 401 challenge")

        ua.unregister()
        XCTAssertTrue(try run(loop, seconds: 5) { ua.registrationState == .unregistered }, "state \(ua.registrationState)")
        XCTAssertEqual(ua.datagramsDropped, 0)
    }

    func testWrongPasswordFailsClearlyAfterOneAnsweredChallenge() throws {
        let loop = try EventLoop()
        let ua = try SIPUserAgent(loop: loop, account: account(password: "not-the-password"))
        defer { ua.close() }
        ua.register()
        let failed = try run(loop, seconds: 5) { if case .failed = ua.registrationState { true } else { false } }
        XCTAssertTrue(failed, "state \(ua.registrationState)")
        guard case .failed(let failure) = ua.registrationState else { return }
        XCTAssertEqual(failure.statusCode, 401)
        XCTAssertTrue(failure.reason.contains("wrong user or password"), failure.reason)
        XCTAssertFalse(failure.willRetry)
        XCTAssertEqual(ua.registersSent, 2, "no third try with credentials the registrar refused")
    }

    /// kamailio.cfg allows 4 s registrations (min_expires 4): the agent must refresh half-way,
    /// so after 5 s it has been accepted at least twice and never left `registered`.
    func testRefreshesBeforeExpiry() throws {
        let loop = try EventLoop()
        let ua = try SIPUserAgent(loop: loop, account: account(password: "room-secret", expires: 4))
        defer { ua.close() }
        var states: [SIPRegistrationState] = []
        ua.onRegistrationChange = { states.append($0) }
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 5) { ua.registrationsAccepted >= 1 }, "state \(ua.registrationState)")
        XCTAssertEqual(ua.registrationState, .registered(expires: 4))
        XCTAssertFalse(try run(loop, seconds: 5) { if case .registered = ua.registrationState { false } else { true } },
                       "left registered: \(ua.registrationState)")
        XCTAssertGreaterThanOrEqual(ua.registrationsAccepted, 2, "refreshed at least once in 5 s")
        XCTAssertEqual(states, [.registering, .registered(expires: 4)])
    }
}
