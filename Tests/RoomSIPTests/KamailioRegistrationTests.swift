import Foundation
import RoomSystem
import RoomTestSupport
import XCTest
@testable import RoomSIP

enum SocketAddressForTests {
    static func loopback(_ port: Int) throws -> SocketAddress { try SocketAddress(ip: "127.0.0.1", port: UInt16(port)) }
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
