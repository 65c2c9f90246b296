import RoomBase
import RoomModel
import RoomServerKit
import XCTest

/// Thousands of random commands, ticks and audio levels (fixed seeds), checking the room's
/// invariants after every step and that the effects describe the state faithfully.
final class RoomRandomizedTests: XCTestCase {
    func testRandomCommandsKeepInvariants() {
        var accepted = 0, refused = 0
        var codes = Set<RoomErrorCode>()
        for seed: UInt64 in 1...8 {
            let stats = run(seed: seed, steps: 4_000)
            accepted += stats.accepted
            refused += stats.refused
            codes.formUnion(stats.codes)
        }
        // The generator must reach both outcomes and every kind of refusal, or it tests little.
        XCTAssertGreaterThan(accepted, 5_000)
        XCTAssertGreaterThan(refused, 5_000)
        XCTAssertEqual(codes, [.notModerator, .unknownParticipant, .invalidState, .speakerLimit, .missingGrant,
                               .attributeLimit, .roomClosed])
    }

    func testSameSeedSameEffects() {
        XCTAssertEqual(run(seed: 42, steps: 2_000).trace, run(seed: 42, steps: 2_000).trace)
    }

    struct Stats {
        var accepted = 0
        var refused = 0
        var codes = Set<RoomErrorCode>()
        var trace: [String] = []
    }

