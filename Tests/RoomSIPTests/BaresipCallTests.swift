import Foundation
import RoomSDP
import RoomSystem
import RoomTestSupport
import XCTest
@testable import RoomSIP

/// Counts the RTP datagrams a far end sends to the port an agreement gave it: proof that the
/// SDP the agent sent is one a real peer can use (address, port, payload type).
final class RTPCounter {
    let socket: UDPSocket
    private(set) var payloadTypes: [UInt8] = []

    init(loop: EventLoop) throws {
        socket = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        try socket.onReadable(loop: loop) { [unowned self] s in
            while let d = (try? s.receive(into: buffer)) ?? nil {
                if d.count >= 12, buffer[0] >> 6 == 2 { payloadTypes.append(buffer[1] & 0x7F) }
            }
        }
    }

    var port: Int { Int(socket.localAddress.port!) }
    func count(_ pt: UInt8) -> Int { payloadTypes.filter { $0 == pt }.count }
    func reset() { payloadTypes.removeAll() }
}

/// Calls between roomd's agent and baresip, both registered at kamailio (which challenges
/// INVITEs with 407, as a PBX does). The peers are started once for the class: kamailio,
/// baresip `far` (plain RTP, auto-answer) and baresip `farsec` (`mediaenc=srtp-mand`).
final class BaresipCallTests: XCTestCase {
    struct Peers {
        let kamailio: Kamailio
        let far: Baresip
        let farsec: Baresip
        let loop: EventLoop
        let ua: SIPUserAgent
        let rtp: RTPCounter
    }

    nonisolated(unsafe) static var peers: Peers?
    nonisolated(unsafe) static var setupError: Error?

    override class func setUp() {
        guard Kamailio.isInstalled, Baresip.isInstalled else { return }
        do {
            let kamailio = try Kamailio()
            let k = kamailio.port
            let far = try Baresip(account: "<sip:far@127.0.0.1:\(k);transport=udp>;auth_pass=far-secret;answermode=auto;regint=60")
            let farsec = try Baresip(account: "<sip:farsec@127.0.0.1:\(k);transport=udp>;auth_pass=farsec-secret;answermode=auto;regint=60;mediaenc=srtp-mand")
            let loop = try EventLoop()
            let account = try SIPAccount(registrar: SocketAddressForTests.loopback(k), domain: "127.0.0.1", user: "room", password: "room-secret")
            let ua = try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
            peers = Peers(kamailio: kamailio, far: far, farsec: farsec, loop: loop, ua: ua, rtp: try RTPCounter(loop: loop))
            ua.register()
        } catch {
            setupError = error
        }
    }

    override class func tearDown() {
        peers?.ua.close()
        peers?.far.stop()
        peers?.farsec.stop()
        peers?.kamailio.stop()
        peers = nil
    }

    var p: Peers!

    override func setUpWithError() throws {
        guard Kamailio.isInstalled, Baresip.isInstalled else {
            throw XCTSkip("kamailio or baresip is not installed (scripts/setup installs both)")
        }
        if let e = Self.setupError { throw e }
        p = try XCTUnwrap(Self.peers)
        XCTAssertTrue(try run(10) { if case .registered = p.ua.registrationState { true } else { false } }, "\(p.ua.registrationState)")
        // Both baresips registered (kamailio would answer 404 otherwise).
        for b in [p.far, p.farsec] {
            func registered() -> Bool { b.responses("reginfo").last.map { ($0["data"] as? String ?? "").contains("OK") } ?? false }
            let deadline = Date().addingTimeInterval(10)
            while !registered() && Date() < deadline {
                b.command("reginfo")
                _ = try run(0.2) { registered() }
            }
            XCTAssertTrue(registered(), b.log())
        }
        p.rtp.reset()
    }

    override func tearDown() {
        // No call left over for the next test. No peers when the set-up failed (a port taken
        // between choosing it and baresip binding it): nothing to hang up then.
        guard let p else { return }
        for call in p.ua.calls { call.hangUp() }
        _ = try? run(2) { p.ua.calls.isEmpty && p.far.events("CALL_CLOSED").count >= p.far.events("CALL_ESTABLISHED").count }
    }

    /// Runs the loop (and reads baresip's control sockets) until `done` or `seconds` pass.
    func run(_ seconds: Double, until done: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while try !done() {
            if Date() >= deadline { return false }
            try p.loop.runOnce(timeout: .milliseconds(10))
            p.far.poll()
            p.farsec.poll()
        }
        return true
    }

    var kamailioURI: String { "127.0.0.1:\(p.kamailio.port)" }

