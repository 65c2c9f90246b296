import RoomModel
import RoomServerKit
import XCTest

/// Stage transitions that do not need a moderator, mostly in open rooms.
final class RoomStageTests: XCTestCase {
    func testConfigValidation() {
        XCTAssertThrowsError(try Room(config: RoomConfig(speakerLimit: -1))) {
            XCTAssertEqual(($0 as? RoomError)?.code, .invalidConfig)
        }
        XCTAssertThrowsError(try Room(config: RoomConfig(topN: 0))) {
            XCTAssertEqual(($0 as? RoomError)?.code, .invalidConfig)
        }
        XCTAssertThrowsError(try Room(config: RoomConfig(attributes: ["k": String(repeating: "v", count: 1025)]))) {
            XCTAssertEqual(($0 as? RoomError)?.code, .attributeLimit)
        }
        let room = try? Room(config: RoomConfig(attributes: ["topic": "standup"]))
        XCTAssertEqual(room?.attributes, [RoomAttribute(key: "topic", value: "standup")])
        XCTAssertEqual(RoomConfig().topN, 3)
    }

    func testJoinAsAudienceIsOffStageAndCannotPublish() {
        var room = makeRoom()
        room.add(1)
        XCTAssertEqual(room.stage(1), .off)
        XCTAssertEqual(room.participant(1)?.role, .audience)
        XCTAssertFalse(room.mayPublish(1))
        XCTAssertEqual(room.forwardedSpeakers, [])
    }

    func testJoinAsStreamerNeedsPublishGrant() {
        var room = makeRoom()
        room.refuse(.join(request(1, grants: .none, role: .streamer)), .missingGrant)
        XCTAssertTrue(room.isEmpty)
        // Audience without the grant is fine.
        room.add(1, grants: .none)
        XCTAssertEqual(room.stage(1), .off)
    }

    func testOpenRoomStreamerJoinGoesOnStageUnderLimitElseQueues() {
        var room = makeRoom(.open, limit: 2)
        let e1 = room.add(1, role: .streamer)
        XCTAssertEqual(room.stage(1), .onStage)
        XCTAssertEqual(room.participant(1)?.role, .streamer)
        XCTAssertTrue(room.mayPublish(1))
        XCTAssertEqual(forwarding(e1).map(\.0), [1])
        XCTAssertEqual(forwarding(e1).map(\.1), [true])
        room.add(2, role: .streamer)
        let e3 = room.add(3, role: .streamer)
        XCTAssertEqual(room.stage(3), .handRaised)
        XCTAssertEqual(room.handQueue, [3])
        XCTAssertFalse(room.mayPublish(3))
        XCTAssertTrue(sends(e3, named: "stageRequest").isEmpty, "open rooms ask nobody")
        XCTAssertEqual(room.onStageCount, 2)
    }

    func testOpenRaiseHandGoesOnStageAtOnce() {
        var room = makeRoom(.open, limit: 2)
        room.add(1)
        room.add(2)
        let e = room.must(.raiseHand(1))
        XCTAssertEqual(room.stage(1), .onStage)
        XCTAssertEqual(updates(e).map(\.1), [.onStage])
        // Everyone sees it.
        XCTAssertEqual(sends(e, named: "participantUpdated").first?.1, [1, 2])
        XCTAssertTrue(room.mayPublish(1))
    }

    func testRaiseHandWithoutPublishGrantRefused() {
        for policy in RoomStagePolicy.allCases {
            var room = makeRoom(policy)
            room.add(1, grants: .none)
            room.refuse(.raiseHand(1), .missingGrant)
        }
    }

