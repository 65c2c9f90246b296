import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// The reconnect grace (docs/protocol.md, "Keepalive and dead peers"): a participant whose
/// connection is lost keeps its seat, unannounced, for `reconnectGraceMs`; a reconnect of the
/// same user within it takes the seat back silently; otherwise the others see
/// `participant_left {reason: "timeout"}` when it runs out. No timing is asserted tighter
/// than "before the grace" against a grace several times longer than the loop needs.
final class RoomServerGraceTests: XCTestCase {
    fileprivate func leftOrJoined(_ c: TestClient, after start: Int) -> [SignalMessage.Body] {
        c.messages[start...].map(\.body).filter {
            switch $0 {
            case .participantLeft, .participantJoined: true
            default: false
            }
        }
    }

    func testLostConnectionIsAnnouncedOnlyAfterTheGrace() throws {
        let h = try ServerHarness(reconnectGraceMs: 1500) { $0.tickIntervalMs = 50 }
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", role: .streamer, publish: true, bind: false)
        let bobID = b.id
        XCTAssertTrue(h.run { h.server.connectionCount == 2 })
        b.connection.close()
        // The server has noticed (its connection is gone), and the room still holds Bob.
        XCTAssertTrue(h.run { h.server.connectionCount == 1 })
        h.settle(seconds: 0.2)
        XCTAssertNil(a.left(bobID), "announced before the grace ran out")
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.participants.map(\.id), [a.id, bobID])
        // After it: left, reason timeout, and the seat is gone.
        XCTAssertTrue(h.run(seconds: 10) { a.left(bobID) != nil })
        XCTAssertEqual(a.left(bobID), .timeout)
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.participants.map(\.id), [a.id])
        XCTAssertEqual(h.server.participantCount, 1)
    }

    func testReconnectWithinTheGraceResumesTheSeatSilently() throws {
        let h = try ServerHarness(policy: .moderated, speakerLimit: 1, reconnectGraceMs: 60_000) { $0.tickIntervalMs = 50 }
        let mod = try h.join("mod", publish: true, moderate: true)
        let talker = try h.join("talker", role: .streamer, publish: true, bind: false)
        XCTAssertTrue(h.run { h.server.room(named: "lobby", app: ServerHarness.app)?.participant(talker.id)?.stage == .handRaised })
        let approve = mod.request(.approve(participantID: talker.id))
        XCTAssertTrue(h.run { mod.gotOK(approve) })
        let waiting = try h.join("waiting", role: .streamer, publish: true, bind: false)   // queued: stage full
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.handQueue, [waiting.id])
        let oldID = talker.id, oldSSRC = talker.welcome!.ssrc
        h.settle()
        let seen = mod.messages.count

        talker.connection.close()
        XCTAssertTrue(h.run { h.server.connectionCount == 2 })
        // A new connection of the same user, naming its old id, within the grace.
        let back = try h.connect()
        back.send(.hello(.init(client: "test/1", token: h.token(user: "talker", publish: true), role: .streamer,
                               previousParticipantID: oldID)))
        XCTAssertTrue(h.run { back.welcome != nil })
        let w = try XCTUnwrap(back.welcome)
        XCTAssertEqual(w.participantID, oldID, "the same seat")
        XCTAssertEqual(w.ssrc, oldSSRC)
        XCTAssertNotEqual(w.mediaKey, talker.welcome!.mediaKey, "the lost connection's media key dies with it")
        XCTAssertEqual(w.participants.first { $0.id == oldID }?.stage, .onStage, "still on stage, no new approval")
        h.settle(seconds: 0.3)
        XCTAssertEqual(leftOrJoined(mod, after: seen), [], "the others saw nothing")
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.handQueue, [waiting.id], "the queue is as it was")
        XCTAssertEqual(h.server.statistics.resumes, 1)

        // Media flows again once the new connection binds.
        try h.bind(back)
        mod.datagrams.removeAll()
        let sent = try back.sendRTP()
        XCTAssertTrue(h.run { mod.datagrams.contains(sent) })
        // And it stays: no timeout later either.
        h.settle(seconds: 0.3)
        XCTAssertNil(mod.left(oldID))
    }

    func testAfterTheGraceAReconnectIsANewParticipant() throws {
        let h = try ServerHarness(reconnectGraceMs: 300) { $0.tickIntervalMs = 50 }
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", bind: false)
        let oldID = b.id
        b.connection.close()
        XCTAssertTrue(h.run(seconds: 10) { a.left(oldID) == .timeout })
        let again = try h.join("bob", bind: false)
        XCTAssertNotEqual(again.id, oldID)
        XCTAssertTrue(h.run { a.has { if case let .participantJoined(p) = $0 { p.id == again.id } else { false } } })
        XCTAssertEqual(h.server.statistics.resumes, 0)
    }

    func testMediaOfALostConnectionIsNotForwarded() throws {
        let h = try ServerHarness(reconnectGraceMs: 60_000) { $0.tickIntervalMs = 50 }
        let listener = try h.join("listener")
        let talker = try h.join("talker", role: .streamer, publish: true)
        listener.datagrams.removeAll()
        talker.connection.close()
        XCTAssertTrue(h.run { h.server.connectionCount == 1 })
        _ = try talker.sendRTP()
        h.settle(seconds: 0.3)
        XCTAssertEqual(listener.datagrams, [])
    }

    func testGraceZeroAnnouncesAtOnce() throws {
        let h = try ServerHarness(reconnectGraceMs: 0)
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", bind: false)
        b.connection.close()
        XCTAssertTrue(h.run { a.left(b.id) == .timeout })
    }
}

