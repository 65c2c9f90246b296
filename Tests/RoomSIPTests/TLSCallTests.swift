import Foundation
import RoomSDP
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest
@testable import RoomSIP

/// SIP over TLS with real peers: kamailio listening for TLS with a certificate made for the
/// test (board/sip-test/kamailio.cfg, WITH_TLS), baresip registered over TLS too (SRTP only,
/// auto-answer), and the agent registered over its one TLS connection. Started once for the
/// class; each test is a second or less.
final class TLSCallTests: XCTestCase {
    struct Peers {
        let certificates: TestCertificates
        let kamailio: Kamailio
        let far: Baresip
        let loop: EventLoop
        let ua: SIPUserAgent
        let rtp: RTPCounter
    }

    nonisolated(unsafe) static var peers: Peers?
    nonisolated(unsafe) static var setupError: Error?

    override class func setUp() {
        guard Kamailio.isInstalled, Baresip.isInstalled,
              FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so") else { return }
        do {
            let certificates = try TestCertificates()
            try certificates.issue()
            let kamailio = try Kamailio(tls: (certificates.path("server.pem"), certificates.path("server.key")))
            let tlsPort = try XCTUnwrap(kamailio.tlsPort)
            // baresip's Contact names its own TLS listener (it does not reuse its connection
            // for requests to it, as the appliance does), so kamailio connects to it for calls
            // to baresip: it needs a certificate (its PEM holds the key too).
            try certificates.issue("far")
            let farPEM = certificates.path("far-with-key.pem")
            try (String(contentsOfFile: certificates.path("far.pem"), encoding: .utf8) + String(contentsOfFile: certificates.path("far.key"), encoding: .utf8))
                .write(toFile: farPEM, atomically: true, encoding: .utf8)
            let far = try Baresip(account: "<sip:far@127.0.0.1:\(tlsPort);transport=tls>;auth_pass=far-secret;answermode=auto;regint=60;mediaenc=srtp-mand",
                                  config: ["sip_cafile\t\t" + certificates.path("ca.pem"), "sip_certificate\t" + farPEM])
            let loop = try EventLoop()
            let ua = try makeAgent(loop: loop, port: tlsPort, certificates: certificates)
            // Pings often enough to see kamailio's pongs within the class's run.
            ua.keepAliveInterval = .milliseconds(300)
            peers = Peers(certificates: certificates, kamailio: kamailio, far: far, loop: loop, ua: ua, rtp: try RTPCounter(loop: loop))
            ua.register()
        } catch {
            setupError = error
        }
    }

    static func makeAgent(loop: EventLoop, port: Int, certificates: TestCertificates, caFile: String? = nil,
                          serverName: String = "127.0.0.1") throws -> SIPUserAgent {
        let account = try SIPAccount(registrar: SocketAddressForTests.loopback(port), domain: "127.0.0.1", user: "room", password: "room-secret")
        let context = try TLSClientContext(settings: TLSClientSettings(caFile: caFile ?? certificates.path("ca.pem")))
        return try SIPUserAgent(loop: loop, account: account, tls: tlsConnector(context: context, serverName: serverName))
    }

    override class func tearDown() {
        peers?.ua.close()
        peers?.far.stop()
        peers?.kamailio.stop()
        peers = nil
    }

    var p: Peers!

