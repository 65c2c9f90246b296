import RoomModel
import RoomServerKit
import XCTest

/// Moderated rooms and every moderator command.
final class RoomModerationTests: XCTestCase {
    /// Moderator 1, moderator 2, publishers 3 and 4, listener 5 (no publish grant).
    private func moderated(limit: Int = 2) -> Room {
        var room = makeRoom(.moderated, limit: limit)
        room.add(1, grants: .moderator)
        room.add(2, grants: .moderator)
        room.add(3)
        room.add(4)
        room.add(5, grants: .none)
        return room
    }

    func testRaiseHandAsksEveryModerator() {
        var room = moderated()
        let e = room.must(.raiseHand(3))
        XCTAssertEqual(room.stage(3), .handRaised)
        XCTAssertFalse(room.mayPublish(3))
        let requests = sends(e, named: "stageRequest")
        XCTAssertEqual(requests.count, 1)
        XCTAssertEqual(requests.first?.0, .stageRequest(3))
        XCTAssertEqual(requests.first?.1, [1, 2])
        XCTAssertEqual(room.handQueue, [3])
    }

    func testStreamerJoinWithoutModerateGrantBecomesRaisedHand() {
        var room = moderated()
        let e = room.add(6, role: .streamer)
        XCTAssertEqual(room.stage(6), .handRaised)
        XCTAssertEqual(sends(e, named: "stageRequest").first?.1, [1, 2])
        // The newcomer's own sync already shows the raised hand.
        guard case .stateSync(let sync)? = events(e, for: 6).first else { return XCTFail("no state sync first") }
        XCTAssertEqual(sync.participants.last?.stage, .handRaised)
    }

    func testModeratorJoinsStageDirectly() {
        var room = makeRoom(.moderated, limit: 1)
        room.add(1, grants: .moderator, role: .streamer)
        XCTAssertEqual(room.stage(1), .onStage)
        // Full: a second moderator waits with a raised hand and is promoted when a slot frees.
        room.add(2, grants: .moderator, role: .streamer)
        XCTAssertEqual(room.stage(2), .handRaised)
        room.add(3, role: .streamer)
        room.must(.stepDown(1))
        XCTAssertEqual(room.stage(2), .onStage, "moderators are auto-approved")
        room.must(.stepDown(2))
        XCTAssertEqual(room.stage(3), .handRaised, "a publisher in a moderated room waits for approval")
    }

    func testApprove() {
        var room = moderated()
        room.must(.raiseHand(3))
        let e = room.must(.approve(by: 1, target: 3))
        XCTAssertEqual(room.stage(3), .onStage)
        XCTAssertTrue(room.mayPublish(3))
        XCTAssertEqual(room.handQueue, [])
        XCTAssertEqual(forwarding(e).map(\.0), [3])
        room.refuse(.approve(by: 1, target: 3), .invalidState, contains: "on_stage")
        room.refuse(.approve(by: 1, target: 4), .invalidState, contains: "off")
    }

    func testApproveRespectsSpeakerLimit() {
        var room = moderated(limit: 1)
        room.must(.raiseHand(3))
        room.must(.raiseHand(4))
        room.must(.approve(by: 1, target: 3))
        room.refuse(.approve(by: 2, target: 4), .speakerLimit, contains: "1 of 1")
        XCTAssertEqual(room.stage(4), .handRaised)
        // No automatic promotion in moderated rooms when the slot frees.
        room.must(.demote(by: 1, target: 3))
        XCTAssertEqual(room.stage(4), .handRaised)
        room.must(.approve(by: 2, target: 4))
        XCTAssertEqual(room.stage(4), .onStage)
    }

    func testDeny() {
        var room = moderated()
        room.must(.raiseHand(3))
        let e = room.must(.deny(by: 2, target: 3))
        XCTAssertEqual(room.stage(3), .off)
        XCTAssertEqual(updates(e).map(\.1), [.off])
        XCTAssertEqual(room.handQueue, [])
        room.refuse(.deny(by: 2, target: 3), .invalidState)
    }

    func testInviteAcceptDecline() {
        var room = moderated(limit: 1)
        let e = room.must(.invite(by: 1, target: 3))
        XCTAssertEqual(room.stage(3), .invited)
        XCTAssertEqual(events(e, for: 3), [.participantUpdated(room.participant(3)!), .invited(by: 1)])
        XCTAssertEqual(events(e, for: 4), [.participantUpdated(room.participant(3)!)])
        XCTAssertFalse(room.mayPublish(3))
        room.refuse(.invite(by: 1, target: 3), .invalidState, contains: "invited")
        room.refuse(.raiseHand(3), .invalidState, contains: "invited")
        room.must(.acceptInvitation(3))
        XCTAssertEqual(room.stage(3), .onStage)
        XCTAssertTrue(room.mayPublish(3))
        room.refuse(.acceptInvitation(3), .invalidState)

        room.must(.invite(by: 1, target: 4))
        room.refuse(.acceptInvitation(4), .speakerLimit)
        XCTAssertEqual(room.stage(4), .invited)
        room.must(.declineInvitation(4))
        XCTAssertEqual(room.stage(4), .off)
        room.refuse(.declineInvitation(4), .invalidState)
    }

    func testInviteNeedsPublishGrant() {
        var room = moderated()
        room.refuse(.invite(by: 1, target: 5), .missingGrant)
    }

