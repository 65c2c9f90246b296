import Foundation
import RoomJanus
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest

/// `JanusConnection`'s transport against a stand-in WebSocket server (plain and TLS) on this
/// machine: what goes into the opening request (path, Host), name resolution, and the TLS
/// refusals in the words of the roomserver signalling path. Janus itself: JanusLiveTests.
final class JanusConnectionTests: XCTestCase {
    let offer = "v=0\r\n"

    func connection(_ loop: EventLoop, endpoint: HostPort, tls: TLSClientSettings? = nil, path: String = "/")
        -> (JanusConnection, () -> [JanusAudioBridgeSession.Output]) {
        let janus = JanusConnection(loop: loop, endpoint: endpoint, tls: tls, path: path,
                                    session: JanusAudioBridgeSession(room: 1234, display: "test"))
        var outputs: [JanusAudioBridgeSession.Output] = []
        janus.onOutput = { outputs.append($0) }
        return (janus, { outputs })
    }

    func failure(_ outputs: [JanusAudioBridgeSession.Output]) -> String? {
        for output in outputs { if case .failed(let why) = output { return why } }
        return nil
    }

    func testTheAddressInitializerStillOpensPlainWebSocketsAtSlash() throws {
        let loop = try EventLoop()
        let server = try FakeWebSocketServer(loop: loop)
        let janus = JanusConnection(loop: loop, address: server.address, session: JanusAudioBridgeSession(room: 1, display: "x"))
        try janus.join(offer: offer, muted: true)
        XCTAssertTrue(turn(loop, seconds: 3) { janus.isOpen })
        XCTAssertNil(janus.tls)
        XCTAssertNil(janus.tlsSessionDescription)
        let request = try XCTUnwrap(server.requests.first)
        XCTAssertTrue(request.hasPrefix("GET / HTTP/1.1\r\n"), request)
        XCTAssertTrue(request.components(separatedBy: "\r\n").contains("Host: 127.0.0.1:\(server.port)"), request)
        janus.close()
    }

    /// `localhost` may resolve to ::1 first, where nothing listens: the next address is tried.
    func testAHostNameIsResolvedAndTheRequestCarriesItsPathAndHost() throws {
        let loop = try EventLoop()
        let server = try FakeWebSocketServer(loop: loop)
        let (janus, outputs) = connection(loop, endpoint: HostPort(host: "localhost", port: server.port), path: "/janus?room=1234")
        try janus.join(offer: offer, muted: true)
        XCTAssertTrue(turn(loop, seconds: 3) { janus.isOpen }, "\(outputs())")
        XCTAssertEqual(janus.peerAddress, server.address)
        let request = try XCTUnwrap(server.requests.first)
        let lines = request.components(separatedBy: "\r\n")
        XCTAssertEqual(lines.first, "GET /janus?room=1234 HTTP/1.1")
        XCTAssertTrue(lines.contains("Host: localhost:\(server.port)"), request)
        XCTAssertTrue(lines.contains("Sec-WebSocket-Protocol: janus-protocol"), request)
        janus.close()
    }

    func testWhatCannotWorkIsThrownByJoinBeforeAnyByteIsSent() throws {
        let loop = try EventLoop()
        func joinError(_ janus: JanusConnection) -> String {
            do { try janus.join(offer: offer, muted: true); return "joined" } catch { return error.description }
        }
        XCTAssertEqual(joinError(connection(loop, endpoint: HostPort(host: "127.0.0.1", port: 9), path: "janus").0),
                       "Janus WebSocket path must start with /: \"janus\"")
        XCTAssertEqual(joinError(connection(loop, endpoint: HostPort(host: "127.0.0.1", port: 9), path: "/a\r\nX: y").0),
                       "Janus WebSocket path may hold only printable ASCII without spaces (percent-encode the rest): \"/a\\u{d}\\u{a}X: y\"")
        XCTAssertTrue(joinError(connection(loop, endpoint: HostPort(host: "no-such-janus.invalid", port: 8989)).0)
            .hasPrefix("cannot resolve no-such-janus.invalid: "))
        let missingCA = joinError(connection(loop, endpoint: HostPort(host: "127.0.0.1", port: 9),
                                             tls: TLSClientSettings(caFile: "/nonexistent/ca.pem")).0)
        XCTAssertTrue(missingCA.hasPrefix("TLS: CA file /nonexistent/ca.pem"), missingCA)
        XCTAssertTrue(joinError(connection(loop, endpoint: HostPort(host: "127.0.0.1", port: 9),
                                           tls: TLSClientSettings(pins: ["sha256/nope"])).0).hasPrefix("TLS: "))
    }

