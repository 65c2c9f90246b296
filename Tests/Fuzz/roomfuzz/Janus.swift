import RoomJanus

/// One text message from Janus as roomd reads it on the WebRTC/Janus path: `JanusConnection`
/// hands each WebSocket text message (`String(decoding:as: UTF8.self)` of the frame) to
/// `JanusAudioBridgeSession.receive`, which decodes it (`JanusMessage.decode`) and acts on it.
/// The input is that text; it is decoded, then taken by a session in each state a session
/// passes through (idle; create sent; attach sent; join sent; joined with a configure, a
/// moderator request, a trickle and a keepalive pending), with the transactions ("r1" … "r7")
/// those sessions sent, so acks, errors, successes and plugin events reach the code that
/// matches them.
///
/// Checked: decoding keeps no state (the same text decodes the same twice) and a refusal is a
/// short sentence (at most 200 characters: it ends up in the log and in roomctl's status); a
/// text that does not decode fails the session with that sentence and nothing else; an answer,
/// a remote candidate or a join the session reports is the one in the message (the joined
/// session's participant id is the one Janus gave); a kick leaves the session `left`; every
/// request the session sends in reply is JSON that names the session Janus created.
func fuzzJanus(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    var message: JanusMessage?
    var refusal: JanusDecodingError?
    do {
        let m = try JanusMessage.decode(text)
        fuzzCheck((try? JanusMessage.decode(text)) == m, "a second decode gave another message")
        message = m
        note("janus: \(m.janus), transaction \(m.transaction ?? "none"), plugin event \(m.plugindata?.data.audiobridge ?? "none")")
    } catch {
        fuzzCheck(error.message.count <= 200, "a decoding error of \(error.message.count) characters")
        refusal = error
        note("janus refused: \(error)")
    }

    for (stage, start) in janusStages {
        var session = start
        let outputs = session.receive(text, now: 60_000)
        note("janus \(stage): \(outputs) → \(session.state)")
        if let refusal {
            fuzzCheck(outputs == [.failed("\(refusal)")] && session.state == .failed("\(refusal)"),
                      "\(stage): an unreadable message gave \(outputs), state \(session.state)")
            continue
        }
        guard let message else { continue }
        for output in outputs {
            switch output {
            case .answer(let sdp):
                fuzzCheck(message.jsep == JanusJSEP(type: "answer", sdp: sdp), "\(stage): an answer that is not the message's")
            case .remoteCandidate(let candidate):
                fuzzCheck(message.candidate == candidate, "\(stage): a candidate that is not the message's")
            case .joined(let id, let others):
                fuzzCheck(session.state == .joined && session.participantID == id && message.plugindata?.data.id == id,
                          "\(stage): joined as \(id), state \(session.state), participant \(String(describing: session.participantID))")
                fuzzCheck(others == (message.plugindata?.data.participants ?? []), "\(stage): joined with other participants than the message's")
            case .kicked:
                fuzzCheck(session.state == .left, "\(stage): kicked, yet \(session.state)")
            default:
                break
            }
        }
        for request in session.takeOutgoing() {
            let sent = try? JanusMessage.decode(request)
            fuzzCheck(sent != nil && sent?.session_id == session.sessionID && session.sessionID != nil,
                      "\(stage): the session sent \(request) (session \(String(describing: session.sessionID)))")
        }
    }
}

/// The sessions a message is fed to, made once (the session is a value: each input gets
/// copies). Transactions are numbered in the order requests are made: r1 create, r2 attach,
/// r3 join, r4 configure, r5 moderate (mute), r6 trickle, r7 keepalive. `nonisolated(unsafe)`:
/// the session is not `Sendable`, and libFuzzer calls the harness from one thread only.
nonisolated(unsafe) private let janusStages: [(String, JanusAudioBridgeSession)] = {
    var s = JanusAudioBridgeSession(room: 1234, display: "Room 4.12", pin: "0000", apiSecret: "fuzz-api-secret")
    var stages = [("idle", s)]
    s.join(offer: "v=0\r\n", muted: true, now: 0)
    stages.append(("creating", s))
    _ = s.receive(#"{"janus":"success","transaction":"r1","data":{"id":11}}"#, now: 1)
    stages.append(("attaching", s))
    _ = s.receive(#"{"janus":"success","session_id":11,"transaction":"r2","data":{"id":22}}"#, now: 2)
    stages.append(("joining", s))
    _ = s.receive("""
        {"janus":"event","session_id":11,"transaction":"r3","sender":22,"plugindata":{"plugin":"janus.plugin.audiobridge",\
        "data":{"audiobridge":"joined","room":1234,"id":33,"participants":[{"id":44,"display":"Browser","muted":false}]}},\
        "jsep":{"type":"answer","sdp":"v=0\\r\\n"}}
        """, now: 3)
    s.setMuted(false, now: 4)
    s.moderate("mute", participant: 44, secret: "room-secret", now: 5)
    s.trickle(.end, now: 6)
    s.tick(now: 6 + s.keepaliveIntervalMs)
    _ = s.takeOutgoing()
    stages.append(("joined", s))
    if s.state != .joined || s.participantID != 33 {
        fatalError("roomfuzz janus: the session did not reach the joined state (\(s.state)); the harness's script is out of date")
    }
    for i in stages.indices { _ = stages[i].1.takeOutgoing() }
    return stages
}()
