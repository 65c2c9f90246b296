import Foundation
import RoomSDP
import RoomSystem
import XCTest
@testable import RoomSIP

/// Issue 29's bad-input line, case by case, at the user agent: a wrong password, a registrar that
/// does not answer, an INVITE flood from one source and from many, a hostile SDP, malformed
/// messages. Each checks the state the application (and `roomctl status`) sees and the line
/// roomd's log gets: the agent's own lines are the daemon's (CallLink adds none for these).
final class BadInputTests: XCTestCase {
    /// Runs `body` with standard error (roomd's log, `Log`'s output) going to a file, and returns
    /// what was written.
    func capturingLog(_ body: () throws -> Void) throws -> String {
        let path = NSTemporaryDirectory() + "roomsip-log-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let saved = dup(2)
        dup2(fd, 2)
        defer {
            dup2(saved, 2)
            close(saved)
            close(fd)
            unlink(path)
        }
        try body()
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    func lines(_ log: String, containing text: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    // MARK: Registration

    /// A registrar that refuses the password: `failed(401 …)` naming the registrar and the
    /// auth user, two REGISTERs per attempt (the answered challenge is refused again), and the
    /// next attempt only after `maximumRetryInterval` (15 min in roomd; 0.4 s here).
    func testWrongPasswordNamesTheAuthUserAndRegistrarAndWaitsBeforeTryingAgain() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        var nonce = 0
        registrar.answer = { _ in
            nonce += 1
            return ("401 Unauthorized", "WWW-Authenticate: Digest realm=\"example.org\", nonce=\"n\(nonce)\", qop=\"auth\"\r\n")
        }
        let account = try SIPAccount(registrar: registrar.socket.localAddress, domain: "example.org", user: "room",
                                     authUser: "room-auth", password: "wrong", expires: 60)
        let ua = try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
        defer { ua.close() }
        ua.retryInterval = .milliseconds(100)
        ua.maximumRetryInterval = .milliseconds(400)
        let log = try capturingLog {
            ua.register()
            XCTAssertTrue(try run(loop, seconds: 3) { if case .failed = ua.registrationState { true } else { false } })
            XCTAssertEqual(ua.registersSent, 2)
            XCTAssertFalse(try run(loop, seconds: 0.3) { ua.registersSent > 2 }, "no try before the long wait")
            XCTAssertTrue(try run(loop, seconds: 3) { ua.registersSent == 4 && ua.registrationState != .registering })
        }
        guard case .failed(let failure) = ua.registrationState else { return XCTFail("\(ua.registrationState)") }
        XCTAssertEqual(failure.statusCode, 401)
        XCTAssertFalse(failure.willRetry, "not a transient failure")
        XCTAssertEqual(failure.retryDelay, .milliseconds(400))
        let expected = "401 registrar \(registrar.socket.localAddress) refused the credentials of auth user room-auth "
            + "(wrong user or password); next try in 0.4 s"
        XCTAssertEqual(failure.description, expected)
        XCTAssertEqual(lines(log, containing: "sip: registration of sip:room@example.org failed: \(expected)").count, 2, log)
        XCTAssertEqual(registrar.requests.count, 4)
    }

    /// A registrar that never answers: after the REGISTER's timeout (timer F: 32 s in roomd,
    /// 0.2 s here) `failed` with no status and the registrar's address, then tries again after
    /// `retryInterval`, doubling up to `maximumRetryInterval`.
    func testSilentRegistrarFailsAfterTheTimeoutAndBacksOff() throws {
        let loop = try EventLoop()
        let silent = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))   // bound, never read
        defer { silent.close() }
        let account = try SIPAccount(registrar: silent.localAddress, domain: "example.org", user: "room", password: "x")
        let ua = try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
        defer { ua.close() }
        ua.registerTimeout = .milliseconds(200)
        ua.retryInterval = .milliseconds(100)
        ua.maximumRetryInterval = .milliseconds(200)
        var failures: [SIPRegistrationFailure] = []
        ua.onRegistrationChange = { if case .failed(let f) = $0 { failures.append(f) } }
        let started = Date()
        let log = try capturingLog {
            ua.register()
            XCTAssertTrue(try run(loop, seconds: 4) { failures.count == 3 })
        }
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(failures.map(\.retryDelay), [.milliseconds(100), .milliseconds(200), .milliseconds(200)])
        XCTAssertEqual(Set(failures.map(\.reason)), ["no answer from the registrar at \(silent.localAddress)"])
        XCTAssertEqual(failures.map(\.statusCode), [nil, nil, nil])
        XCTAssertTrue(failures.allSatisfy(\.willRetry))
        XCTAssertEqual(ua.registersSent, 3, "one REGISTER per attempt (osip's retransmissions not counted)")
        // 3 × 0.2 s waiting, 0.1 + 0.2 s between: 0.9 s; well under a tight loop's pace.
        XCTAssertGreaterThan(elapsed, 0.85)
        XCTAssertEqual(lines(log, containing: "failed: no answer from the registrar at \(silent.localAddress); next try in 0.2 s").count, 2, log)
    }

    /// A failed un-REGISTER is not retried as a REGISTER (the retry after a failure registers
    /// again, which must not undo an `unregister()`).
    func testFailedUnregisterIsNotRetried() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        let account = try SIPAccount(registrar: registrar.socket.localAddress, domain: "example.org", user: "room", password: "x")
        let ua = try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
        defer { ua.close() }
        ua.retryInterval = .milliseconds(100)
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 3) { if case .registered = ua.registrationState { true } else { false } })
        registrar.answer = { _ in ("503 Service Unavailable", "") }
        _ = try capturingLog {
            ua.unregister()
            XCTAssertTrue(try run(loop, seconds: 3) { if case .failed = ua.registrationState { true } else { false } })
            XCTAssertFalse(try run(loop, seconds: 0.3) { ua.registersSent > 2 })
        }
        guard case .failed(let failure) = ua.registrationState else { return XCTFail("\(ua.registrationState)") }
        XCTAssertNil(failure.retryDelay)
    }

    // MARK: INVITE floods

    /// An agent not registered anywhere, with `registrar` as its registrar's address (a known
    /// peer) when given.
    func agent(_ loop: EventLoop, registrar: SocketAddress = .ipv4Loopback(port: 9)) throws -> SIPUserAgent {
        let account = try SIPAccount(registrar: registrar, domain: "127.0.0.1", user: "room", password: "x")
        return try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
    }

    /// 300 INVITEs from one source: the first rings, those within the source's budget are refused
    /// 486 once each (statelessly: nothing kept, nothing resent), the rest are dropped unread; the
    /// log gets three lines of each kind, not 300. Another caller is then served: once the flood's call is
    /// declined, its INVITE rings.
    func testInviteFloodFromOneSource() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let flooder = try FakePeer(loop: loop)
        let caller = try FakePeer(loop: loop)
        var rang: [SIPCall] = []
        ua.onIncomingCall = { rang.append($0) }
        let log = try capturingLog {
            // In rounds, so that the kernel's receive buffer does not drop them before the agent does.
            for round in 0 ..< 6 {
                for i in 0 ..< 50 {
                    flooder.send(flooder.invite(callID: "flood\(round)-\(i)@peer", branch: "z9hG4bKf\(round)x\(i)"), to: ua.localAddress)
                }
                _ = try run(loop, seconds: 0.05) { false }
            }
            // Past timer G's first retransmission (0.5 s) of a refusal that would be kept.
            _ = try run(loop, seconds: 0.6) { false }
        }
        XCTAssertEqual(rang.count, 1)
        XCTAssertEqual(1 + ua.callsRefusedBusy + ua.datagramsOverBudget, 300, "each INVITE rang, was refused or was dropped")
        XCTAssertGreaterThan(ua.datagramsOverBudget, 200)
        XCTAssertEqual(ua.datagramsDropped, ua.datagramsOverBudget)
        XCTAssertEqual(flooder.count("SIP/2.0 486"), ua.callsRefusedBusy, "each refusal sent once, none resent")
        XCTAssertEqual(ua.live.count, 1, "only the ringing call's transaction is kept")
        let drops = lines(log, containing: "sip: dropped a datagram from 127.0.0.1:\(flooder.port): over its source's budget")
        let refusals = lines(log, containing: "sip: refused an INVITE from sip:fake@127.0.0.1 (127.0.0.1:\(flooder.port)): 486 Busy Here")
        XCTAssertEqual(drops.count, 3, log)
        XCTAssertEqual(refusals.count, 3, log)
        XCTAssertEqual(log.split(separator: "\n").filter { $0.contains("sip: ") }.count, 6, log)
        XCTAssertTrue(refusals[0].hasPrefix("<5>"), "a busy refusal is a notice")
        XCTAssertEqual(ua.badInputLog.suppressed.map(\.kind).sorted(), ["INVITEs refused 486", "datagrams over budget"].sorted())

        rang[0].decline()
        caller.send(caller.invite(callID: "caller@elsewhere"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { caller.count("SIP/2.0 180") == 1 })
        XCTAssertEqual(rang.count, 2)
        XCTAssertEqual(caller.count("SIP/2.0 486"), 0)
    }

    /// INVITEs from 30 addresses, ten each (each source within its own budget), against an
    /// application that declines every stranger at once (so each admitted INVITE leaves a
    /// transaction waiting for its ACK, the worst case for memory): the strangers' shared budget
    /// admits about a hundred, the table keeps at most three quarters of `maximumTransactions`
    /// (40 here) for them, and a call the registrar relays afterwards still rings.
    func testInviteFloodFromManySourcesLeavesRoomForTheRegistrar() throws {
        let loop = try EventLoop()
        let registrar = try FakePeer(loop: loop)
        let ua = try agent(loop, registrar: registrar.socket.localAddress)
        defer { ua.close() }
        ua.maximumTransactions = 40
        let flooders = try (0 ..< 30).map { _ in try FakePeer(loop: loop) }
        var alice: SIPCall?
        ua.onIncomingCall = { call in
            if call.remoteURI == "sip:alice@127.0.0.1" { alice = call } else { call.decline() }
        }
        var mostTransactions = 0
        _ = try capturingLog {
            for round in 0 ..< 10 {
                for (n, flooder) in flooders.enumerated() {
                    flooder.send(flooder.invite(callID: "f\(n)-\(round)@many", branch: "z9hG4bKm\(n)x\(round)"), to: ua.localAddress)
                }
                _ = try run(loop, seconds: 0.03) { false }
                mostTransactions = max(mostTransactions, ua.live.count)
            }
            let relayed = registrar.invite(callID: "alice@relayed").replacingOccurrences(of: "<sip:fake@127.0.0.1>;tag", with: "<sip:alice@127.0.0.1>;tag")
            registrar.send(relayed, to: ua.localAddress)
            XCTAssertTrue(try run(loop, seconds: 3) { registrar.count("SIP/2.0 180") == 1 })
            mostTransactions = max(mostTransactions, ua.live.count)
        }
        XCTAssertNotNil(alice, "the registrar's call rings")
        XCTAssertLessThanOrEqual(mostTransactions, 31, "30 for strangers, 1 for the registrar's call")
        XCTAssertGreaterThan(ua.datagramsOverBudget, 150, "the shared budget holds (\(ua.datagramsOverBudget) of 300)")
        let tableFull = ua.datagramsDropped - ua.datagramsOverBudget
        XCTAssertGreaterThan(tableFull, 0, "some admitted INVITEs found the strangers' part of the table full")
        XCTAssertEqual(ua.budget.sourcesRemembered, 31)
    }

    /// The per-source table stays bounded whatever the number of addresses, and the budget all
    /// strangers share runs out while a known peer's does not.
    func testSourceBudgetIsBoundedAndStrangersShareOne() throws {
        var budget = SIPSourceBudget()
        let registrar = SocketAddress.ipv4Loopback(port: 5060)
        var admitted = 0
        for i in 0 ..< 1000 {
            let source = try SocketAddress(ip: "10.0.\(i / 250).\(i % 250 + 1)", port: 5060)
            if budget.admit(source, now: 1_000, isKnownPeer: { false }) { admitted += 1 }
        }
        XCTAssertEqual(admitted, 100, "the strangers' burst")
        XCTAssertEqual(budget.sourcesRemembered, 256)
        XCTAssertTrue(budget.admit(registrar, now: 1_000, isKnownPeer: { true }))
        XCTAssertFalse(budget.admit(.ipv4Loopback(port: 1), now: 1_000, isKnownPeer: { false }))
        XCTAssertTrue(budget.admit(.ipv4Loopback(port: 1), now: 1_000 + 100_000_000, isKnownPeer: { false }), "50 a second: one after 0.1 s")
    }

    // MARK: Hostile SDP, malformed messages

    /// Offers that cannot be answered get 488 with the reason in a Warning and in the log, once
    /// (statelessly), and leave no call: those that do not parse before the application hears of
    /// them, those that parse but cannot be answered when the application checks them as they
    /// arrive (what roomd's CallLink does with `refuseOffer(because:)`, so they never ring, here
    /// or at the far end).
    func testHostileOffersAre488WithTheReasonAndLeaveNoCall() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        let local = CallLocalMedia(address: "127.0.0.1", port: 9, security: .preferred(SDESKey(inline: String(repeating: "A", count: 40))!))
        var heard = 0
        ua.onIncomingCall = { call in
            heard += 1
            do throws(SDPError) {
                _ = try CallAudioNegotiation.answer(to: call.remoteOffer!, local: local, origin: .init(sessionID: "1"))
            } catch {
                call.refuseOffer(because: error.description)
            }
        }
        let head = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        let offers: [(body: String, reason: String)] = [
            (head + String(repeating: "m=audio 4000 RTP/AVP 0\r\n", count: 2_000), "more than 32 media sections"),
            (head + "m=audio 4000 RTP/AVP 0\r\n" + String(repeating: "a=x-junk:\(String(repeating: "z", count: 20))\r\n", count: 1_500)
                + "c=IN IP4 printer.example\r\n", "'printer.example' is not an IPv4 address"),
            (head.replacingOccurrences(of: "c=IN IP4 127.0.0.1", with: "c=IN IP6 2001:db8::1") + "m=audio 4000 RTP/AVP 0\r\n",
             "an IP6 address, and this appliance's media address 127.0.0.1 is IP4"),
            (head + "m=audio 99999 RTP/AVP 0\r\n", "port '99999' is not 0-65535"),
            (head + "m=audio 4000 RTP/AVP 0 128\r\n", "payload type '128' is not 0-127"),
            (head + "m=audio 4000 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:c2hvcnQ=\r\n", "not 40 base64 characters"),
            (head + "m=audio 4000 RTP/SAVP 0\r\na=crypto:1 AES_256_CM_HMAC_SHA1_80 inline:\(String(repeating: "B", count: 40))\r\n",
             "no crypto line with a suite we support"),
            (head + "m=audio 4000 RTP/AVP 0 101\r\na=rtpmap:101 telephone-event/0\r\n", "a=rtpmap"),
        ]
        let log = try capturingLog {
            for (i, offer) in offers.enumerated() {
                peer.send(peer.invite(callID: "hostile\(i)@peer", branch: "z9hG4bKh\(i)", body: offer.body), to: ua.localAddress)
                XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 488") == i + 1 }, "offer \(i): \(peer.received.last ?? "")")
            }
        }
        let refusals = peer.received.filter { $0.hasPrefix("SIP/2.0 488") }
        for (i, offer) in offers.enumerated() {
            XCTAssertTrue(refusals[i].contains("Warning: ") && refusals[i].contains(offer.reason), "offer \(i): \(refusals[i])")
        }
        XCTAssertTrue(ua.calls.isEmpty)
        XCTAssertEqual(heard, offers.count - 2, "the 2,000 m-lines and the port do not parse: refused before the application hears")
        XCTAssertEqual(peer.count("SIP/2.0 180"), 0, "refused as they arrive, they do not ring at the far end either")
        _ = try run(loop, seconds: 0.6) { false }   // past timer G's first resend (0.5 s) of a refusal that would be kept
        XCTAssertEqual(peer.count("SIP/2.0 488"), offers.count, "each refused once, statelessly")
        XCTAssertTrue(ua.live.isEmpty, "no transaction kept")
        let logged = lines(log, containing: "sip: refused ")
        XCTAssertEqual(logged.count, 5, "three lines a minute for each kind (INVITEs refused, offers refused), the rest summed up: \(log)")
        XCTAssertTrue(logged[0].contains("488 Not Acceptable Here: SDP line") && logged[0].contains("more than 32 media sections"), logged[0])
        XCTAssertTrue(logged[1].contains("refused the offer of sip:fake@127.0.0.1 (127.0.0.1:\(peer.port)) with 488") && logged[1].contains("printer.example"),
                      logged[1])
    }

    /// A hostile SDP inside a call: a 2xx to our INVITE whose answer cannot be used is ACKed and
    /// the call hung up with the reason; a re-INVITE whose offer cannot be answered gets 488 and
    /// the call keeps its media.
    func testHostileAnswerHangsUpAndHostileReinviteKeepsTheCall() throws {
        let loop = try EventLoop()
        let ua = try agent(loop)
        defer { ua.close() }
        let peer = try FakePeer(loop: loop)
        let plain = CallLocalMedia(address: "127.0.0.1", port: 40_000, security: .plain)
        func response(_ request: String, _ status: String, body: String) -> String {
            let lines = request.components(separatedBy: "\r\n")
            func header(_ name: String) -> String { lines.first { $0.hasPrefix(name + ":") } ?? "" }
            return "SIP/2.0 \(status)\r\n\(header("Via"))\r\n\(header("From"))\r\n\(header("To"));tag=callee\r\n\(header("Call-ID"))\r\n"
                + "\(header("CSeq"))\r\nContact: <sip:fake@127.0.0.1:\(peer.port)>\r\nContent-Type: application/sdp\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
        var events: [SIPCallEvent] = []
        let log = try capturingLog {
            let call = try ua.call(uri: "sip:fake@127.0.0.1:\(peer.port)", localMedia: plain)
            call.onEvent = { events.append($0) }
            XCTAssertTrue(try run(loop, seconds: 3) { peer.count("INVITE ") == 1 })
            let hostile = FakePeer.offer.replacingOccurrences(of: "c=IN IP4 127.0.0.1", with: "c=IN IP4 gw.example")
            peer.send(response(peer.received.first { $0.hasPrefix("INVITE ") }!, "200 OK", body: hostile), to: ua.localAddress)
            XCTAssertTrue(try run(loop, seconds: 3) { peer.count("ACK ") == 1 && peer.count("BYE ") == 1 })
        }
        XCTAssertEqual(events, [.ended(.failed("the answer is unusable: SDP: c: 'gw.example' is not an IPv4 address"))])
        XCTAssertEqual(lines(log, containing: "sip: the answer of sip:fake@127.0.0.1:\(peer.port) is unusable, hanging up: SDP: c: 'gw.example'").count, 1, log)

        var incoming: [SIPCallEvent] = []
        ua.onIncomingCall = { call in call.onEvent = { incoming.append($0) }; try? call.answer(localMedia: plain) }
        peer.send(peer.invite(callID: "reinvite@peer"), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { peer.received.contains { $0.hasPrefix("SIP/2.0 200") && $0.contains("Call-ID: reinvite@peer") } })
        let ok = peer.received.last { $0.hasPrefix("SIP/2.0 200") && $0.contains("Call-ID: reinvite@peer") }!
        let tag = String(ok.components(separatedBy: "\r\n").first { $0.hasPrefix("To:") }!.split(separator: "=").last!)
        peer.send(peer.request("ACK", callID: "reinvite@peer", branch: "z9hG4bKa1", cseq: 1, toTag: tag), to: ua.localAddress)
        XCTAssertTrue(try run(loop, seconds: 3) { incoming.count == 1 })
        let reinvite = peer.invite(callID: "reinvite@peer", branch: "z9hG4bKre", cseq: 2, body: FakePeer.offer.replacingOccurrences(of: "RTP/AVP 0 8 101", with: "RTP/AVP 300"))
            .replacingOccurrences(of: "To: <sip:room@127.0.0.1>", with: "To: <sip:room@127.0.0.1>;tag=\(tag)")
        let reinviteLog = try capturingLog {
            peer.send(reinvite, to: ua.localAddress)
            XCTAssertTrue(try run(loop, seconds: 3) { peer.count("SIP/2.0 488") == 1 })
        }
        XCTAssertTrue(peer.received.last { $0.hasPrefix("SIP/2.0 488") }!.contains("payload type '300' is not 0-127"))
        XCTAssertEqual(incoming.count, 1, "no update, no end: \(incoming)")
        guard case .confirmed = ua.calls.first?.state else { return XCTFail("\(ua.calls.map(\.state))") }
        XCTAssertEqual(lines(reinviteLog, containing: "sip: refused the re-INVITE of sip:fake@127.0.0.1 with 488, the call keeps its media").count, 1, reinviteLog)
    }

    /// The log's cap: three lines of a kind at once, one more every twenty seconds, twenty of
    /// all kinds a minute; the rest counted by kind and source for the minute's summary.
    func testBadInputLogAllowsThreeLinesOfAKindAMinuteAndSumsUpTheRest() {
        var log = SIPBadInputLog()
        let start: UInt64 = 1_000_000_000
        XCTAssertEqual((0 ..< 8).filter { _ in log.admitLine("datagrams over budget", now: start) }.count, 3)
        XCTAssertTrue(log.admitLine("offers refused 488", now: start), "another kind has its own allowance")
        let kinds = (0 ..< 30).map { "kind \($0)" }
        XCTAssertEqual(kinds.filter { log.admitLine($0, now: start) }.count, 16, "20 at once in all, 4 used")
        XCTAssertFalse(log.admitLine("datagrams over budget", now: start + 19_000_000_000))
        XCTAssertTrue(log.admitLine("datagrams over budget", now: start + 21_000_000_000))
        for port in 1 ... 7 { log.count("datagrams over budget", from: .ipv4Loopback(port: UInt16(port))) }
        log.count("datagrams over budget", from: .ipv4Loopback(port: 7))   // an address counted once
        log.count("datagrams over budget", from: .ipv4Loopback(port: 7))
        log.count("INVITEs refused 486", from: .ipv4Loopback(port: 1))
        XCTAssertEqual(log.takeSummary(), "9 datagrams over budget, 1 INVITEs refused 486 in the last 60 s, not logged one by one "
                       + "(from 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3, 127.0.0.1:4 and 3 other addresses)")
        XCTAssertNil(log.takeSummary())
    }
}