    private func run(seed: UInt64, steps: Int) -> Stats {
        var rng = SplitMix64(seed: seed)
        let policy: RoomStagePolicy = seed % 2 == 0 ? .open : .moderated
        let config = RoomConfig(policy: policy, speakerLimit: Int.random(in: 0...4, using: &rng),
                                topN: Int.random(in: 1...3, using: &rng))
        var room = try! Room(config: config)
        var now: RoomInstant = 0
        var stats = Stats()
        // What the effects said so far.
        var forwardedModel = Set<RoomParticipantID>()
        var membersModel = Set<RoomParticipantID>()
        var speakersModel = Set<RoomParticipantID>()

        for step in 0..<steps {
            now += RoomInstant.random(in: 0...400, using: &rng)
            let context = "seed \(seed) step \(step)"
            let roll = Int.random(in: 0..<100, using: &rng)
            var effects: [RoomEffect] = []
            if roll < 15 {
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    room.updateAudioLevel(RoomParticipantID.random(in: 1...12, using: &rng),
                                          level: UInt8.random(in: 0...127, using: &rng),
                                          voice: Bool.random(using: &rng), now: now)
                }
                stats.trace.append("levels")
            } else if roll < 25 {
                effects = room.tick(now: now)
                stats.trace.append("tick \(effects)")
            } else {
                let command = randomCommand(&rng, now: now)
                let before = room
                do throws(RoomError) {
                    effects = try room.handle(command, now: now)
                    stats.accepted += 1
                    if case .join(let r) = command { membersModel.insert(r.participantID) }
                    stats.trace.append("\(command) -> \(effects)")
                } catch {
                    stats.refused += 1
                    stats.codes.insert(error.code)
                    XCTAssertEqual(room, before, "\(context): refused \(command) changed the room")
                    stats.trace.append("\(command) !! \(error)")
                }
            }

            // Replay the effects on the models.
            let closedNow = Set(effects.compactMap { effect -> RoomParticipantID? in
                if case .close(let id, _) = effect { return id }
                return nil
            })
            for effect in effects {
                switch effect {
                case .forwardMedia(let id, let on):
                    XCTAssertNotEqual(forwardedModel.contains(id), on, "\(context): redundant forward \(id) \(on)")
                    if on { forwardedModel.insert(id) } else { forwardedModel.remove(id) }
                case .close(let id, _):
                    XCTAssertTrue(membersModel.contains(id), "\(context): closing \(id), not a member")
                    XCTAssertFalse(forwardedModel.contains(id), "\(context): \(id) closed while forwarded")
                    membersModel.remove(id)
                case .send(let event, let to):
                    XCTAssertFalse(to.isEmpty, "\(context): send without recipients")
                    XCTAssertEqual(Set(to).count, to.count, "\(context): duplicate recipients")
                    for id in to {
                        XCTAssertTrue(room.participant(id) != nil || closedNow.contains(id),
                                      "\(context): \(caseName(event)) to \(id), who is not in the room")
                    }
                    if case .activeSpeakers(let ids) = event { speakersModel = Set(ids) }
                    if case .stateSync(let snapshot) = event { speakersModel = Set(snapshot.activeSpeakers) }
                }
            }
            check(room, context: context)
            XCTAssertEqual(forwardedModel, Set(room.forwardedSpeakers), "\(context): forwarding effects disagree")
            XCTAssertEqual(membersModel, Set(room.participants.map { $0.id }), "\(context): join/close effects disagree")
            if !room.isEmpty {
                XCTAssertEqual(speakersModel, Set(room.activeSpeakers), "\(context): active_speakers events disagree")
            }
            if room.isClosed {  // a closed room refuses everything; start over with a fresh one
                let closed = room
                do throws(RoomError) {
                    _ = try room.handle(randomCommand(&rng, now: now), now: now)
                    XCTFail("\(context): a closed room accepted a command")
                } catch {
                    stats.codes.insert(error.code)
                    XCTAssertEqual(error.code, .roomClosed)
                }
                XCTAssertEqual(room, closed)
                room = try! Room(config: config)
                forwardedModel = []
                membersModel = []
                speakersModel = []
                stats.trace.append("reopen")
            }
        }
        return stats
    }

    private func check(_ room: Room, context: String) {
        let config = room.config
        let people = room.participants
        XCTAssertEqual(Set(people.map(\.id)).count, people.count, "\(context): duplicate participant")
        XCTAssertEqual(Set(people.map(\.userID)).count, people.count, "\(context): one user twice")
        let onStage = people.filter { $0.stage == .onStage }
        XCTAssertEqual(room.onStageCount, onStage.count)
        XCTAssertLessThanOrEqual(onStage.count, config.speakerLimit, "\(context): stage over the limit")
        for p in people {
            XCTAssertEqual(room.mayPublish(p.id), p.stage == .onStage && !p.muted, "\(context): mayPublish(\(p.id))")
            if p.role == .audience { XCTAssertFalse(room.mayPublish(p.id), "\(context): audience \(p.id) may publish") }
            if p.stage != .off { XCTAssertTrue(p.mayPublishGrant, "\(context): \(p.id) is \(p.stage) without grant") }
            if p.hardMuted { XCTAssertTrue(p.muted, "\(context): \(p.id) hard-muted but not muted") }
        }
        // The hand queue is exactly the raised hands, each once.
        let raised = people.filter { $0.stage == .handRaised }.map(\.id)
        XCTAssertEqual(Set(room.handQueue), Set(raised), "\(context): queue \(room.handQueue) vs raised \(raised)")
        XCTAssertEqual(room.handQueue.count, raised.count, "\(context): queue has duplicates")
        // Nobody who would be auto-approved waits while there is a free slot.
        if onStage.count < config.speakerLimit {
            for id in room.handQueue {
                let p = room.participant(id)!
                XCTAssertFalse(config.policy == .open || p.isModerator, "\(context): \(id) waits with a free slot")
            }
        }
        let forwarded = room.forwardedSpeakers
        XCTAssertLessThanOrEqual(forwarded.count, config.topN, "\(context): too many forwarded")
        XCTAssertEqual(Set(forwarded).count, forwarded.count)
        for id in forwarded { XCTAssertTrue(room.mayPublish(id), "\(context): forwarding \(id), who may not publish") }
        let publishers = people.filter { room.mayPublish($0.id) }.count
        XCTAssertEqual(forwarded.count, min(publishers, config.topN), "\(context): free forwarding slot left empty")
        XCTAssertLessThanOrEqual(room.activeSpeakers.count, config.topN)
        XCTAssertTrue(Set(room.activeSpeakers).isSubset(of: Set(forwarded)), "\(context): active speaker not forwarded")
    }

    private func randomCommand(_ rng: inout SplitMix64, now: RoomInstant) -> RoomCommand {
        func id() -> RoomParticipantID { RoomParticipantID.random(in: 1...12, using: &rng) }
        let grants: [RoomGrants] = [.none, .publisher, .publisher, .moderator]
        switch Int.random(in: 0..<24, using: &rng) {
        case 0, 1, 2, 3:
            let participant = id()
            return .join(RoomJoinRequest(
                participantID: participant, userID: "u\(Int.random(in: 0..<8, using: &rng))", name: "n",
                grants: grants.randomElement(using: &rng)!,
                desiredRole: Bool.random(using: &rng) ? .streamer : .audience,
                tokenExpiresAt: now + RoomInstant.random(in: 0...200_000, using: &rng),
                previousParticipantID: Bool.random(using: &rng) ? id() : nil))
        case 4: return .leave(id())
        case 5: return .connectionLost(id())
        case 6, 7: return .raiseHand(id())
        case 8: return .lowerHand(id())
        case 9: return .acceptInvitation(id())
        case 10: return .declineInvitation(id())
        case 11: return .stepDown(id())
        case 12: return .setMute(id(), muted: Bool.random(using: &rng))
        case 13: return .approve(by: id(), target: id())
        case 14: return .deny(by: id(), target: id())
        case 15: return .invite(by: id(), target: id())
        case 16: return .demote(by: id(), target: id())
        case 17: return .muteParticipant(by: id(), target: id(), hard: Bool.random(using: &rng))
        case 18: return Int.random(in: 0..<4, using: &rng) == 0 ? .kick(by: id(), target: id()) : .stepDown(id())
        case 19: return .sendMessage(from: id(), to: Bool.random(using: &rng) ? id() : nil, payload: [1, 2])
        case 20:
            let key = Int.random(in: 0..<20, using: &rng) == 0 ? String(repeating: "k", count: 65)
                                                               : "k\(Int.random(in: 0..<80, using: &rng))"
            return .setAttribute(by: Bool.random(using: &rng) ? id() : nil, key: key, value: "v")
        case 21: return .deleteAttribute(by: id(), key: "k\(Int.random(in: 0..<80, using: &rng))")
        case 22: return .refreshToken(id(), expiresAt: now + RoomInstant.random(in: 0...200_000, using: &rng))
        default:
            // Rarely: close (by the server or a random participant).
            if Int.random(in: 0..<40, using: &rng) == 0 { return .close(by: Bool.random(using: &rng) ? nil : id()) }
            return .raiseHand(id())
        }
    }
}
