import Foundation
import XCTest
@testable import RoomJanus

final class JanusAudioBridgeSessionTests: XCTestCase {
    /// The requests sent, as JSON objects.
    func sent(_ s: inout JanusAudioBridgeSession) -> [[String: Any]] {
        s.takeOutgoing().map { try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
    }

    func joinedSession() -> JanusAudioBridgeSession {
        var s = JanusAudioBridgeSession(room: 1234, display: "Room 4.12", pin: "0000")
        s.join(offer: "v=0\r\noffer", muted: true, now: 0)
        var out = sent(&s)
        XCTAssertEqual(out.first?["janus"] as? String, "create")
        XCTAssertEqual(s.receive(#"{"janus":"success","transaction":"\#(out[0]["transaction"]!)","data":{"id":77}}"#, now: 5), [])
        out = sent(&s)
        XCTAssertEqual(out.first?["janus"] as? String, "attach")
        XCTAssertEqual(out.first?["plugin"] as? String, "janus.plugin.audiobridge")
        XCTAssertEqual(out.first?["session_id"] as? Int, 77)
        XCTAssertEqual(s.receive(#"{"janus":"success","session_id":77,"transaction":"\#(out[0]["transaction"]!)","data":{"id":88}}"#, now: 10), [])
        out = sent(&s)
        let join = out.first!
        let body = join["body"] as! [String: Any]
        XCTAssertEqual(body["request"] as? String, "join")
        XCTAssertEqual(body["room"] as? Int, 1234)
        XCTAssertEqual(body["muted"] as? Bool, true)
        XCTAssertEqual(body["pin"] as? String, "0000")
        XCTAssertEqual((join["jsep"] as? [String: Any])?["type"] as? String, "offer")
        XCTAssertEqual(join["handle_id"] as? Int, 88)
        XCTAssertEqual(s.state, .joining)
        let t = join["transaction"]!
        XCTAssertEqual(s.receive(#"{"janus":"ack","session_id":77,"transaction":"\#(t)"}"#, now: 12), [])
        let events = s.receive("""
        {"janus":"event","session_id":77,"transaction":"\(t)","sender":88,
         "plugindata":{"plugin":"janus.plugin.audiobridge","data":{"audiobridge":"joined","room":1234,"id":555,
           "participants":[{"id":9,"display":"Browser","setup":true,"muted":false}]}},
         "jsep":{"type":"answer","sdp":"v=0\\r\\nanswer"}}
        """, now: 20)
        XCTAssertEqual(events, [.joined(participantID: 555, others: [PluginEvent.Participant(id: 9, display: "Browser", muted: false, setup: true, talking: nil)]),
                                .answer("v=0\r\nanswer")])
        XCTAssertEqual(s.state, .joined)
        return s
    }

    func testJoinGoesCreateAttachJoinAndHandsOverTheAnswer() {
        _ = joinedSession()
    }

    func testRoomEventsMuteKeepaliveAndLeave() {
        var s = joinedSession()
        XCTAssertEqual(s.receive(#"{"janus":"webrtcup","session_id":77,"sender":88}"#, now: 30), [.mediaUp])
        XCTAssertEqual(s.receive(#"{"janus":"event","sender":88,"plugindata":{"plugin":"janus.plugin.audiobridge","data":{"audiobridge":"event","room":1234,"leaving":9}}}"#, now: 40),
                       [.participantLeft(9)])
        s.setMuted(false, now: 50)
        let configure = sent(&s).first!
        XCTAssertEqual((configure["body"] as? [String: Any])?["request"] as? String, "configure")
        XCTAssertEqual((configure["body"] as? [String: Any])?["muted"] as? Bool, false)

        s.tick(now: 50 + 24_000)
        XCTAssertTrue(sent(&s).isEmpty, "no keepalive while requests keep the session alive")
        s.tick(now: 50 + 25_000)
        XCTAssertEqual(sent(&s).first?["janus"] as? String, "keepalive")

        s.leave(now: 30_000)
        XCTAssertEqual(sent(&s).map { $0["janus"] as? String }, ["message", "detach", "destroy"])
        XCTAssertEqual(s.state, .left)
    }

    func testFailuresSayWhatJanusSaid() {
        var s = JanusAudioBridgeSession(room: 999, display: "x")
        s.join(offer: "v=0", muted: false, now: 0)
        let create = sent(&s)[0]["transaction"]!
        XCTAssertEqual(s.receive(#"{"janus":"error","transaction":"\#(create)","error":{"code":403,"reason":"Unauthorized request (wrong or missing secret/token)"}}"#, now: 1),
                       [.failed("Janus error 403: Unauthorized request (wrong or missing secret/token)")])

        var r = joinedSession()
        XCTAssertEqual(r.receive(#"{"janus":"timeout","session_id":77}"#, now: 100),
                       [.failed("Janus timed the session out (no keepalive for its session_timeout)")])

        var t = JanusAudioBridgeSession(room: 5, display: "x")
        t.join(offer: "v=0", muted: false, now: 0)
        _ = t.receive(#"{"janus":"success","transaction":"r1","data":{"id":1}}"#, now: 1)
        _ = t.receive(#"{"janus":"success","transaction":"r2","data":{"id":2}}"#, now: 2)
        XCTAssertEqual(t.receive(#"{"janus":"event","transaction":"r3","sender":2,"plugindata":{"plugin":"janus.plugin.audiobridge","data":{"audiobridge":"event","error_code":485,"error":"No such room (5)"}}}"#, now: 3),
                       [.failed("Janus refused the join: No such room (5) (485)")])
        XCTAssertEqual(t.receive("garbage", now: 4).count, 1)
    }

    /// Issue 27 (found by the janus fuzz target): a `joined` event Janus sent without our join
    /// made an idle session "joined" with a participant id of Janus's choosing, and an answer
    /// at any time was handed over as the answer to our offer.
    func testAnUnsolicitedJoinedOrAnswerChangesNothing() {
        let joined = #"{"janus":"event","sender":2,"plugindata":{"plugin":"janus.plugin.audiobridge","data":{"audiobridge":"joined","room":5,"id":666,"participants":[{"id":9}]}},"jsep":{"type":"answer","sdp":"v=0\r\nforged"}}"#
        var idle = JanusAudioBridgeSession(room: 5, display: "x")
        XCTAssertEqual(idle.receive(joined, now: 1), [.participantsChanged([PluginEvent.Participant(id: 9, display: nil, muted: nil, setup: nil, talking: nil)])])
        XCTAssertEqual(idle.state, .idle)

        var attaching = JanusAudioBridgeSession(room: 5, display: "x")
        attaching.join(offer: "v=0", muted: false, now: 0)
        _ = attaching.receive(#"{"janus":"success","transaction":"r1","data":{"id":1}}"#, now: 1)
        XCTAssertEqual(attaching.state, .attaching)
        XCTAssertFalse(attaching.receive(joined, now: 2).contains { if case .joined = $0 { true } else if case .answer = $0 { true } else { false } })
        XCTAssertEqual(attaching.state, .attaching)

        // Joined: another `joined` (someone else) with an answer is not a new answer to us.
        var s = joinedSession()
        let out = s.receive(joined, now: 30)
        XCTAssertFalse(out.contains { if case .answer = $0 { true } else { false } }, "\(out)")
        XCTAssertEqual(s.state, .joined)
        XCTAssertEqual(s.participantID, 555)
    }
}
