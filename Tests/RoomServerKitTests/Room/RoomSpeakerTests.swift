import RoomModel
import RoomServerKit
import XCTest

/// Active-speaker selection and the forwarded set.
final class RoomSpeakerTests: XCTestCase {
    /// Streamers 1...streamers on stage, plus listener 100.
    private func stage(streamers: RoomParticipantID, topN: Int, limit: Int = 10,
                       turnMs: Int64 = RoomConfig().speakerTurnMs) -> Room {
        var room = makeRoom(.open, limit: limit, topN: topN, speakerTurnMs: turnMs)
        for id in 1...streamers { room.add(id, role: .streamer) }
        room.add(100)
        return room
    }

    /// Audio-level reports every 10 ms in [from, to), with a tick every 250 ms (after that
    /// instant's reports); returns the effects of the ticks.
    private func talk(_ room: inout Room, _ levels: [RoomParticipantID: UInt8], from: RoomInstant, to: RoomInstant,
                      voice: Bool = true) -> [RoomEffect] {
        var effects: [RoomEffect] = []
        var t = from
        while t < to {
            for id in levels.keys.sorted() { room.updateAudioLevel(id, level: levels[id]!, voice: voice, now: t) }
            if (t - from) % 250 == 0 { effects += room.tick(now: t) }
            t += 10
        }
        return effects
    }

    private func speakerEvents(_ effects: [RoomEffect]) -> [[RoomParticipantID]] {
        sends(effects, named: "activeSpeakers").map {
            if case .activeSpeakers(let ids) = $0.0 { return ids }
            return []
        }
    }

    func testFewPublishersAreAllForwardedWithoutTalking() {
        let room = stage(streamers: 2, topN: 3)
        XCTAssertEqual(room.forwardedSpeakers, [1, 2])
        XCTAssertEqual(room.activeSpeakers, [])
    }

    func testLoudestTalkersAreSelectedAndForwarded() {
        var room = stage(streamers: 5, topN: 3)
        XCTAssertEqual(room.forwardedSpeakers, [1, 2, 3], "fillers in join order")
        var e = talk(&room, [5: 10], from: 0, to: 300)
        XCTAssertEqual(room.activeSpeakers, [5])
        XCTAssertEqual(speakerEvents(e), [[5]])
        XCTAssertEqual(sends(e, named: "activeSpeakers").first?.1, [1, 2, 3, 4, 5, 100])
        // A filler made room: among never-heard fillers the one that joined last goes.
        XCTAssertEqual(room.forwardedSpeakers, [1, 2, 5])
        XCTAssertEqual(forwarding(e).map(\.0), [3, 5])
        XCTAssertEqual(forwarding(e).map(\.1), [false, true])
        e = talk(&room, [4: 20, 5: 10], from: 300, to: 600)
        XCTAssertEqual(room.activeSpeakers, [5, 4], "loudest first")
        XCTAssertEqual(speakerEvents(e), [[5, 4]])
        XCTAssertEqual(room.forwardedSpeakers, [1, 4, 5])
        XCTAssertEqual(forwarding(e).map(\.0), [2, 4])
    }

    func testNeverMoreThanTopN() {
        var room = stage(streamers: 6, topN: 3)
        let e = talk(&room, [1: 40, 2: 30, 3: 20, 4: 10, 5: 5, 6: 0], from: 0, to: 2_000)
        XCTAssertEqual(room.activeSpeakers.count, 3)
        XCTAssertEqual(Set(room.activeSpeakers), [4, 5, 6], "the three loudest (lowest -dBov)")
        XCTAssertEqual(room.forwardedSpeakers, [4, 5, 6])
        for ids in speakerEvents(e) { XCTAssertLessThanOrEqual(ids.count, 3) }
    }

    func testQuietTalkersAreNotSelectedWithoutVoice() {
        var room = stage(streamers: 4, topN: 1)
        _ = talk(&room, [2: 0], from: 0, to: 500, voice: false)
        XCTAssertEqual(room.activeSpeakers, [], "levels without the voice flag do not count")
    }

