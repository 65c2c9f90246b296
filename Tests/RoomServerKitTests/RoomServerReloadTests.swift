import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// `RoomServer.reload` (SIGHUP): keys, leeway and room settings change without closing a room;
/// the sockets stay as bound.
final class RoomServerReloadTests: XCTestCase {
    func testNewKeysApplyToTheNextHelloAndRoomsKeepTheirSettings() throws {
        let h = try ServerHarness(speakerLimit: 6)
        let a = try h.join("alice", bind: false)
        let newSecret = [UInt8](repeating: 5, count: 32)
        var next = h.server.configuration
        next.keys = ["k2": RoomServerKey(keyID: "k2", appID: ServerHarness.app, secret: newSecret)]
        next.room.speakerLimit = 2
        next.maxParticipants = 3
        next.plainListen = [.ipv4Loopback(port: 1)]
        let report = h.server.reload(next)
        XCTAssertEqual(report.applied, ["keys", "rooms.speaker_limit", "rooms.max_participants"])
        XCTAssertEqual(report.restartNeeded, ["server.plain_listen"])
        XCTAssertEqual(h.server.configuration.plainListen, [.ipv4Loopback(port: 0)], "the bound listeners stay")

        // A token of the new key joins the running room; one of the removed key is refused.
        let b = try h.connect()
        b.send(.hello(.init(client: "test/1", token: h.token(user: "bob", keyID: "k2", secret: newSecret), role: .audience)))
        XCTAssertTrue(h.run { b.welcome != nil })
        XCTAssertEqual(b.welcome?.speakerLimit, 6, "the open room keeps the settings it was opened with")
        let c = try h.connect()
        c.send(.hello(.init(client: "test/1", token: h.token(user: "carol"), role: .audience)))
        XCTAssertTrue(h.run { c.closed })
        XCTAssertEqual(c.lastError()?.code, .unknownKey)
        XCTAssertFalse(a.closed, "participants already in keep their seats")

        // A room opened from now on takes the new settings.
        let d = try h.connect()
        d.send(.hello(.init(client: "test/1", token: h.token(room: "other", user: "dave", keyID: "k2", secret: newSecret),
                            role: .audience)))
        XCTAssertTrue(h.run { d.welcome != nil })
        XCTAssertEqual(d.welcome?.speakerLimit, 2)
    }

    /// Switching media encryption needs a restart: a room half encrypted would be a room some
    /// cannot hear (and a plain half anyone on the path can).
    func testMediaEncryptionNeedsARestart() throws {
        let h = try ServerHarness()
        var next = h.server.configuration
        next.srtp = false
        let report = h.server.reload(next)
        XCTAssertEqual(report.restartNeeded, ["media.srtp"])
        XCTAssertTrue(h.server.configuration.srtp)
        let a = try h.join("alice", bind: false)
        XCTAssertNotNil(a.welcome?.mediaEncryption)
    }
}