    override func setUpWithError() throws {
        guard Kamailio.isInstalled, Baresip.isInstalled else {
            throw XCTSkip("kamailio or baresip is not installed (scripts/setup installs both)")
        }
        guard FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so") else {
            throw XCTSkip("kamailio-tls-modules is not installed (scripts/setup installs it)")
        }
        if let e = Self.setupError { throw e }
        p = try XCTUnwrap(Self.peers)
        XCTAssertTrue(try run(10) { if case .registered = p.ua.registrationState { true } else { false } },
                      "\(p.ua.registrationState) \(p.kamailio.log())")
        func registered() -> Bool { p.far.responses("reginfo").last.map { ($0["data"] as? String ?? "").contains("OK") } ?? false }
        let deadline = Date().addingTimeInterval(10)
        while !registered() && Date() < deadline {
            p.far.command("reginfo")
            _ = try run(0.2) { registered() }
        }
        XCTAssertTrue(registered(), p.far.log())
        p.rtp.reset()
    }

    override func tearDown() {
        for call in p?.ua.calls ?? [] { call.hangUp() }
        _ = try? run(2) { p.ua.calls.isEmpty && p.far.events("CALL_CLOSED").count >= p.far.events("CALL_ESTABLISHED").count }
    }

    func run(_ seconds: Double, until done: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while try !done() {
            if Date() >= deadline { return false }
            try p.loop.runOnce(timeout: .milliseconds(10))
            p.far.poll()
        }
        return true
    }

    func media() -> CallLocalMedia {
        CallLocalMedia(address: "127.0.0.1", port: p.rtp.port, codecs: CallCodec.allCases, security: .required(BaresipCallTests.randomKey()))
    }

    /// REGISTER over TLS with kamailio's digest (401, then the answer: two REGISTERs), the
    /// Contact with transport=tls, and kamailio answering the CRLF keep-alives.
    func testRegistersOverTLSWithDigestAndKeepsAlive() throws {
        XCTAssertEqual(p.ua.registersSent, 2 * p.ua.registrationsAccepted, "each REGISTER answered a 401 first")
        XCTAssertTrue(p.ua.contactURI.hasSuffix(";transport=tls"), p.ua.contactURI)
        XCTAssertEqual(p.ua.tlsConnectsStarted, 1)
        XCTAssertTrue(try run(3) { (p.ua.tlsPongsReceived ?? 0) >= 1 }, "no pong to the CRLF CRLF pings")
    }

    /// baresip (registered over TLS) calls the room: kamailio sends the INVITE down the room's
    /// connection; the room answers with SDES; SRTP arrives; baresip hangs up.
    func testCallInOverTLSWithSRTP() throws {
        var incoming: SIPCall?
        var events: [SIPCallEvent] = []
        p.ua.onIncomingCall = { call in incoming = call; call.onEvent = { events.append($0) } }
        let closed = p.far.events("CALL_CLOSED").count
        p.far.command("dial", "sip:room@127.0.0.1:\(p.kamailio.tlsPort!);transport=tls")
        XCTAssertTrue(try run(5) { incoming != nil }, "no INVITE reached the room over TLS: \(p.kamailio.log())")
        guard let call = incoming else { return }
        try call.answer(localMedia: media())
        XCTAssertTrue(try run(5) { events.first.map { if case .confirmed = $0 { true } else { false } } ?? false }, "\(events)")
        guard case .confirmed(let agreement) = events.first else { return XCTFail("\(events)") }
        guard case .sdes = agreement.security else { return XCTFail("\(agreement.security)") }
        XCTAssertTrue(try run(5) { p.rtp.count(agreement.payloadType) >= 10 }, "SRTP: \(p.rtp.payloadTypes.prefix(20)) \(p.far.log())")
        p.far.command("hangup")
        XCTAssertTrue(try run(5) { events.last == .ended(.remoteHungUp) }, "\(events)")
        XCTAssertTrue(try run(5) { p.far.events("CALL_CLOSED").count == closed + 1 })
    }

    /// The room calls baresip through kamailio over TLS (407 answered), SRTP flows, the room
    /// hangs up and baresip's call closes.
    func testCallOutOverTLSWithSRTP() throws {
        let closed = p.far.events("CALL_CLOSED").count
        let call = try p.ua.call(uri: "sip:far@127.0.0.1:\(p.kamailio.tlsPort!)", localMedia: media())
        XCTAssertTrue(try run(5) { call.isConfirmedForTests }, "\(call.state) \(p.kamailio.log())")
        guard case .confirmed(let agreement) = call.state else { return }
        guard case .sdes = agreement.security else { return XCTFail("\(agreement.security)") }
        XCTAssertTrue(try run(5) { p.rtp.count(agreement.payloadType) >= 10 }, "SRTP: \(p.rtp.payloadTypes.prefix(20))")
        call.hangUp()
        XCTAssertTrue(try run(5) { p.far.events("CALL_CLOSED").count == closed + 1 }, p.far.log())
    }

    /// A registrar whose certificate does not carry the name asked for, or is signed by another
    /// CA: refused, with the reason in the registration's state; no REGISTER is sent.
    func testWrongNameOrWrongCAIsRefused() throws {
        let port = try XCTUnwrap(p.kamailio.tlsPort)
        let wrongName = try Self.makeAgent(loop: p.loop, port: port, certificates: p.certificates, serverName: "pbx.example.org")
        try p.certificates.issue("other", ca: "otherca")
        let wrongCA = try Self.makeAgent(loop: p.loop, port: port, certificates: p.certificates, caFile: p.certificates.path("otherca.pem"))
        defer { wrongName.close(); wrongCA.close() }
        wrongName.register()
        wrongCA.register()
        func failure(_ ua: SIPUserAgent) -> SIPRegistrationFailure? {
            if case .failed(let f) = ua.registrationState { f } else { nil }
        }
        XCTAssertTrue(try run(5) { failure(wrongName) != nil && failure(wrongCA) != nil }, "\(wrongName.registrationState) \(wrongCA.registrationState)")
        let nameReason = failure(wrongName)?.reason ?? ""
        let caReason = failure(wrongCA)?.reason ?? ""
        XCTAssertTrue(nameReason.contains("certificate refused") && nameReason.contains("host name mismatch") && nameReason.contains("pbx.example.org"), nameReason)
        XCTAssertTrue(caReason.contains("certificate refused") && caReason.contains("certificate verify failed"), caReason)
        XCTAssertEqual(wrongName.registersSent + wrongCA.registersSent, 0)
    }
}

/// RoomSIP's stream transport made of RoomTLS, as roomd's CallLink makes it (RoomSIP does not
/// import RoomTLS: the application hands it the connector).
func tlsConnector(context: TLSClientContext, serverName: String) -> SIPStreamConnector {
    SIPStreamConnector(transportName: "TLS") { (address, loop) throws(SystemError) -> SIPConnectedStream in
        let stream = try StreamConnection.connect(to: address, loop: loop)
        let tls = try TLSConnection(stream: stream, role: .client(context, serverName: serverName), loop: loop)
        return SIPConnectedStream(transport: tls, localAddress: { [weak stream] in stream?.localAddress ?? SocketAddress() },
                                  failedCertificateChecks: { [weak tls] in tls?.failedCertificateChecks ?? false })
    }
}