    func testRaiseHandTwiceIsInvalidState() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, role: .streamer)
        room.add(2)
        room.must(.raiseHand(2))
        XCTAssertEqual(room.stage(2), .handRaised)
        room.refuse(.raiseHand(2), .invalidState, contains: "hand_raised")
        room.refuse(.raiseHand(1), .invalidState, contains: "on_stage")
    }

    func testFIFOPromotionWhenSlotsFree() {
        var room = makeRoom(.open, limit: 1)
        room.add(1, role: .streamer)
        room.add(2)
        room.add(3)
        room.add(4)
        room.must(.raiseHand(3))
        room.must(.raiseHand(2))
        room.must(.raiseHand(4))
        XCTAssertEqual(room.handQueue, [3, 2, 4])
        // 3 raised first: it is promoted first, whatever the ids or join order.
        var e = room.must(.stepDown(1))
        XCTAssertEqual(updates(e).map(\.0), [1, 3])
        XCTAssertEqual(room.stage(1), .off)
        XCTAssertEqual(room.stage(3), .onStage)
        XCTAssertEqual(room.handQueue, [2, 4])
        XCTAssertEqual(forwarding(e).map(\.0), [1, 3])
        XCTAssertEqual(forwarding(e).map(\.1), [false, true])
        // A lowered hand leaves the queue and is skipped.
        room.must(.lowerHand(2))
        XCTAssertEqual(room.stage(2), .off)
        XCTAssertEqual(room.handQueue, [4])
        e = room.must(.leave(3))
        XCTAssertEqual(room.stage(4), .onStage)
        XCTAssertEqual(room.handQueue, [])
        XCTAssertEqual(sends(e, named: "participantLeft").first?.1, [1, 2, 4])
    }

    func testLowerHand() {
        var room = makeRoom(.open, limit: 0)
        room.add(1)
        room.must(.raiseHand(1))
        XCTAssertEqual(room.stage(1), .handRaised)
        let e = room.must(.lowerHand(1))
        XCTAssertEqual(room.stage(1), .off)
        XCTAssertEqual(updates(e).map(\.1), [.off])
        room.refuse(.lowerHand(1), .invalidState, contains: "is off")
    }

    func testStepDown() {
        var room = makeRoom()
        room.add(1, role: .streamer)
        let e = room.must(.stepDown(1))
        XCTAssertEqual(room.stage(1), .off)
        XCTAssertEqual(room.participant(1)?.role, .audience)
        XCTAssertFalse(room.mayPublish(1))
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        room.refuse(.stepDown(1), .invalidState, contains: "off")
    }

    func testUnknownParticipantCommands() {
        var room = makeRoom()
        room.add(1, grants: .moderator)
        for command: RoomCommand in [.raiseHand(9), .lowerHand(9), .stepDown(9), .acceptInvitation(9),
                                     .declineInvitation(9), .setMute(9, muted: true), .leave(9),
                                     .connectionLost(9), .refreshToken(9, expiresAt: 5),
                                     .approve(by: 1, target: 9), .kick(by: 9, target: 1),
                                     .sendMessage(from: 9, to: nil, payload: [1]),
                                     .sendMessage(from: 1, to: 9, payload: [1])] {
            room.refuse(command, .unknownParticipant)
        }
    }

    func testDuplicateParticipantIDRefused() {
        var room = makeRoom()
        room.add(1)
        room.refuse(.join(request(1, user: "other")), .invalidState)
    }

    func testSelfMute() {
        var room = makeRoom()
        room.add(1, role: .streamer)
        room.add(2)
        var e = room.must(.setMute(1, muted: true))
        XCTAssertEqual(room.participant(1)?.muted, true)
        XCTAssertFalse(room.mayPublish(1))
        XCTAssertEqual(room.forwardedSpeakers, [])
        XCTAssertEqual(forwarding(e).map(\.1), [false])
        let update = sends(e, named: "participantUpdated")
        XCTAssertEqual(update.count, 1)
        XCTAssertEqual(update.first?.1, [1, 2])
        // Muting again changes nothing and says nothing.
        XCTAssertEqual(room.must(.setMute(1, muted: true)), [])
        e = room.must(.setMute(1, muted: false))
        XCTAssertTrue(room.mayPublish(1))
        XCTAssertEqual(forwarding(e).map(\.1), [true])
        // An audience member may mute too (takes effect when on stage).
        room.must(.setMute(2, muted: true))
        room.must(.raiseHand(2))
        XCTAssertEqual(room.stage(2), .onStage)
        XCTAssertFalse(room.mayPublish(2))
    }
}
