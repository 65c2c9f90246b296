import Foundation
import RoomSDP
import RoomSystem
import XCTest
@testable import RoomSIP

/// A SIP peer of the test's own on the agent's loop, for what real peers do not do on demand:
/// retransmit an INVITE, never ACK, CANCEL at a chosen moment, flood.
final class FakePeer {
    let socket: UDPSocket
    var received: [String] = []

    init(loop: EventLoop) throws {
        socket = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
        try socket.onReadable(loop: loop) { [unowned self] s in
            while let d = (try? s.receive(into: buffer)) ?? nil {
                received.append(String(decoding: UnsafeRawBufferPointer(rebasing: buffer[0 ..< d.count]), as: UTF8.self))
            }
        }
    }

    var port: UInt16 { socket.localAddress.port! }

    func send(_ text: String, to address: SocketAddress) {
        _ = try? socket.send(Array(text.utf8), to: address)
    }

    /// Messages received whose first line starts with `prefix` ("SIP/2.0 200", "BYE").
    func count(_ prefix: String) -> Int { received.filter { $0.hasPrefix(prefix) }.count }

    static let offer = """
        v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
        m=audio 7078 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\na=sendrecv\r\n
        """

    func invite(callID: String, branch: String = "z9hG4bKinv1", cseq: Int = 1, body: String = FakePeer.offer) -> String {
        "INVITE sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:\(port);branch=\(branch)\r\nMax-Forwards: 70\r\n"
            + "From: \"Fake Peer\" <sip:fake@127.0.0.1>;tag=peer1\r\nTo: <sip:room@127.0.0.1>\r\nCall-ID: \(callID)\r\n"
            + "CSeq: \(cseq) INVITE\r\nContact: <sip:fake@127.0.0.1:\(port)>\r\nContent-Type: application/sdp\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    func request(_ method: String, callID: String, branch: String, cseq: Int, toTag: String?) -> String {
        "\(method) sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:\(port);branch=\(branch)\r\nMax-Forwards: 70\r\n"
            + "From: \"Fake Peer\" <sip:fake@127.0.0.1>;tag=peer1\r\nTo: <sip:room@127.0.0.1>\(toTag.map { ";tag=\($0)" } ?? "")\r\n"
            + "Call-ID: \(callID)\r\nCSeq: \(cseq) \(method)\r\nContent-Length: 0\r\n\r\n"
    }
}

final class FakePeerCallTests: XCTestCase {
    let plain = CallLocalMedia(address: "127.0.0.1", port: 40_000, security: .plain)

    /// An agent not registered anywhere (its registrar is a closed port): calls come straight to it.
    func agent(_ loop: EventLoop) throws -> SIPUserAgent {
        let account = try SIPAccount(registrar: .ipv4Loopback(port: 9), domain: "127.0.0.1", user: "room", password: "x")
        return try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
    }

    func toTag(in response: String) -> String? {
        guard let line = response.components(separatedBy: "\r\n").first(where: { $0.hasPrefix("To:") }),
              let r = line.range(of: ";tag=") else { return nil }
        return String(line[r.upperBound...])
    }

