import RoomBase
import RoomClient
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest

/// roomd's session and roomserver over TLS 1.3 (issue 11): the join, the certificate checks
/// and their wording (what `roomctl status` shows an installer), reload, and the mix-ups.
final class SignallingTLSTests: XCTestCase {
    func testJoinAndRequestsOverTLSWithTheCAFile() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs)
        let a = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        let b = try h.member("bob", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { a.joined && b.joined && a.session.participants.count == 2 },
                      "a: \(a.session.connectionState), b: \(b.session.connectionState)")
        // A request and the event it causes, both ways through TLS.
        var answered = false
        a.session.setAttribute(key: "topic", value: "budget") { result in
            if case .success = result { answered = true }
        }
        XCTAssertTrue(h.run { answered && b.session.attributes["topic"] == "budget" })
        XCTAssertEqual(h.server.room(named: "lobby", app: "app")?.attributes.count, 1)
        XCTAssertFalse(a.states.contains { if case .failed = $0 { true } else { false } })
    }

    /// roomd's session over TLS to a server of two workers: the front door's TLS session moves
    /// to the worker of the room, and requests and events go on through it there.
    func testATLSSessionMovesToTheWorkerOfItsRoom() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs, workers: 2)
        let group = try XCTUnwrap(h.group)
        var rooms = [String?](repeating: nil, count: 2)
        for n in 0 ..< 100 where rooms.contains(nil) {
            let worker = group.worker(for: RoomKey(app: "app", name: "room-\(n)"))
            if rooms[worker] == nil { rooms[worker] = "room-\(n)" }
        }
        for (worker, room) in rooms.map({ $0! }).enumerated() {
            let a = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")), room: room)
            let b = try h.member("bob", tls: TLSClientSettings(caFile: certs.path("ca.pem")), room: room)
            XCTAssertTrue(h.run { a.joined && b.joined && a.session.participants.count == 2 },
                          "worker \(worker): a: \(a.session.connectionState), b: \(b.session.connectionState)")
            var answered = false
            a.session.setAttribute(key: "topic", value: "w\(worker)") { result in
                if case .success = result { answered = true }
            }
            XCTAssertTrue(h.run { answered && b.session.attributes["topic"] == "w\(worker)" }, "worker \(worker)")
            a.session.stop()
            b.session.stop()
        }
    }

    func testWrongCAIsRefusedWithTheReason() throws {
        let certs = try TestCertificates()
        try certs.issue()
        try certs.issue("other", ca: "otherca")
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("otherca.pem")))
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertTrue(m.failure!.contains("certificate verify failed: unable to get local issuer certificate (wrong CA?)"), m.failure!)
        XCTAssertEqual(h.server.participantCount, 0)
    }

    /// `failed` shows the current reason: a server that was unreachable and then answers with
    /// a certificate the appliance refuses replaces "connection refused" with the certificate's.
    func testACertificateProblemReplacesAnEarlierFailureReason() throws {
        let certs = try TestCertificates()
        try certs.issue()
        try certs.issue("other", ca: "otherca")
        let h = try TLSHarness(certificates: certs)
        let m = TLSHarness.Member()
        // Nothing listens on the first address (a listener opened and closed again).
        let dead = try TCPListener(address: .ipv4Loopback(port: 0), loop: h.loop) { _ in }.localAddress
        var config = RoomSessionConfiguration(servers: [dead, h.tlsAddress], token: h.token(user: "alice"), role: .streamer)
        config.tls = TLSClientSettings(caFile: certs.path("otherca.pem"))
        config.failureThreshold = 1
        config.backoff = RoomBackoff(initial: .milliseconds(20), maximum: .milliseconds(50))
        m.session = try RoomSession(loop: h.loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.onEvent = { [unowned m] event in
            if case .stateChanged(let s) = event { m.states.append(s) }
        }
        m.session.start()
        XCTAssertTrue(h.run { m.failure?.contains("wrong CA?") == true }, "\(m.session.connectionState)")
        let reasons = m.states.compactMap { state -> String? in if case .failed(let r) = state { r } else { nil } }
        XCTAssertGreaterThanOrEqual(reasons.count, 2, "\(reasons)")
        XCTAssertTrue(reasons[0].contains("refused"), reasons[0])
    }

    func testWrongHostNameIsRefusedNamingBoth() throws {
        let certs = try TestCertificates()
        try certs.issue(san: "DNS:room.example.org")
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")), serverName: "rooms.example.com")
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertTrue(m.failure!.contains("host name mismatch: certificate is for room.example.org, not rooms.example.com"), m.failure!)
        // The right name (given as tls.serverName this time) gets in.
        let ok = try h.member("bob", tls: TLSClientSettings(caFile: certs.path("ca.pem"), serverName: "room.example.org"))
        XCTAssertTrue(h.run { ok.joined }, "\(ok.session.connectionState)")
    }

    func testAHostNameIsResolvedAndItsNameChecked() throws {
        let certs = try TestCertificates()
        try certs.issue(san: "DNS:localhost")  // no IP entry: only the name can match
        let h = try TLSHarness(certificates: certs)
        let m = TLSHarness.Member()
        var config = RoomSessionConfiguration(servers: [], token: h.token(user: "alice"), role: .streamer)
        // The server listens on 127.0.0.1 only; "localhost" may resolve to ::1 first, which the
        // session then passes over on its next attempt.
        config.endpoints = [HostPort(host: "localhost", port: h.tlsAddress.port!)]
        config.tls = TLSClientSettings(caFile: certs.path("ca.pem"))
        config.backoff = RoomBackoff(initial: .milliseconds(20), maximum: .milliseconds(50))
        m.session = try RoomSession(loop: h.loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.start()
        XCTAssertTrue(h.run { m.joined }, "\(m.session.connectionState)")
        XCTAssertEqual(m.session.serverAddress?.host, "127.0.0.1")

        let unknown = TLSHarness.Member()
        config.endpoints = [HostPort(host: "no-such-host.invalid", port: 7700)]
        config.failureThreshold = 1
        unknown.session = try RoomSession(loop: h.loop, configuration: config, outgoing: unknown.outgoing, incoming: unknown.incoming)
        unknown.session.start()
        XCTAssertTrue(h.run { unknown.failure != nil })
        XCTAssertTrue(unknown.failure!.contains("cannot resolve no-such-host.invalid"), unknown.failure!)
    }

    func testAnAddressIsMatchedAgainstTheIPEntries() throws {
        let certs = try TestCertificates()
        try certs.issue(san: "DNS:localhost,IP:10.1.2.3")
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { m.failure != nil })
        XCTAssertTrue(m.failure!.contains("host name mismatch: certificate is for localhost, 10.1.2.3, not 127.0.0.1"), m.failure!)
    }

    func testExpiredCertificateIsRefusedWithItsDate() throws {
        let certs = try TestCertificates()
        try certs.issue(days: -1)
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertTrue(m.failure!.contains("certificate has expired (notAfter "), m.failure!)
        XCTAssertTrue(m.failure!.contains("GMT)"), m.failure!)
    }

    func testPinMismatchIsRefusedShowingThePresentedPin() throws {
        let certs = try TestCertificates()
        let pin = try certs.issue()
        let otherPin = try certs.issue("other")
        XCTAssertNotEqual(pin, otherPin)
        let h = try TLSHarness(certificates: certs)
        // CA and pin: the chain is fine, the pin is not, so it is refused.
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem"), pins: [otherPin]))
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertTrue(m.failure!.contains("SPKI pin mismatch: server presented \(pin)"), m.failure!)
        XCTAssertEqual(try TLSCertificates.spkiPin(ofFile: certs.path("server.pem")), pin, "the helper agrees with openssl")
    }

    func testPinMatchJoinsWithoutACA() throws {
        let certs = try TestCertificates()
        let pin = try certs.issue()
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(pins: [pin]))
        XCTAssertTrue(h.run { m.joined }, "\(m.session.connectionState)")
        // Pin-only still checks the name and the dates.
        let wrongName = try h.member("bob", tls: TLSClientSettings(pins: [pin]), serverName: "elsewhere.example")
        XCTAssertTrue(h.run { wrongName.failure != nil })
        XCTAssertTrue(wrongName.failure!.contains("host name mismatch"), wrongName.failure!)
    }

    func testBadPinSpellingAndMissingCAFileAreReported() throws {
        XCTAssertNotNil(SPKIPin.problem("sha1/abc"))
        XCTAssertNotNil(SPKIPin.problem("sha256/short="))
        XCTAssertNil(SPKIPin.problem("sha256/" + String(repeating: "A", count: 43) + "="))
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs)
        let m = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("missing-ca.pem")))
        XCTAssertTrue(h.run { m.failure != nil })
        XCTAssertTrue(m.failure!.contains("CA file \(certs.path("missing-ca.pem")): No such file or directory"), m.failure!)
    }

    func testReloadServesTheNewCertificateAndKeepsJoinedClients() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs)
        let old = try h.member("alice", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { old.joined })
        let oldPin = h.server.tlsContext?.pin

        // The renewal: a certificate from another CA, written over the same files.
        try certs.issue("server", ca: "newca")
        let report = h.server.reload(h.server.configuration)
        XCTAssertEqual(report.refused, [])
        XCTAssertTrue(report.applied.contains { $0.hasPrefix("tls") }, "\(report.applied)")
        XCTAssertNotEqual(h.server.tlsContext?.pin, oldPin)

        let fresh = try h.member("bob", tls: TLSClientSettings(caFile: certs.path("newca.pem")))
        XCTAssertTrue(h.run { fresh.joined }, "\(fresh.session.connectionState)")
        let stale = try h.member("carol", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { stale.failure != nil }, "new connections get the new certificate")
        // The client joined before the reload is still in, on its connection, and talks.
        var answered = false
        old.session.setAttribute(key: "k", value: "v") { if case .success = $0 { answered = true } }
        XCTAssertTrue(h.run { answered && fresh.session.attributes["k"] == "v" })
        XCTAssertEqual(old.states.filter { $0 == .reconnecting }.count, 0, "no reconnect for the old client")

        // A broken key on reload: refused, logged with the file, and the running one stays.
        try "not a key".write(toFile: certs.path("server.key"), atomically: true, encoding: .utf8)
        let bad = h.server.reload(h.server.configuration)
        XCTAssertEqual(bad.refused.count, 1)
        XCTAssertTrue(bad.refused[0].contains(certs.path("server.key")), bad.refused[0])
        let after = try h.member("dave", tls: TLSClientSettings(caFile: certs.path("newca.pem")))
        XCTAssertTrue(h.run { after.joined }, "the certificate loaded before stays in use")
    }

    func testTLSClientOnAPlainListenerFailsCleanly() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs)
        var config = RoomSessionConfiguration(servers: [h.plainAddress], token: h.token(user: "alice"), role: .streamer)
        config.tls = TLSClientSettings(caFile: certs.path("ca.pem"))
        config.failureThreshold = 1
        config.handshakeTimeout = .seconds(2)
        let m = TLSHarness.Member()
        m.session = try RoomSession(loop: h.loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.start()
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertTrue(m.failure!.contains("TLS handshake failed: wrong version number (is the other side speaking plain signalling"), m.failure!)
        XCTAssertFalse(m.joined)
        XCTAssertEqual(h.server.participantCount, 0)
        // The server is still serving.
        let ok = try h.member("bob", tls: nil, address: h.plainAddress)
        XCTAssertTrue(h.run { ok.joined })
    }

    /// The hello deadline counts from the TCP accept: a peer that opens a connection and stalls
    /// in the handshake (or never starts it) holds its slot no longer than one that says nothing.
    func testAStalledHandshakeIsClosedAtTheHelloDeadline() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs, helloTimeoutMs: 400)
        var ended = 0
        var stalled: [StreamConnection] = []
        for bytes in [[], [0x16, 0x03, 0x01, 0x02, 0x00]] as [[UInt8]] {  // nothing; half a record header
            let c = try StreamConnection.connect(to: h.tlsAddress, loop: h.loop)
            c.handler = { c, event in
                switch event {
                case .connected: if !bytes.isEmpty { c.write(bytes) }
                case .readable:
                    var scratch = [UInt8](repeating: 0, count: 256)
                    let r = try? scratch.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
                    if r == nil || r == .endOfStream { ended += 1; c.close() }
                case .closed: ended += 1
                case .drained: break
                }
            }
            stalled.append(c)
        }
        h.turn(seconds: 0.1)
        XCTAssertEqual(h.server.connectionCount, 2)
        XCTAssertTrue(h.run(seconds: 5) { ended == 2 }, "both closed by the server")
        XCTAssertTrue(h.run(seconds: 1) { h.server.connectionCount == 0 })
        withExtendedLifetime(stalled) {}
    }

    func testPlainClientOnATLSListenerFailsCleanly() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let h = try TLSHarness(certificates: certs)
        var config = RoomSessionConfiguration(servers: [h.tlsAddress], token: h.token(user: "alice"), role: .streamer)
        config.failureThreshold = 1
        config.handshakeTimeout = .seconds(2)
        let m = TLSHarness.Member()
        m.session = try RoomSession(loop: h.loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.start()
        XCTAssertTrue(h.run { m.failure != nil }, "\(m.session.connectionState)")
        XCTAssertEqual(h.server.participantCount, 0, "the token in clear was not taken")
        let ok = try h.member("bob", tls: TLSClientSettings(caFile: certs.path("ca.pem")))
        XCTAssertTrue(h.run { ok.joined })
    }
}