    func media(_ codecs: [CallCodec] = CallCodec.allCases, security: CallLocalMedia.Security = .plain) -> CallLocalMedia {
        CallLocalMedia(address: "127.0.0.1", port: p.rtp.port, codecs: codecs, security: security)
    }

    static func randomKey() -> SDESKey {
        SDESKey(inline: Data((0 ..< 30).map { _ in UInt8.random(in: 0 ... 255) }).base64EncodedString())!
    }

    /// A second of 440 Hz, 16-bit mono WAV at `rate`, in the scratch directory.
    func toneFile(rate: Int) throws -> String {
        let path = TestScratch.directory("roomsip-tone") + "/tone-\(rate).wav"
        if FileManager.default.fileExists(atPath: path) { return path }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var samples = [UInt8]()
        for i in 0 ..< rate * 5 {
            let v = Int16(8000 * sin(2 * Double.pi * 440 * Double(i) / Double(rate)))
            samples += [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
        }
        func le32(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)] }
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        let header = Array("RIFF".utf8) + le32(36 + samples.count) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(1)
            + le32(rate) + le32(rate * 2) + le16(2) + le16(16) + Array("data".utf8) + le32(samples.count)
        try Data(header + samples).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// baresip calls the room; the room answers with each codec in turn; RTP arrives with the
    /// agreed payload type; baresip hangs up and the call ends on our side.
    func testFarEndCallsAndHangsUpInEachCodec() throws {
        for (codecs, expected) in [([CallCodec.opus, .g722], CallCodec.opus), ([.g722], .g722), ([.pcmu], .pcmu), ([.pcma], .pcma)] {
            var incoming: SIPCall?
            var events: [SIPCallEvent] = []
            p.ua.onIncomingCall = { call in incoming = call; call.onEvent = { events.append($0) } }
            let established = p.far.events("CALL_ESTABLISHED").count
            let closed = p.far.events("CALL_CLOSED").count
            p.rtp.reset()
            // ausine plays only at 48 kHz: for G.722 and G.711 baresip reads a tone file at the
            // codec's rate instead.
            p.far.command("ausrc", expected == .opus ? "ausine,440" : "aufile," + (try toneFile(rate: expected.sampleRate)))
            p.far.command("dial", "sip:room@\(kamailioURI)")
            XCTAssertTrue(try run(5) { incoming != nil }, "no INVITE reached the room: \(p.kamailio.log())")
            guard let call = incoming else { return }
            XCTAssertEqual(call.remoteURI, "sip:far@\(kamailioURI)")
            XCTAssertEqual(call.state, .ringing)
            try call.answer(localMedia: media(codecs))
            XCTAssertTrue(try run(5) { events.first.map { if case .confirmed = $0 { true } else { false } } ?? false }, "\(events)")
            guard case .confirmed(let agreement) = events.first else { return XCTFail("\(events)") }
            XCTAssertEqual(agreement.codec, expected)
            XCTAssertEqual(agreement.security, .plain)
            XCTAssertTrue(try run(5) { p.far.events("CALL_ESTABLISHED").count == established + 1 })
            XCTAssertTrue(try run(5) { p.rtp.count(agreement.payloadType) >= 10 }, "RTP: \(p.rtp.payloadTypes.prefix(20)) \(p.far.log())")
            p.far.command("hangup")
            XCTAssertTrue(try run(5) { events.last == .ended(.remoteHungUp) }, "\(events)")
            XCTAssertTrue(try run(5) { p.far.events("CALL_CLOSED").count == closed + 1 })
            XCTAssertTrue(p.ua.calls.isEmpty)
        }
        p.far.command("ausrc", "ausine,440")
    }

