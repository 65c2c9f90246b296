import XCTest
@testable import RoomJanus

/// Messages as Janus 1.1.2 (Debian bookworm) sent them on this machine (AudioBridge, HTTP
/// transport; the WebSocket transport carries the same JSON).
final class JanusMessageTests: XCTestCase {
    func testRequestsEncodeOnlyWhatIsSet() {
        var join = JanusRequest("message", transaction: "t3", session: 1_955_926_178_430_105, handle: 6_536_538_011_936_537)
        var body = JanusPluginRequest(request: "join", room: 1234)
        body.display = "Room 4.12"
        body.muted = true
        join.body = body
        join.jsep = JanusJSEP(type: "offer", sdp: "v=0\r\n")
        XCTAssertEqual(join.json, #"{"body":{"display":"Room 4.12","muted":true,"request":"join","room":1234},"handle_id":6536538011936537,"janus":"message","jsep":{"sdp":"v=0\r\n","type":"offer"},"session_id":1955926178430105,"transaction":"t3"}"#)
        var trickle = JanusRequest("trickle", transaction: "t9", session: 1, handle: 2)
        trickle.candidate = .end
        XCTAssertEqual(trickle.json, #"{"candidate":{"completed":true},"handle_id":2,"janus":"trickle","session_id":1,"transaction":"t9"}"#)
    }

    func testJanusAnswersDecode() throws {
        let created = try JanusMessage.decode(#"{"janus": "success", "transaction": "t1", "data": {"id": 1542586047626881}}"#)
        XCTAssertEqual(created.data?.id, 1_542_586_047_626_881)

        let joined = try JanusMessage.decode("""
        {"janus": "event", "session_id": 1955926178430105, "transaction": "t3", "sender": 6536538011936537,
         "plugindata": {"plugin": "janus.plugin.audiobridge",
                        "data": {"audiobridge": "joined", "room": 1234, "id": 1644003828285079, "participants": []}}}
        """)
        XCTAssertEqual(joined.sender, 6_536_538_011_936_537)
        XCTAssertEqual(joined.plugindata?.data.audiobridge, "joined")
        XCTAssertEqual(joined.plugindata?.data.id, 1_644_003_828_285_079)
        XCTAssertEqual(joined.plugindata?.data.participants, [])
        XCTAssertNil(joined.plugindata?.data.failure)

        let refused = try JanusMessage.decode("""
        {"janus": "event", "transaction": "t4", "sender": 6536538011936537, "plugindata": {"plugin": "janus.plugin.audiobridge",
         "data": {"audiobridge": "event", "error_code": 491, "error": "Already in a room (use changeroom to join another one)"}}}
        """)
        XCTAssertEqual(refused.plugindata?.data.failure?.code, 491)

        let error = try JanusMessage.decode(#"{"janus": "error", "session_id": 1, "transaction": "t6", "error": {"code": 453, "reason": "Unknown request 'bogus'"}}"#)
        XCTAssertEqual(error.error?.description, "Janus error 453: Unknown request 'bogus'")

        XCTAssertThrowsError(try JanusMessage.decode("{\"transaction\": 5}"))
        XCTAssertThrowsError(try JanusMessage.decode("not json"))
        // A peer's JSON is read as strictly as a token: which of two transactions would be meant?
        XCTAssertThrowsError(try JanusMessage.decode(#"{"janus": "ack", "transaction": "t1", "transaction": "t2"}"#)) {
            XCTAssertEqual("\($0)", #"unreadable message from Janus: key "transaction" twice in one object"#)
        }
    }
}