extension RoomServerGraceTests {
    /// A restarted appliance has forgotten its id: the same user still gets the seat back.
    func testRestartedClientWithoutPreviousIDResumes() throws {
        let h = try ServerHarness(reconnectGraceMs: 60_000) { $0.tickIntervalMs = 50 }
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", bind: false)
        let oldID = b.id
        let seen = a.messages.count
        b.connection.close()
        XCTAssertTrue(h.run { h.server.connectionCount == 1 })
        let again = try h.join("bob", bind: false)
        XCTAssertEqual(again.id, oldID)
        h.settle(seconds: 0.2)
        XCTAssertEqual(leftOrJoined(a, after: seen), [])
    }

    /// New grants change what the others see: no silent resume; the old seat is replaced.
    func testDifferentGrantsJoinTheOrdinaryWay() throws {
        let h = try ServerHarness(reconnectGraceMs: 60_000) { $0.tickIntervalMs = 50 }
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", bind: false)
        let oldID = b.id
        b.connection.close()
        XCTAssertTrue(h.run { h.server.connectionCount == 1 })
        let again = try h.join("bob", publish: true, bind: false)
        XCTAssertNotEqual(again.id, oldID)
        XCTAssertTrue(h.run { a.left(oldID) == .replaced })
        XCTAssertEqual(h.server.room(named: "lobby", app: ServerHarness.app)?.participants.map(\.id), [a.id, again.id])
    }
}

extension RoomServerGraceTests {
    /// The client saw its connection die before the server did (no FIN after a network
    /// change): its reconnect naming the seat takes it over silently, and the stale connection
    /// is closed. Another device of the same user (no previous id) still replaces, announced.
    func testReconnectBeforeTheServerNoticedTheLossResumesToo() throws {
        let h = try ServerHarness(reconnectGraceMs: 60_000) { $0.tickIntervalMs = 50 }
        let a = try h.join("alice", bind: false)
        let b = try h.join("bob", bind: false)
        let oldID = b.id
        let seen = a.messages.count
        let back = try h.connect()
        back.send(.hello(.init(client: "test/1", token: h.token(user: "bob"), role: .audience, previousParticipantID: oldID)))
        XCTAssertTrue(h.run { back.welcome != nil })
        XCTAssertEqual(back.welcome?.participantID, oldID)
        XCTAssertTrue(h.run { b.closed }, "the stale connection is closed")
        h.settle(seconds: 0.2)
        XCTAssertEqual(leftOrJoined(a, after: seen), [])
        XCTAssertEqual(h.server.connectionCount, 2)

        let other = try h.join("bob", bind: false)
        XCTAssertNotEqual(other.id, oldID)
        XCTAssertTrue(h.run { a.left(oldID) == .replaced })
        XCTAssertTrue(h.run { back.removed()?.0 == .replaced })
    }
}