    /// The room calls baresip (auto-answer) through kamailio (407 answered once), holds and
    /// resumes with re-INVITEs, is held and resumed by baresip, then hangs up: baresip's call
    /// closes.
    func testRoomCallsHoldsResumesAndHangsUp() throws {
        let closed = p.far.events("CALL_CLOSED").count
        var events: [SIPCallEvent] = []
        let call = try p.ua.call(uri: "sip:far@\(kamailioURI)", localMedia: media())
        call.onEvent = { events.append($0) }
        XCTAssertTrue(try run(5) { call.isConfirmedForTests }, "\(call.state) \(p.kamailio.log())")
        guard case .confirmed(let agreement) = call.state else { return }
        XCTAssertEqual(agreement.codec, .opus)
        XCTAssertEqual(events.first, .ringing, "baresip's 180 before its 200")
        XCTAssertTrue(try run(5) { p.rtp.count(agreement.payloadType) >= 10 }, "RTP: \(p.rtp.payloadTypes.prefix(20))")

        try call.hold()
        XCTAssertTrue(try run(5) { events.count == 3 }, "\(events)")
        guard case .updated(let held) = events.last else { return XCTFail("\(events)") }
        XCTAssertEqual(held.localDirection, .sendonly)
        XCTAssertEqual(held.remoteDirection, .recvonly)
        try call.resume()
        XCTAssertTrue(try run(5) { events.count == 4 }, "\(events)")
        guard case .updated(let resumed) = events.last else { return XCTFail("\(events)") }
        XCTAssertEqual(resumed.remoteDirection, .sendrecv)

        // baresip holds us (its sendonly re-INVITE through kamailio's route) and resumes.
        p.far.command("hold")
        XCTAssertTrue(try run(5) { events.count == 5 }, "\(events) \(p.far.log())")
        guard case .updated(let farHold) = events.last else { return XCTFail("\(events)") }
        XCTAssertTrue(farHold.isHeldByRemote, "\(farHold.remoteDirection)")
        p.far.command("resume")
        XCTAssertTrue(try run(5) { events.count == 6 }, "\(events)")
        guard case .updated(let farResumed) = events.last else { return XCTFail("\(events)") }
        XCTAssertFalse(farResumed.isHeldByRemote)

        call.hangUp()
        XCTAssertEqual(call.state, .ended(.localHungUp))
        XCTAssertTrue(try run(5) { p.far.events("CALL_CLOSED").count == closed + 1 }, p.far.log())
    }

    /// The room declines baresip's call: baresip reports the 603.
    func testRoomDeclines() throws {
        let closed = p.far.events("CALL_CLOSED").count
        var incoming: SIPCall?
        p.ua.onIncomingCall = { incoming = $0 }
        p.far.command("dial", "sip:room@\(kamailioURI)")
        XCTAssertTrue(try run(5) { incoming != nil })
        incoming?.decline()
        XCTAssertEqual(incoming?.state, .ended(.rejected(code: 603)))
        XCTAssertTrue(try run(5) { p.far.events("CALL_CLOSED").count == closed + 1 })
        let reason = p.far.events("CALL_CLOSED").last?["param"] as? String ?? ""
        XCTAssertTrue(reason.contains("603"), reason)
    }

    /// SDES both ways with an SRTP-only baresip: it calls the room (RTP/SAVP offer answered
    /// with our key), SRTP arrives; the room calls it with an RTP/SAVP offer, confirmed.
    func testSRTPWithSDESBothWays() throws {
        let key = Self.randomKey()
        var incoming: SIPCall?
        var events: [SIPCallEvent] = []
        p.ua.onIncomingCall = { call in incoming = call; call.onEvent = { events.append($0) } }
        p.farsec.command("dial", "sip:room@\(kamailioURI)")
        XCTAssertTrue(try run(5) { incoming != nil }, p.farsec.log())
        XCTAssertEqual(incoming?.remoteOffer?.media.first?.proto, "RTP/SAVP")
        try incoming?.answer(localMedia: media(security: .required(key)))
        XCTAssertTrue(try run(5) { !events.isEmpty })
        guard case .confirmed(let agreement) = events.first, case .sdes(let suite, let ours, _) = agreement.security else {
            return XCTFail("\(events)")
        }
        XCTAssertEqual(ours, key)
        XCTAssertEqual(suite, .aesCM128HMACSHA1_80)
        XCTAssertTrue(try run(5) { p.rtp.count(agreement.payloadType) >= 10 }, "SRTP: \(p.rtp.payloadTypes.prefix(20))")
        incoming?.hangUp()
        XCTAssertTrue(try run(5) { p.farsec.events("CALL_CLOSED").count == 1 })

        p.rtp.reset()
        let call = try p.ua.call(uri: "sip:farsec@\(kamailioURI)", localMedia: media(security: .required(key)))
        XCTAssertTrue(try run(5) { call.isConfirmedForTests }, "\(call.state)")
        guard case .confirmed(let out) = call.state, case .sdes(_, _, let theirs) = out.security else { return XCTFail("\(call.state)") }
        XCTAssertNotEqual(theirs, key)
        XCTAssertTrue(try run(5) { p.rtp.count(out.payloadType) >= 10 })
        call.hangUp()
        XCTAssertTrue(try run(5) { p.farsec.events("CALL_CLOSED").count == 2 })
    }
}

extension SIPCall {
    var isConfirmedForTests: Bool { if case .confirmed = state { true } else { false } }
}