    func testDemote() {
        var room = moderated()
        room.must(.invite(by: 1, target: 3))
        room.must(.acceptInvitation(3))
        let e = room.must(.demote(by: 2, target: 3))
        XCTAssertEqual(room.stage(3), .off)
        XCTAssertEqual(room.participant(3)?.role, .audience)
        XCTAssertFalse(room.mayPublish(3))
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        room.refuse(.demote(by: 2, target: 3), .invalidState, contains: "off")
    }

    func testOpenRoomDemotePromotesQueue() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, grants: .moderator)
        room.add(2, role: .streamer)
        room.add(3, role: .streamer)
        room.must(.demote(by: 1, target: 2))
        XCTAssertEqual(room.stage(2), .off)
        XCTAssertEqual(room.stage(3), .onStage)
    }

    func testSoftMuteCanBeUndoneByTarget() {
        var room = moderated()
        room.must(.invite(by: 1, target: 3))
        room.must(.acceptInvitation(3))
        let e = room.must(.muteParticipant(by: 1, target: 3, hard: false))
        XCTAssertEqual(room.participant(3)?.muted, true)
        XCTAssertEqual(room.participant(3)?.hardMuted, false)
        XCTAssertFalse(room.mayPublish(3))
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        room.must(.setMute(3, muted: false))
        XCTAssertTrue(room.mayPublish(3))
    }

    func testHardMuteCannotBeUndoneByTarget() {
        var room = moderated()
        room.must(.invite(by: 1, target: 3))
        room.must(.acceptInvitation(3))
        room.must(.muteParticipant(by: 1, target: 3, hard: true))
        XCTAssertEqual(room.participant(3)?.hardMuted, true)
        room.refuse(.setMute(3, muted: false), .invalidState, contains: "hard-muted")
        XCTAssertFalse(room.mayPublish(3))
        // Lifting the hard mute leaves the participant muted until it unmutes itself.
        room.must(.muteParticipant(by: 2, target: 3, hard: false))
        XCTAssertEqual(room.participant(3)?.muted, true)
        XCTAssertEqual(room.participant(3)?.hardMuted, false)
        XCTAssertFalse(room.mayPublish(3))
        room.must(.setMute(3, muted: false))
        XCTAssertTrue(room.mayPublish(3))
    }

    func testKick() {
        var room = moderated()
        room.must(.invite(by: 1, target: 3))
        room.must(.acceptInvitation(3))
        let e = room.must(.kick(by: 1, target: 3))
        XCTAssertNil(room.participant(3))
        XCTAssertEqual(events(e, for: 3), [.removed(reason: .kicked)])
        XCTAssertEqual(closes(e).map(\.0), [3])
        XCTAssertEqual(closes(e).map(\.1), [.kicked])
        XCTAssertEqual(forwarding(e).map(\.0), [3])
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        let left = sends(e, named: "participantLeft")
        XCTAssertEqual(left.first?.0, .participantLeft(3, reason: .kicked))
        XCTAssertEqual(left.first?.1, [1, 2, 4, 5])
        // A forward-off comes before the close.
        let kinds = e.compactMap { effect -> String? in
            switch effect {
            case .forwardMedia: "forward"
            case .close: "close"
            default: nil
            }
        }
        XCTAssertEqual(kinds, ["forward", "close"])
    }

    func testNonModeratorsAreRefused() {
        var room = moderated()
        room.must(.raiseHand(4))
        for command: RoomCommand in [.approve(by: 3, target: 4), .deny(by: 3, target: 4),
                                     .invite(by: 3, target: 5), .demote(by: 3, target: 1),
                                     .muteParticipant(by: 3, target: 1, hard: false),
                                     .kick(by: 3, target: 1), .close(by: 3),
                                     .setAttribute(by: 3, key: "k", value: "v"),
                                     .deleteAttribute(by: 3, key: "k")] {
            room.refuse(command, .notModerator)
        }
        // Moderator commands naming someone who is not there.
        room.refuse(.kick(by: 1, target: 42), .unknownParticipant)
        room.refuse(.approve(by: 42, target: 4), .unknownParticipant)
    }

    func testOpenRoomAttributesByAnyone() {
        var room = makeRoom(.open)
        room.add(1)
        room.add(2)
        let e = room.must(.setAttribute(by: 1, key: "topic", value: "hi"))
        XCTAssertEqual(sends(e, named: "attributeChanged").first?.1, [1, 2])
    }

    func testCloseByModerator() {
        var room = moderated()
        room.must(.invite(by: 1, target: 3))
        room.must(.acceptInvitation(3))
        let e = room.must(.close(by: 2))
        XCTAssertTrue(room.isClosed)
        XCTAssertTrue(room.isEmpty)
        XCTAssertEqual(closes(e).map(\.0), [1, 2, 3, 4, 5])
        XCTAssertTrue(closes(e).allSatisfy { $0.1 == .roomClosed })
        for id: RoomParticipantID in 1...5 {
            XCTAssertEqual(events(e, for: id), [.removed(reason: .roomClosed)])
        }
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        XCTAssertEqual(room.forwardedSpeakers, [])
        room.refuse(.join(request(9)), .roomClosed)
        XCTAssertEqual(room.tick(now: 1_000_000), [])
    }

    func testCloseByServer() {
        var room = moderated()
        let e = room.must(.close(by: nil))
        XCTAssertEqual(closes(e).count, 5)
        XCTAssertTrue(room.isClosed)
    }
}