    func testHysteresisAndMinimumDwell() {
        var room = stage(streamers: 3, topN: 2)
        _ = talk(&room, [1: 30, 2: 30], from: 0, to: 1_000)
        XCTAssertEqual(Set(room.activeSpeakers), [1, 2])
        // 3 is only 2 dB louder: never enough.
        var e = talk(&room, [1: 30, 2: 30, 3: 28], from: 1_000, to: 3_000)
        XCTAssertEqual(Set(room.activeSpeakers), [1, 2])
        XCTAssertEqual(speakerEvents(e), [])
        // 3 is 20 dB louder: it replaces one of them.
        e = talk(&room, [1: 30, 2: 30, 3: 10], from: 3_000, to: 3_500)
        XCTAssertTrue(room.activeSpeakers.contains(3))
        XCTAssertEqual(room.activeSpeakers.count, 2)
        XCTAssertEqual(speakerEvents(e).count, 1)
        XCTAssertEqual(room.activeSpeakers.first, 3)
        XCTAssertTrue(room.forwardedSpeakers.contains(3))
        XCTAssertEqual(room.forwardedSpeakers.count, 2)
    }

    func testNewSpeakerWaitsForMinimumDwellOfWeakest() {
        var room = stage(streamers: 2, topN: 1)
        _ = talk(&room, [1: 40], from: 0, to: 260)     // 1 enters at t=0
        XCTAssertEqual(room.activeSpeakers, [1])
        for t in stride(from: RoomInstant(260), to: 1_000, by: 20) {
            room.updateAudioLevel(1, level: 40, voice: true, now: t)
            room.updateAudioLevel(2, level: 0, voice: true, now: t)
        }
        _ = room.tick(now: 990)
        XCTAssertEqual(room.activeSpeakers, [1], "1 has not had its hold time yet")
        room.updateAudioLevel(2, level: 0, voice: true, now: 1_000)
        room.updateAudioLevel(1, level: 40, voice: true, now: 1_000)
        let e = room.tick(now: 1_000)
        XCTAssertEqual(room.activeSpeakers, [2])
        XCTAssertEqual(speakerEvents(e), [[2]])
    }

    func testNoFlappingBetweenSimilarSpeakers() {
        var room = stage(streamers: 2, topN: 1)
        var events = 0
        for step in 0..<100 {  // 10 s; the louder one alternates every 100 ms by 4 dB
            let t = RoomInstant(step) * 100
            let (a, b): (UInt8, UInt8) = step % 2 == 0 ? (30, 34) : (34, 30)
            for k in 0..<5 {
                room.updateAudioLevel(1, level: a, voice: true, now: t + RoomInstant(k) * 20)
                room.updateAudioLevel(2, level: b, voice: true, now: t + RoomInstant(k) * 20)
            }
            events += speakerEvents(room.tick(now: t + 99)).count
        }
        // The first selection, and one turn at 5 s (both talk all the time: the one kept out
        // gets its turn, testAClaimedLevelHoldsAPlaceForOneTurn); no change on level swings.
        XCTAssertEqual(events, 2, "the first selection and one turn are announced")
    }

    func testSilentSpeakerIsDroppedAfterHold() {
        var room = stage(streamers: 2, topN: 3)
        _ = talk(&room, [1: 20], from: 0, to: 2_000)     // last voiced report at 1990
        XCTAssertEqual(room.activeSpeakers, [1])
        XCTAssertEqual(speakerEvents(room.tick(now: 2_990)), [])
        XCTAssertEqual(room.activeSpeakers, [1], "held for 1 s after the last word")
        XCTAssertEqual(speakerEvents(room.tick(now: 2_991)), [[]])
        XCTAssertEqual(room.activeSpeakers, [])
        XCTAssertEqual(room.forwardedSpeakers, [1, 2], "still forwarded as a filler: nobody else needs the slot")
    }

    func testMutedAndAudienceAreNeverForwarded() {
        var room = stage(streamers: 3, topN: 3)
        room.must(.setMute(2, muted: true))
        XCTAssertEqual(room.forwardedSpeakers, [1, 3])
        // The listener and the muted speaker shout; neither is picked, nor forwarded.
        _ = talk(&room, [2: 0, 100: 0, 3: 60], from: 0, to: 1_000)
        XCTAssertEqual(room.activeSpeakers, [3])
        XCTAssertFalse(room.mayPublish(100))
        XCTAssertFalse(room.mayPublish(2))
        XCTAssertEqual(room.forwardedSpeakers, [1, 3])
        // Muting an active speaker removes it at once, without waiting for a tick.
        let e = room.must(.setMute(3, muted: true))
        XCTAssertEqual(room.activeSpeakers, [])
        XCTAssertEqual(room.forwardedSpeakers, [1])
        XCTAssertEqual(speakerEvents(e), [[]])
        XCTAssertEqual(forwarding(e).map(\.0), [3])
        // Unmuting starts from silence: its old level is forgotten.
        room.must(.setMute(3, muted: false))
        _ = room.tick(now: 1_100)
        XCTAssertEqual(room.activeSpeakers, [])
    }

