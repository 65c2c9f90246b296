import RoomProtocol
import RoomServerKit
import XCTest

/// Two applications on one server (two keys in `[keys]`, issue 27): a room is its tenant's and
/// its name's. Before, rooms and users were found by name and `sub` alone, and a token minted
/// with tenant B's key for tenant A's room name joined A's room, heard its media, kicked with a
/// moderate grant and evicted A's user by reusing its `sub`.
final class RoomServerTenantTests: XCTestCase {
    func testATokenOfAnotherApplicationReachesNothingOfThisOne() throws {
        let h = try ServerHarness()
        let alice = try h.join("alice", role: .streamer, publish: true, moderate: true)
        let bob = try h.join("bob")
        // Mallory holds the other application's key: same room name, Alice's `sub`, every grant.
        let mallory = try h.connect()
        let token = h.token(user: "alice", publish: true, moderate: true, keyID: "other",
                            secret: [UInt8](repeating: 9, count: 32), app: "another-app")
        mallory.send(.hello(.init(client: "test/1", token: token, role: .streamer)))
        XCTAssertTrue(h.run { mallory.welcome != nil || mallory.closed })
        let welcome = try XCTUnwrap(mallory.welcome, "another application's room of the same name is its own: \(mallory.messages)")
        XCTAssertEqual(welcome.participants.map(\.id), [mallory.id], "it sees nobody of this application")
        XCTAssertEqual(welcome.app, "another-app", "the welcome says whose room it is")
        XCTAssertEqual(alice.welcome?.app, ServerHarness.app)
        try h.bind(mallory)
        mallory.datagrams.removeAll()

        // It cannot evict Alice (same sub), kick Bob, or hear Alice.
        let kick = mallory.request(.kick(participantID: bob.id, reason: nil))
        XCTAssertTrue(h.run { mallory.lastError()?.requestID == kick })
        _ = try alice.sendRTP()
        XCTAssertTrue(h.run { !bob.datagrams.isEmpty })
        // Each application's figures are its own.
        let tenants = h.server.tenantStatistics
        XCTAssertEqual(tenants[ServerHarness.app]?.joins, 2)
        XCTAssertEqual(tenants[ServerHarness.app]?.participants, 2)
        XCTAssertEqual(tenants[ServerHarness.app]?.packetsForwarded, 1)
        XCTAssertEqual(tenants["another-app"]?.joins, 1)
        XCTAssertEqual(tenants["another-app"]?.roomsOpened, 1)
        XCTAssertEqual(tenants["another-app"]?.packetsForwarded, 0)
        h.settle()
        XCTAssertTrue(mallory.datagrams.isEmpty, "no media of the other tenant's room")
        XCTAssertNil(alice.removed(), "Alice was not replaced")
        XCTAssertNil(bob.removed(), "Bob was not kicked")
        XCTAssertFalse(alice.closed || bob.closed)
        XCTAssertFalse(alice.has { if case let .participantJoined(info) = $0 { info.id == mallory.id } else { false } },
                       "Mallory did not join Alice's room")
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.participants.map(\.id), [alice.id, bob.id])
        XCTAssertEqual(h.server.room(named: "lobby", app: "another-app")?.participants.map(\.id), [mallory.id])
        XCTAssertEqual(h.server.roomKeys, [RoomKey(app: "another-app", name: "lobby"), RoomKey(app: ServerHarness.app, name: "lobby")])

        // A refreshed token must be of the room's own application too.
        let refresh = mallory.request(.refreshToken(token: h.token(user: "alice")))
        XCTAssertTrue(h.run { mallory.lastError()?.requestID == refresh })
        XCTAssertEqual(mallory.lastError()?.code, .wrongRoom)
    }
}
