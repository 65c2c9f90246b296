import RoomServerKit
import XCTest

/// Joining, state sync, replacement, leaving, tokens, reconnects, messages and attributes.
final class RoomLifecycleTests: XCTestCase {
    func testNewcomerGetsStateSyncAndOthersGetJoined() {
        var room = makeRoom(.open, attributes: ["topic": "standup"])
        room.add(1, role: .streamer)
        room.must(.setAttribute(by: 1, key: "agenda", value: "a, b"))
        let e = room.add(2)
        let mine = events(e, for: 2)
        guard case .stateSync(let sync)? = mine.first else { return XCTFail("no state sync: \(mine)") }
        XCTAssertEqual(mine.count, 1, "the newcomer is not told about its own join")
        XCTAssertEqual(sync.you, 2)
        XCTAssertEqual(sync.policy, .open)
        XCTAssertEqual(sync.speakerLimit, 3)
        XCTAssertEqual(sync.participants.map(\.id), [1, 2])
        XCTAssertEqual(sync.participants.map(\.stage), [.onStage, .off])
        XCTAssertEqual(sync.attributes, [RoomAttribute(key: "agenda", value: "a, b"),
                                         RoomAttribute(key: "topic", value: "standup")])
        XCTAssertEqual(events(e, for: 1), [.participantJoined(room.participant(2)!)])
    }