    func testSteppingDownRemovesFromActiveAndForwarded() {
        var room = stage(streamers: 4, topN: 2)
        _ = talk(&room, [3: 10, 4: 20], from: 0, to: 500)
        XCTAssertEqual(room.forwardedSpeakers, [3, 4])
        let e = room.must(.stepDown(3))
        XCTAssertEqual(room.activeSpeakers, [4])
        XCTAssertEqual(room.forwardedSpeakers, [1, 4], "a filler takes the place")
        XCTAssertEqual(speakerEvents(e), [[4]])
    }

    /// The ids active at the end of each 250 ms tick over [from, to).
    private func holders(_ room: inout Room, _ levels: [RoomParticipantID: UInt8], from: RoomInstant, to: RoomInstant) -> [[RoomParticipantID]] {
        stride(from: from, to: to, by: 250).map { t in
            _ = talk(&room, levels, from: t, to: t + 250)
            return room.activeSpeakers
        }
    }

    /// Issue 27 item 8: a publisher claiming the loudest level with voice, all the time, kept a
    /// real talker out for as long as it liked (levels are the publishers' own claims). Now the
    /// one kept out gets a turn after 5 s, and the claimant waits for its own turn.
    func testAClaimedLevelHoldsAPlaceForOneTurn() {
        var room = stage(streamers: 2, topN: 1)
        let ticks = holders(&room, [1: 0, 2: 35], from: 0, to: 20_000)
        let withTwo = ticks.filter { $0 == [2] }.count
        XCTAssertEqual(ticks.first, [1], "the loudest claim is heard first")
        // 80 ticks: 1 holds 0-5 s, 2 5-10 s, 1 10-15 s, 2 15-20 s.
        XCTAssertEqual(withTwo, 40, "\(ticks)")
        XCTAssertEqual(ticks[19], [1]); XCTAssertEqual(ticks[21], [2])
        XCTAssertEqual(ticks[39], [2], "the claimant does not come straight back by its level")
        XCTAssertEqual(ticks[41], [1], "it comes back by its own turn")
        XCTAssertTrue(room.forwardedSpeakers == room.activeSpeakers)

        var noTurns = stage(streamers: 2, topN: 1, turnMs: 0)
        XCTAssertTrue(holders(&noTurns, [1: 0, 2: 35], from: 0, to: 20_000).allSatisfy { $0 == [1] },
                      "speaker_turn_ms 0: the level alone decides, as before")
    }

    /// Turns only share what is contended: with a place free nobody waits, and a speaker that
    /// lost its place to a turn competes by level again after a pause.
    func testTurnsOnlyUnderContentionAndAPauseEndsThem() {
        var room = stage(streamers: 4, topN: 3)
        var ticks = holders(&room, [1: 0, 2: 10, 3: 20], from: 0, to: 12_000)
        XCTAssertTrue(ticks.allSatisfy { Set($0) == [1, 2, 3] }, "three talkers, three places: no turns")
        // A fourth talker, the quietest: after 5 s of waiting it takes a place held longer than
        // a turn (all three entered together; which of them goes does not matter here).
        ticks = holders(&room, [1: 0, 2: 10, 3: 20, 4: 40], from: 12_000, to: 17_500)
        XCTAssertFalse(ticks.prefix(19).contains { $0.contains(4) }, "\(ticks)")
        XCTAssertTrue(ticks.last!.contains(4), "\(ticks)")
        let out = Set([1, 2, 3]).subtracting(ticks.last!).first!
        // The one that lost its place pauses, then talks again, louder than 4 by far: it comes
        // back by its level once 4 has held its place for the hold time.
        var levels: [RoomParticipantID: UInt8] = [1: 0, 2: 10, 3: 20, 4: 40]
        levels[out] = nil
        _ = holders(&room, levels, from: 17_500, to: 18_500)
        levels[out] = 0
        ticks = holders(&room, levels, from: 18_500, to: 19_500)
        XCTAssertTrue(ticks.last!.contains(out), "after a pause the level counts again: \(ticks)")
        XCTAssertFalse(ticks.last!.contains(4))
    }
}