    func testNobodyListeningIsAFailedOutput() throws {
        let loop = try EventLoop()
        let port: UInt16
        do { port = try FakeWebSocketServer(loop: loop).port }  // a port that was free a moment ago, closed again
        let (janus, outputs) = connection(loop, endpoint: HostPort(host: "127.0.0.1", port: port))
        try janus.join(offer: offer, muted: true)
        XCTAssertTrue(turn(loop, seconds: 3) { failure(outputs()) != nil })
        let why = try XCTUnwrap(failure(outputs()))
        XCTAssertTrue(why.hasPrefix("Janus connection: "), why)
        XCTAssertTrue(why.contains("127.0.0.1:\(port)"), why)
        XCTAssertFalse(janus.isOpen)
    }

    func testAServerThatNeverAnswersTheHandshakeFailsAfterTheConnectTimeout() throws {
        let loop = try EventLoop()
        let server = try FakeWebSocketServer(loop: loop)
        server.silent = true
        let (janus, outputs) = connection(loop, endpoint: HostPort(host: "127.0.0.1", port: server.port))
        janus.connectTimeout = .milliseconds(300)
        try janus.join(offer: offer, muted: true)
        let start = monotonicNanoseconds()
        XCTAssertTrue(turn(loop, seconds: 3) { failure(outputs()) != nil })
        XCTAssertEqual(failure(outputs()), "Janus connection: no WebSocket answer from 127.0.0.1:\(server.port) within 0.3 seconds")
        XCTAssertLessThan(monotonicNanoseconds() - start, 2_000_000_000, "checked on the 1 s timer")
        XCTAssertEqual(server.requests.count, 1, "the request was sent; the answer never came")
    }

    // MARK: wss

    func testWSSChecksTheCertificateAgainstTheCAFileAndOpens() throws {
        let certificates = try TestCertificates()
        try certificates.issue()
        let loop = try EventLoop()
        let server = try FakeWebSocketServer(loop: loop, tls: try TLSServerContext(
            certificateChainFile: certificates.path("server.pem"), keyFile: certificates.path("server.key")))
        let (janus, outputs) = connection(loop, endpoint: HostPort(host: "localhost", port: server.port),
                                          tls: TLSClientSettings(caFile: certificates.path("ca.pem")), path: "/janus")
        try janus.join(offer: offer, muted: true)
        XCTAssertTrue(turn(loop, seconds: 5) { janus.isOpen }, "\(outputs())")
        XCTAssertEqual(janus.tlsSessionDescription?.hasPrefix("TLSv1.3 "), true, janus.tlsSessionDescription ?? "nil")
        let lines = try XCTUnwrap(server.requests.first).components(separatedBy: "\r\n")
        XCTAssertEqual(lines.first, "GET /janus HTTP/1.1")
        XCTAssertTrue(lines.contains("Host: localhost:\(server.port)"), "\(lines)")
        janus.close()
    }

    /// The three refusals an installer meets (wrong CA, wrong name, wrong pin) read exactly as
    /// the roomserver signalling path words them, after "Janus connection: ".
    func testWSSRefusalsReadAsTheSignallingPathsSentences() throws {
        let certificates = try TestCertificates()
        try certificates.issue()
        try certificates.issue("other", ca: "otherca")
        let loop = try EventLoop()
        let server = try FakeWebSocketServer(loop: loop, tls: try TLSServerContext(
            certificateChainFile: certificates.path("server.pem"), keyFile: certificates.path("server.key")))
        let otherPin = try TLSCertificates.spkiPin(ofFile: certificates.path("other.pem"))
        let cases: [(what: String, host: String, settings: TLSClientSettings, expected: String)] = [
            ("wrong CA", "127.0.0.1", TLSClientSettings(caFile: certificates.path("otherca.pem")),
             "TLS to 127.0.0.1:\(server.port): certificate verify failed: unable to get local issuer certificate (wrong CA?)"),
            ("host name mismatch", "127.0.0.1", TLSClientSettings(caFile: certificates.path("ca.pem"), serverName: "janus.example"),
             "TLS to 127.0.0.1:\(server.port): host name mismatch: certificate is for "),
            ("pin mismatch", "127.0.0.1", TLSClientSettings(caFile: certificates.path("ca.pem"), pins: [otherPin]),
             "TLS to 127.0.0.1:\(server.port): SPKI pin mismatch: server presented sha256/"),
        ]
        for c in cases {
            let reference = try XCTUnwrap(try tlsRefusalSentence(loop: loop, address: server.address, serverName: c.host, settings: c.settings), c.what)
            XCTAssertTrue(reference.hasPrefix(c.expected), "\(c.what): \(reference)")
            let (janus, outputs) = connection(loop, endpoint: HostPort(host: c.host, port: server.port), tls: c.settings)
            try janus.join(offer: offer, muted: true)
            XCTAssertTrue(turn(loop, seconds: 5) { failure(outputs()) != nil }, c.what)
            XCTAssertEqual(failure(outputs()), "Janus connection: " + reference, c.what)
            XCTAssertFalse(janus.isOpen, c.what)
            XCTAssertEqual(outputs().count, 1, "one failure, nothing else: \(outputs())")
        }
        XCTAssertEqual(server.requests.count, 0, "no WebSocket request reaches a server the appliance refused")
    }
}