    func testSameUserReplacesOldParticipant() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, user: "alice", role: .streamer)
        room.add(2, user: "bob", role: .streamer)
        XCTAssertEqual(room.stage(2), .handRaised)
        let e = room.add(3, user: "alice")
        XCTAssertNil(room.participant(1))
        XCTAssertEqual(room.participant(userID: "alice")?.id, 3)
        XCTAssertEqual(events(e, for: 1), [.removed(reason: .replaced)])
        XCTAssertEqual(closes(e).map(\.0), [1])
        XCTAssertEqual(closes(e).map(\.1), [.replaced])
        let left = sends(e, named: "participantLeft")
        XCTAssertEqual(left.first?.0, .participantLeft(1, reason: .replaced))
        XCTAssertEqual(left.first?.1, [2])
        // The new session is a fresh audience member; the freed slot goes to the queue.
        XCTAssertEqual(room.stage(3), .off)
        XCTAssertEqual(room.stage(2), .onStage)
        XCTAssertEqual(room.count, 2)
    }

    func testLeaveAndTimeoutTellOthers() {
        var room = makeRoom()
        room.add(1)
        room.add(2)
        room.add(3)
        var e = room.must(.leave(1))
        XCTAssertEqual(sends(e, named: "participantLeft").first?.0, .participantLeft(1, reason: .left))
        XCTAssertEqual(sends(e, named: "participantLeft").first?.1, [2, 3])
        XCTAssertEqual(closes(e).map(\.1), [.left])
        XCTAssertTrue(events(e, for: 1).isEmpty, "a participant leaving on its own is not told")
        e = room.must(.connectionLost(2))
        XCTAssertEqual(sends(e, named: "participantLeft").first?.0, .participantLeft(2, reason: .timeout))
        XCTAssertEqual(room.participants.map(\.id), [3])
    }

    func testTokenTimeline() {
        var room = makeRoom()
        room.add(1, expires: 100_000)
        room.add(2)
        XCTAssertEqual(room.tick(now: 39_999), [])
        var e = room.tick(now: 40_000)
        XCTAssertEqual(e, [.send(.tokenWillExpire(expiresAt: 100_000), to: [1])])
        XCTAssertEqual(room.tick(now: 40_250), [], "the warning is sent once")
        XCTAssertEqual(room.tick(now: 99_999), [])
        e = room.tick(now: 100_000)
        XCTAssertNil(room.participant(1))
        XCTAssertEqual(events(e, for: 1), [.removed(reason: .tokenExpired)])
        XCTAssertEqual(closes(e).map(\.1), [.tokenExpired])
        XCTAssertEqual(sends(e, named: "participantLeft").first?.0, .participantLeft(1, reason: .tokenExpired))
    }

    func testRefreshTokenResetsTimeline() {
        var room = makeRoom()
        room.add(1, expires: 100_000)
        XCTAssertEqual(room.tick(now: 50_000).count, 1)
        XCTAssertEqual(room.must(.refreshToken(1, expiresAt: 200_000), now: 60_000), [])
        XCTAssertEqual(room.tick(now: 100_000), [], "the old expiry no longer applies")
        XCTAssertEqual(room.tick(now: 140_000), [.send(.tokenWillExpire(expiresAt: 200_000), to: [1])])
        XCTAssertEqual(room.tick(now: 199_000), [])
        XCTAssertNotNil(room.participant(1))
        XCTAssertEqual(closes(room.tick(now: 200_000)).map(\.1), [.tokenExpired])
    }

    func testTokenExpiryOfSpeakerPromotesQueue() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, role: .streamer, expires: 10_000)
        room.add(2, role: .streamer)
        XCTAssertEqual(room.stage(2), .handRaised)
        _ = room.tick(now: 10_000)
        XCTAssertEqual(room.stage(2), .onStage)
    }

    func testReconnectAfterTimeoutRestoresStageAndMute() {
        var room = makeRoom(.moderated, limit: 2)
        room.add(1, grants: .moderator)
        room.add(2, user: "bob")
        room.must(.invite(by: 1, target: 2))
        room.must(.acceptInvitation(2))
        room.must(.muteParticipant(by: 1, target: 2, hard: true))
        room.must(.connectionLost(2), now: 1_000)
        // Rejoins as audience, naming its previous id: gets the stage back without approval.
        room.add(7, user: "bob", previous: 2, now: 20_000)
        XCTAssertEqual(room.stage(7), .onStage)
        XCTAssertEqual(room.participant(7)?.hardMuted, true, "a reconnect does not escape a hard mute")
        XCTAssertEqual(room.participant(7)?.muted, true)
    }

    func testReconnectAfterGraceIsAFreshJoin() {
        var room = makeRoom(.open, limit: 2)
        room.add(2, user: "bob", role: .streamer)
        room.must(.connectionLost(2), now: 1_000)
        room.add(7, user: "bob", previous: 2, now: 21_001)
        XCTAssertEqual(room.stage(7), .off)
    }

    func testReconnectRecordIsPrunedByTick() {
        var room = makeRoom(.open, limit: 2)
        room.add(2, user: "bob", role: .streamer)
        room.must(.connectionLost(2), now: 1_000)
        _ = room.tick(now: 21_001)
        room.add(7, user: "bob", previous: 2, now: 21_001)
        XCTAssertEqual(room.stage(7), .off)
    }

    func testReconnectOfAnotherUserDoesNotRestore() {
        var room = makeRoom(.open, limit: 2)
        room.add(2, user: "bob", role: .streamer)
        room.must(.connectionLost(2), now: 1_000)
        room.add(7, user: "mallory", previous: 2, now: 2_000)
        XCTAssertEqual(room.stage(7), .off)
        // The record is still there for bob.
        room.add(8, user: "bob", previous: 2, now: 3_000)
        XCTAssertEqual(room.stage(8), .onStage)
    }

    func testVoluntaryLeaveIsNotRestored() {
        var room = makeRoom(.open, limit: 2)
        room.add(2, user: "bob", role: .streamer)
        room.must(.leave(2), now: 1_000)
        room.add(7, user: "bob", previous: 2, now: 2_000)
        XCTAssertEqual(room.stage(7), .off)
    }

    func testReconnectOnStageWhenFullQueuesOrAsks() {
        // Open: the slot was taken by the queue meanwhile → back in the queue.
        var open = makeRoom(.open, limit: 1)
        open.add(1, user: "alice", role: .streamer)
        open.add(2, user: "bob", role: .streamer)
        open.must(.connectionLost(1), now: 1_000)
        XCTAssertEqual(open.stage(2), .onStage)
        open.add(3, user: "alice", previous: 1, now: 2_000)
        XCTAssertEqual(open.stage(3), .handRaised)
        XCTAssertEqual(open.handQueue, [3])

        // Moderated: the slot was given away → a raised hand the moderators see.
        var mod = makeRoom(.moderated, limit: 1)
        mod.add(1, grants: .moderator)
        mod.add(2, user: "bob")
        mod.add(3, user: "carol")
        mod.must(.invite(by: 1, target: 2))
        mod.must(.acceptInvitation(2))
        mod.must(.connectionLost(2), now: 1_000)
        mod.must(.invite(by: 1, target: 3))
        mod.must(.acceptInvitation(3))
        let e = mod.add(4, user: "bob", previous: 2, now: 2_000)
        XCTAssertEqual(mod.stage(4), .handRaised)
        XCTAssertEqual(sends(e, named: "stageRequest").first?.1, [1])
    }

    func testReconnectBeforeTimeoutNoticedReplacesAndKeepsSlot() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, user: "alice", role: .streamer)
        room.add(2, user: "bob", role: .streamer)
        XCTAssertEqual(room.stage(2), .handRaised)
        // The old session is still present: it is replaced, and the slot is not given away.
        let e = room.add(3, user: "alice", previous: 1, now: 500)
        XCTAssertNil(room.participant(1))
        XCTAssertEqual(closes(e).map(\.1), [.replaced])
        XCTAssertEqual(room.stage(3), .onStage)
        XCTAssertEqual(room.stage(2), .handRaised)
        XCTAssertEqual(room.forwardedSpeakers, [3])
    }

    func testReconnectRestoresRaisedHand() {
        var room = makeRoom(.moderated, limit: 1)
        room.add(1, grants: .moderator)
        room.add(2, user: "bob")
        room.must(.raiseHand(2))
        room.must(.connectionLost(2), now: 1_000)
        XCTAssertEqual(room.handQueue, [])
        let e = room.add(5, user: "bob", previous: 2, now: 3_000)
        XCTAssertEqual(room.stage(5), .handRaised)
        XCTAssertEqual(sends(e, named: "stageRequest").first?.0, .stageRequest(5))
    }

    func testAppMessages() {
        var room = makeRoom()
        room.add(1)
        room.add(2)
        room.add(3)
        var e = room.must(.sendMessage(from: 1, to: nil, payload: [0x68, 0x69]))
        XCTAssertEqual(e, [.send(.message(from: 1, payload: [0x68, 0x69], broadcast: true), to: [2, 3])])
        e = room.must(.sendMessage(from: 3, to: 1, payload: [1]))
        XCTAssertEqual(e, [.send(.message(from: 3, payload: [1], broadcast: false), to: [1])])
        room.refuse(.sendMessage(from: 3, to: 99, payload: [1]), .unknownParticipant)
        room.refuse(.sendMessage(from: 99, to: 1, payload: [1]), .unknownParticipant)
    }

    func testAttributes() {
        var room = makeRoom()
        room.add(1)
        room.add(2)
        var e = room.must(.setAttribute(by: 1, key: "topic", value: "x"))
        XCTAssertEqual(e, [.send(.attributeChanged(key: "topic", value: "x"), to: [1, 2])])
        XCTAssertEqual(room.must(.setAttribute(by: 2, key: "topic", value: "x")), [], "no change, no event")
        e = room.must(.deleteAttribute(by: 2, key: "topic"))
        XCTAssertEqual(e, [.send(.attributeChanged(key: "topic", value: nil), to: [1, 2])])
        XCTAssertEqual(room.must(.deleteAttribute(by: 2, key: "topic")), [])
        XCTAssertEqual(room.attributes, [])
    }

    func testAttributeLimits() {
        var room = makeRoom()
        room.add(1)
        room.must(.setAttribute(by: 1, key: String(repeating: "k", count: 64), value: String(repeating: "v", count: 1024)))
        room.refuse(.setAttribute(by: 1, key: String(repeating: "k", count: 65), value: "v"), .attributeLimit)
        // Bytes, not characters: 22 × "é" (2 bytes each) + 21 ASCII = 65 bytes.
        room.refuse(.setAttribute(by: 1, key: String(repeating: "é", count: 22) + String(repeating: "a", count: 21), value: ""),
                    .attributeLimit)
        room.refuse(.setAttribute(by: 1, key: "k", value: String(repeating: "v", count: 1025)), .attributeLimit)
        room.refuse(.setAttribute(by: 1, key: "", value: "v"), .attributeLimit)
        for i in 1..<64 { room.must(.setAttribute(by: 1, key: "key\(i)", value: "\(i)")) }
        XCTAssertEqual(room.attributes.count, 64)
        room.refuse(.setAttribute(by: 1, key: "one-too-many", value: "v"), .attributeLimit, contains: "64")
        // Replacing an existing key is still fine when full.
        room.must(.setAttribute(by: 1, key: "key1", value: "new"))
        room.must(.setAttribute(by: nil, key: "key2", value: "server"))
    }
}