    /// A retransmitted INVITE gets the ringing again, the 200 is resent until timer H (shortened
    /// to 1.8 s here) without an ACK, then the call ends `timeout` with a BYE.
    func testRetransmittedInviteAnd2xxUntilTimerH() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        ua.ackTimeout = .milliseconds(1_800)
        let peer = try FakePeer(loop: loop)
        var incoming: SIPCall?
        var events: [SIPCallEvent] = []
        ua.onIncomingCall = { call in incoming = call; call.onEvent = { events.append($0) } }
        let invite = peer.invite(callID: "retx@peer")
        peer.send(invite, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 180") == 1 })
        XCTAssertEqual(peer.count("SIP/2.0 100"), 1)
        XCTAssertEqual(incoming?.remoteURI, "sip:fake@127.0.0.1")
        XCTAssertEqual(incoming?.remoteDisplayName, "Fake Peer")
        peer.send(invite, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 180") == 2 }, "osip's IST answers the retransmission")
        XCTAssertEqual(ua.calls.count, 1, "no second call for the same INVITE")

        try incoming?.answer(localMedia: plain)
        XCTAssertTrue(try run(loop, seconds: 4) { events.contains(.ended(.timeout)) }, "\(events)")
        XCTAssertGreaterThanOrEqual(peer.count("SIP/2.0 200"), 3, "the 200 resent at 0.5, 1.5 s (T1 doubling)")
        XCTAssertTrue(peer.received.last(where: { $0.hasPrefix("SIP/2.0 200") })?.contains("m=audio 40000 RTP/AVP 0 101") == true)
        XCTAssertTrue(try run(loop, seconds: 2) { peer.count("BYE ") == 1 }, "timer H ends the dialog with a BYE")
        XCTAssertTrue(ua.calls.isEmpty)
    }

    /// The ACK stops the 200's retransmission and confirms the call; the INVITE arriving again
    /// after its transaction ended gets the same 200; the peer's BYE is answered 200 and ends it.
    func testAckConfirmsAndByeEnds() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        var events: [SIPCallEvent] = []
        ua.onIncomingCall = { call in
            call.onEvent = { events.append($0) }
            try? call.answer(localMedia: self.plain)
        }
        let invite = peer.invite(callID: "ack@peer")
        peer.send(invite, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 200") == 1 })
        let tag = try XCTUnwrap(toTag(in: peer.received.first { $0.hasPrefix("SIP/2.0 200") }!))
        peer.send(invite, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 200") >= 2 })
        peer.send(peer.request("ACK", callID: "ack@peer", branch: "z9hG4bKack1", cseq: 1, toTag: tag), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { events.count == 1 }, "\(peer.received)")
        guard case .confirmed(let agreement) = events.first else { return XCTFail("\(events)") }
        XCTAssertEqual(agreement.codec, .pcmu)
        XCTAssertEqual(agreement.remote.port, 7078)
        let before = peer.count("SIP/2.0 200")
        _ = try run(loop, seconds: 1.2) { false }
        XCTAssertEqual(peer.count("SIP/2.0 200"), before, "no retransmission after the ACK")
        // A CANCEL that lost the race with the 200: answered 200, the call stays up.
        peer.send(peer.request("CANCEL", callID: "ack@peer", branch: "z9hG4bKinv1", cseq: 1, toTag: nil), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("CSeq: 1 CANCEL") } })
        XCTAssertEqual(peer.count("SIP/2.0 487"), 0)
        XCTAssertEqual(events.count, 1)

        // The peer holds us: its sendonly re-INVITE is answered recvonly, and after the ACK the
        // application hears `updated` with the far end's direction.
        let hold = FakePeer.offer.replacingOccurrences(of: "a=sendrecv", with: "a=sendonly")
        let reinvite = peer.invite(callID: "ack@peer", branch: "z9hG4bKre1", cseq: 2, body: hold)
            .replacingOccurrences(of: "To: <sip:room@127.0.0.1>", with: "To: <sip:room@127.0.0.1>;tag=\(tag)")
        peer.send(reinvite, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("CSeq: 2 INVITE") } })
        XCTAssertTrue(peer.received.last { $0.contains("CSeq: 2 INVITE") }!.contains("a=recvonly"))
        peer.send(peer.request("ACK", callID: "ack@peer", branch: "z9hG4bKack2", cseq: 2, toTag: tag), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { events.count == 2 })
        guard case .updated(let held) = events.last else { return XCTFail("\(events)") }
        XCTAssertTrue(held.isHeldByRemote)
        XCTAssertEqual(held.localDirection, .recvonly)

        peer.send(peer.request("OPTIONS", callID: "opt@peer", branch: "z9hG4bKopt", cseq: 1, toTag: nil), to: ua.localAddress)
        peer.send(peer.request("BYE", callID: "ack@peer", branch: "z9hG4bKbye", cseq: 3, toTag: tag), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) {
            peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("CSeq: 3 BYE") }
                && peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("CSeq: 1 OPTIONS") }
        })
        XCTAssertEqual(events.count, 3)
        XCTAssertEqual(events.last, .ended(.remoteHungUp))
        // A BYE for a dialog that is gone: 481.
        peer.send(peer.request("BYE", callID: "ack@peer", branch: "z9hG4bKbye2", cseq: 4, toTag: tag), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 481") == 1 })
    }

    /// CANCEL while ringing: 200 for the CANCEL, 487 for the INVITE, the call ends cancelled
    /// and answering it afterwards is refused. A second INVITE while one rings: 486.
    func testCancelWhileRingingAndBusy() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        var calls: [SIPCall] = []
        var events: [SIPCallEvent] = []
        ua.onIncomingCall = { call in calls.append(call); call.onEvent = { events.append($0) } }
        peer.send(peer.invite(callID: "cancel@peer"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { calls.count == 1 })
        peer.send(peer.invite(callID: "second@peer", branch: "z9hG4bKinv2"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 486") == 1 })
        XCTAssertEqual(ua.callsRefusedBusy, 1)
        peer.send(peer.request("CANCEL", callID: "cancel@peer", branch: "z9hG4bKinv1", cseq: 1, toTag: nil), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) {
            peer.count("SIP/2.0 487") == 1 && peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("CSeq: 1 CANCEL") }
        })
        XCTAssertEqual(events, [.ended(.cancelled)])
        XCTAssertThrowsError(try calls[0].answer(localMedia: plain))
        XCTAssertTrue(ua.calls.isEmpty)
    }

    /// A caller that never cancels does not hold the ringing slot: after `ringTimeout` it gets
    /// 480 and the call ends `timeout`; so does our call that rings too long (CANCEL).
    func testRingTimeoutBothWays() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        ua.ringTimeout = .milliseconds(300)
        let peer = try FakePeer(loop: loop)
        var events: [SIPCallEvent] = []
        ua.onIncomingCall = { call in call.onEvent = { events.append($0) } }
        peer.send(peer.invite(callID: "ring@peer"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 480") == 1 })
        XCTAssertEqual(events, [.ended(.timeout)])
        XCTAssertTrue(ua.calls.isEmpty)

        var outEvents: [SIPCallEvent] = []
        let call = try ua.call(uri: "sip:fake@127.0.0.1:\(peer.port)", localMedia: plain)
        call.onEvent = { outEvents.append($0) }
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("CANCEL ") == 1 })
        XCTAssertEqual(outEvents, [.ended(.timeout)])
    }

    /// An offer the local policy cannot answer (plain RTP, SRTP required): 488 with the reason.
    func testUnanswerableOfferIs488() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        var thrown: Error?
        ua.onIncomingCall = { call in
            let key = SDESKey(inline: String(repeating: "A", count: 40))!
            do { try call.answer(localMedia: CallLocalMedia(address: "127.0.0.1", port: 4000, security: .required(key))) } catch { thrown = error }
        }
        peer.send(peer.invite(callID: "488@peer"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 488") == 1 })
        XCTAssertTrue("\(thrown.map { "\($0)" } ?? "")".contains("requires SRTP"))
        XCTAssertTrue(peer.received.first { $0.hasPrefix("SIP/2.0 488") }!.contains("Warning: 305 roomd"))
        // Garbage SDP: 488 before the application hears of it.
        peer.send(peer.invite(callID: "bad@peer", branch: "z9hG4bKbad", body: "v=0\r\nnonsense\r\n"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 488") == 2 })
    }

    /// Requests that lack what osip's transaction matching reads (To, here, after an INVITE made
    /// a server transaction to match against) are dropped, not handed on: osip dereferenced the
    /// missing To (the sip fuzz target's find, corpus/sip/ack-without-to-found-by-fuzzing).
    func testRequestWithoutToIsDropped() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        ua.onIncomingCall = { _ in }
        peer.send(peer.invite(callID: "noto@peer"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 180") == 1 })
        let ack = peer.request("ACK", callID: "noto@peer", branch: "z9hG4bKinv1", cseq: 1, toTag: "x")
            .replacingOccurrences(of: "\r\nTo: <sip:room@127.0.0.1>;tag=x", with: "")
        XCTAssertFalse(ack.contains("To:"))
        peer.send(ack, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { ua.datagramsDropped == 1 })
        XCTAssertEqual(ua.calls.count, 1)
    }

    /// A flood from one source is cut at its budget; another source is still answered.
    func testFloodFromOneSourceHitsItsBudget() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let flooder = try FakePeer(loop: loop)
        let other = try FakePeer(loop: loop)
        // In rounds, so that the kernel's receive buffer does not drop them before the agent does.
        for round in 0 ..< 6 {
            for i in 0 ..< 50 {
                flooder.send(flooder.request("OPTIONS", callID: "flood\(round)-\(i)@peer", branch: "z9hG4bKf\(round)x\(i)", cseq: 1, toTag: nil),
                             to: ua.localAddress)
            }
            _ = try run(loop, seconds: 0.05) { false }
        }
        _ = try run(loop, seconds: 0.2) { false }
        other.send(other.request("OPTIONS", callID: "other@peer", branch: "z9hG4bKo", cseq: 1, toTag: nil), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { other.count("SIP/2.0 200") == 1 })
        XCTAssertGreaterThan(ua.datagramsOverBudget, 200, "most of the 300 dropped unparsed")
        XCTAssertEqual(ua.datagramsOverBudget, ua.datagramsDropped)
        XCTAssertLessThan(flooder.count("SIP/2.0 200"), 80, "40 at once, then 20 a second")
        XCTAssertGreaterThanOrEqual(flooder.count("SIP/2.0 200"), 40, "the burst is served")
    }

    /// A response from the peer to the agent's request `request` (its Via, From, Call-ID, CSeq;
    /// To with the peer's tag), with a Contact and an optional SDP answer.
    func answer(_ request: String, status: String, peer: FakePeer, body: String? = nil) -> String {
        let lines = request.components(separatedBy: "\r\n")
        func header(_ name: String) -> String { lines.first { $0.hasPrefix(name + ":") } ?? "" }
        var text = "SIP/2.0 \(status)\r\n\(header("Via"))\r\n\(header("From"))\r\n\(header("To"));tag=callee\r\n"
            + "\(header("Call-ID"))\r\n\(header("CSeq"))\r\nContact: <sip:fake@127.0.0.1:\(peer.port)>\r\n"
        if let body { text += "Content-Type: application/sdp\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)" } else { text += "Content-Length: 0\r\n\r\n" }
        return text
    }

    /// Our call straight to a peer (not registered): ringing, then the 2xx is ACKed, and ACKed
    /// again when it comes again; then a call refused 486, and one cancelled while it rings.
    func testOutgoingCallAckCancelAndRefusal() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        let uri = "sip:fake@127.0.0.1:\(peer.port)"
        var events: [SIPCallEvent] = []
        let call = try ua.call(uri: uri, localMedia: plain)
        call.onEvent = { events.append($0) }
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("INVITE ") == 1 })
        let invite = peer.received.first { $0.hasPrefix("INVITE ") }!
        XCTAssertTrue(invite.contains("m=audio 40000 RTP/AVP 111 9 0 8 101"), invite)
        peer.send(answer(invite, status: "180 Ringing", peer: peer), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { events == [.ringing] })
        let answerSDP = FakePeer.offer.replacingOccurrences(of: "RTP/AVP 0 8 101", with: "RTP/AVP 8 101")
        let ok = answer(invite, status: "200 OK", peer: peer, body: answerSDP)
        peer.send(ok, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("ACK ") == 1 && events.count == 2 })
        guard case .confirmed(let agreement) = events.last else { return XCTFail("\(events)") }
        XCTAssertEqual(agreement.codec, .pcma)
        XCTAssertTrue(peer.received.first { $0.hasPrefix("ACK ") }!.hasPrefix("ACK sip:fake@127.0.0.1:\(peer.port) SIP/2.0"),
                      "the ACK goes to the Contact (the remote target)")
        peer.send(ok, to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("ACK ") == 2 }, "a resent 2xx is ACKed again")
        XCTAssertEqual(events.count, 2)
        call.hangUp()
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("BYE ") == 1 })
        XCTAssertEqual(events.last, .ended(.localHungUp))

        var refusedEvents: [SIPCallEvent] = []
        let refused = try ua.call(uri: uri, localMedia: plain)
        refused.onEvent = { refusedEvents.append($0) }
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("INVITE ") == 2 })
        peer.send(answer(peer.received.last { $0.hasPrefix("INVITE ") }!, status: "486 Busy Here", peer: peer), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { !refusedEvents.isEmpty })
        XCTAssertEqual(refusedEvents, [.ended(.declined(code: 486, reason: "Busy Here"))])
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("ACK ") == 3 }, "osip ACKs the 486")

        var cancelledEvents: [SIPCallEvent] = []
        let cancelled = try ua.call(uri: uri, localMedia: plain)
        cancelled.onEvent = { cancelledEvents.append($0) }
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("INVITE ") == 3 })
        let third = peer.received.last { $0.hasPrefix("INVITE ") }!
        peer.send(answer(third, status: "180 Ringing", peer: peer), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { cancelledEvents == [.ringing] })
        cancelled.cancel()
        XCTAssertTrue(try run(loop, seconds: 3) { peer.count("CANCEL ") == 1 })
        let cancel = peer.received.last { $0.hasPrefix("CANCEL ") }!
        peer.send(answer(cancel, status: "200 OK", peer: peer), to: ua.localAddress)
        peer.send(answer(third, status: "487 Request Terminated", peer: peer), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { cancelledEvents.count == 2 })
        XCTAssertEqual(cancelledEvents.last, .ended(.cancelled))
        XCTAssertTrue(ua.calls.isEmpty)
    }
}
