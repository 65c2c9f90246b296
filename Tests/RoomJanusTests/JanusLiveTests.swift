import Foundation
import Glibc
import RoomJanus
import RoomMedia
import RoomSDP
import RoomSystem
import RoomTLS
import RoomTestSupport
import RoomWebRTC
import XCTest

/// Against the real Janus (Debian's `janus` 1.1.2, skipped when it is not installed): the
/// appliance's WebSocket client, AudioBridge session, SDP offer and `WebRTCMediaTransport`
/// (ICE agent, DTLS-SRTP, SRTP), together. Janus (libnice, full ICE) must answer the offer,
/// complete connectivity checks and DTLS, report the PeerConnection up (`webrtcup`), decrypt
/// our SRTP (`media receiving`), and send its mix, which must decrypt with the exported key.
/// The audio engine on this path is the next step (docs/webrtc.md). With Janus serving wss
/// (a certificate made for the test): the join by host name over TLS with the CA file, and the
/// wrong CA refused in the signalling path's words.
final class JanusLiveTests: XCTestCase {
    var janus: Process?
    var directory = ""

    override func tearDown() {
        if let janus, janus.isRunning { janus.terminate(); janus.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: directory)
        super.tearDown()
    }

    /// This machine's first IPv4 interface other than loopback: libnice (Janus's ICE) gathers
    /// no loopback candidates, so the media runs on this address — still local traffic.
    static func localInterface() -> (name: String, address: String)? {
        LocalAddress.firstNonLoopbackIPv4().map { ($0.interface, $0.address) }
    }

    /// Janus with only the WebSocket transport (on loopback) and the AudioBridge; ICE on the
    /// machine's first non-loopback interface (the one scripts/janus-dev picks, and
    /// `localInterface` finds for the appliance's side).
    /// With `wss` (a certificate and its key) the transport serves only WebSocket over TLS, with
    /// the lines docs/janus.md gives a deployment: the certificate goes in the transport's own
    /// file (janus.jcfg's `certificates` are DTLS's, and without one there the transport refuses
    /// to start: "Missing certificate/key path").
    func startJanus(wss: (cert: String, key: String)? = nil) throws -> Int {
        guard JanusDev.isInstalled else { throw XCTSkip("janus is not installed") }
        var environment: [String: String] = [:]
        if let wss { environment["JANUS_WSS_CERT"] = wss.cert; environment["JANUS_WSS_KEY"] = wss.key }
        let started = try JanusDev.start(directory: NSTemporaryDirectory() + "roomd-janus-\(getpid())-\(UInt32.random(in: 0 ... .max))",
                                         environment: environment)
        janus = started.process
        directory = started.directory
        return started.port
    }

    func testTheApplianceJoinsAnAudioBridgeAndJanusReportsThePeerConnectionUp() throws {
        guard let interface = Self.localInterface() else { throw XCTSkip("no IPv4 interface besides loopback for Janus's ICE") }
        let port = try startJanus()
        let loop = try EventLoop()
        let start = DispatchTime.now().uptimeNanoseconds
        func nowMs() -> UInt64 { (DispatchTime.now().uptimeNanoseconds - start) / 1_000_000 }
        func run(seconds: Double, until condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while !condition() && Date() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(5)) }
            return condition()
        }

        // The media side: one socket on the machine's address, ICE + DTLS-SRTP + SRTP.
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: interface.address, port: 0))
        let ssrc = UInt32.random(in: 1 ... .max)
        let local = media.localEndpoint(ssrc: ssrc, cname: "roomd-test", sends: true, receives: true)
        var fromJanus = 0, levelsSeen = 0
        media.onRTP = { packet in
            fromJanus += 1
            if let p = try? RTPPacket.parse(UnsafeRawBufferPointer(packet)), p.payloadType == 111 { levelsSeen += 1 }
        }

        // The AudioBridge session over a WebSocket to Janus.
        var outputs: [JanusAudioBridgeSession.Output] = []
        let janus = JanusConnection(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: UInt16(port)),
                                    session: JanusAudioBridgeSession(room: 1234, display: "roomd live test"))
        janus.onOutput = { outputs.append($0) }

        let offer = OpusAudioNegotiation.offer(local, sessionID: "\(UInt32.random(in: 1 ... .max))")
        // Janus may still be starting: try again until its WebSocket answers.
        _ = run(seconds: 5) {
            if !janus.isOpen && outputs.isEmpty { try? janus.join(offer: offer.text, muted: true) }
            _ = run(seconds: 0.2) { janus.isOpen }
            if case .failed? = outputs.last { outputs.removeAll(); janus.close() }
            return janus.isOpen
        }
        _ = run(seconds: 5) { outputs.contains { if case .answer = $0 { true } else { false } } || { if case .failed = janus.session.state { true } else { false } }() }
        guard case .answer(let sdp)? = outputs.first(where: { if case .answer = $0 { true } else { false } }) else {
            return XCTFail("no SDP answer from Janus; state \(janus.session.state), outputs \(outputs)")
        }
        XCTAssertTrue(outputs.contains { if case .joined = $0 { true } else { false } }, "\(outputs)")
        let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: sdp), to: local)
        XCTAssertEqual(agreement.payloadType, 111)
        XCTAssertEqual(agreement.dtlsRole, .server, "Janus answers setup:active and opens DTLS")
        XCTAssertFalse(agreement.remoteCandidates.isEmpty, "Janus's host candidates:\n\(sdp)")

        media.start(agreement, controlling: true)
        janus.trickle(.end)
        let up = run(seconds: 6) {
            if case .failed = media.state { return true }
            return outputs.contains(.mediaUp) && { if case .connected = media.state { true } else { false } }()
        }
        let log = (try? String(contentsOfFile: directory + "/janus.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(up, "media \(media.state), outputs \(outputs)\nJanus log:\n\(log.suffix(2000))")
        XCTAssertEqual(media.state, .connected(profile: "SRTP_AEAD_AES_128_GCM"))

        // 2 s of 20 ms Opus frames (CELT silence, the RFC 6464 level in the negotiated extension)
        // to Janus; Janus's mix back.
        let opusSilence: [UInt8] = [0xF8, 0xFF, 0xFE]
        var packet = [UInt8](repeating: 0, count: 256)
        var sequence = UInt16.random(in: 0 ... 1000)
        var nextSend = nowMs()
        _ = run(seconds: 2.2) {
            if nowMs() >= nextSend {
                let header = RTPPacket(sequenceNumber: sequence, timestamp: UInt32(sequence) &* 960, ssrc: ssrc,
                                       audioLevel: RTPAudioLevel(voiceActivity: false, level: 127))
                let n = packet.withUnsafeMutableBytes { out in
                    opusSilence.withUnsafeBytes { try? header.serialize(payload: $0, into: out, audioLevelExtensionID: agreement.audioLevelExtensionID ?? 1) }
                } ?? 0
                packet.withUnsafeBytes { _ = media.sendRTP(UnsafeRawBufferPointer(rebasing: $0[0 ..< n])) }
                sequence &+= 1
                nextSend += 20
            }
            return false
        }
        XCTAssertGreaterThanOrEqual(media.statistics.rtpSent, 100, "2 s of 20 ms packets")
        XCTAssertTrue(outputs.contains(.janusReceivesAudio(true)), "Janus decrypts our SRTP and says it receives audio: \(outputs)")
        XCTAssertGreaterThan(fromJanus, 0, "Janus sends the room's mix, and it decrypts with the exported key")
        XCTAssertEqual(levelsSeen, fromJanus, "each is Opus RTP")
        XCTAssertEqual(media.statistics.srtpRefused, 0, "\(media.statistics)")
        janus.leave()
        _ = run(seconds: 0.3) { false }
        XCTAssertFalse(outputs.contains { if case .failed = $0 { true } else { false } }, "\(outputs)")
        media.close()
    }

    // MARK: wss

    /// Blocks until something accepts TCP connections on 127.0.0.1:`port` (Janus starting).
    func waitUntilListening(port: Int, seconds: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(port).bigEndian
            sin.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let rc = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            Glibc.close(fd)
            if rc == 0 { return true }
            usleep(20_000)
        }
        return false
    }

    /// Janus serving only wss with a certificate made for the test (CA "ca", names localhost and
    /// 127.0.0.1); returns its port, the certificates and the appliance's offer.
    func startWSSJanus() throws -> (port: Int, certificates: TestCertificates, offer: String, media: WebRTCMediaTransport, loop: EventLoop) {
        guard let interface = Self.localInterface() else { throw XCTSkip("no IPv4 interface besides loopback for Janus's ICE") }
        let certificates = try TestCertificates()
        try certificates.issue()
        let port = try startJanus(wss: (certificates.path("server.pem"), certificates.path("server.key")))
        XCTAssertTrue(waitUntilListening(port: port), "Janus's wss port \(port) does not accept connections; log:\n\(janusLog().suffix(2000))")
        let loop = try EventLoop()
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: interface.address, port: 0))
        let local = media.localEndpoint(ssrc: UInt32.random(in: 1 ... .max), cname: "roomd-test", sends: true, receives: true)
        let offer = OpusAudioNegotiation.offer(local, sessionID: "\(UInt32.random(in: 1 ... .max))").text
        return (port, certificates, offer, media, loop)
    }

    func janusLog() -> String { (try? String(contentsOfFile: directory + "/janus.log", encoding: .utf8)) ?? "" }

    /// The appliance reaches Janus the way an installer writes it (`room.janus_url` with a host
    /// name, `wss`, a path) and trusts it through the CA file alone: TLS 1.3 to Janus's
    /// libwebsockets, the AudioBridge join, and Janus's SDP answer back over it.
    func testTheApplianceJoinsOverWSSByHostNameWithTheCAFile() throws {
        let janus0 = try startWSSJanus()
        let loop = janus0.loop
        let url = try JanusURL(parsing: "wss://localhost:\(janus0.port)/janus")
        let janus = JanusConnection(loop: loop, url: url, tls: TLSClientSettings(caFile: janus0.certificates.path("ca.pem")),
                                    session: JanusAudioBridgeSession(room: 1234, display: "roomd wss test"))
        XCTAssertEqual(janus.tls, TLSClientSettings(caFile: janus0.certificates.path("ca.pem")))
        XCTAssertEqual(janus.hostHeader, "localhost:\(janus0.port)")
        var outputs: [JanusAudioBridgeSession.Output] = []
        janus.onOutput = { outputs.append($0) }
        try janus.join(offer: janus0.offer, muted: true)
        let answered = turn(loop, seconds: 8) {
            outputs.contains { if case .answer = $0 { true } else if case .failed = $0 { true } else { false } }
        }
        XCTAssertTrue(answered, "no answer; state \(janus.session.state), outputs \(outputs)\nJanus log:\n\(janusLog().suffix(2000))")
        XCTAssertEqual(janus.tlsSessionDescription?.hasPrefix("TLSv1.3 "), true, janus.tlsSessionDescription ?? "no TLS")
        XCTAssertEqual(janus.peerAddress, try SocketAddress(ip: "127.0.0.1", port: UInt16(janus0.port)))
        guard case .answer(let sdp)? = outputs.first(where: { if case .answer = $0 { true } else { false } }) else {
            return XCTFail("no SDP answer from Janus over wss: \(outputs)")
        }
        XCTAssertTrue(outputs.contains { if case .joined = $0 { true } else { false } }, "\(outputs)")
        let answer = try SessionDescription(parsing: sdp)
        XCTAssertTrue(sdp.contains("a=fingerprint:"), sdp)
        XCTAssertNotNil(answer.media.first, sdp)
        janus.leave()
        turn(loop, seconds: 0.3) { false }
        XCTAssertFalse(outputs.contains { if case .failed = $0 { true } else { false } }, "\(outputs)")
        janus0.media.close()
    }

    /// The same Janus with a CA file that did not sign its certificate: the join fails at once
    /// with the sentence the roomserver signalling gives for it, and Janus never sees a request.
    func testWSSWithTheWrongCAFailsWithTheSignallingPathsReason() throws {
        let janus0 = try startWSSJanus()
        let loop = janus0.loop
        try janus0.certificates.issue("other", ca: "otherca")
        let wrongCA = TLSClientSettings(caFile: janus0.certificates.path("otherca.pem"))
        let address = try SocketAddress(ip: "127.0.0.1", port: UInt16(janus0.port))
        let reference = try XCTUnwrap(try tlsRefusalSentence(loop: loop, address: address, serverName: "127.0.0.1", settings: wrongCA))
        XCTAssertEqual(reference, "TLS to 127.0.0.1:\(janus0.port): certificate verify failed: unable to get local issuer certificate (wrong CA?)")

        let janus = JanusConnection(loop: loop, endpoint: HostPort(host: "127.0.0.1", port: UInt16(janus0.port)), tls: wrongCA,
                                    session: JanusAudioBridgeSession(room: 1234, display: "roomd wrong CA"))
        var outputs: [JanusAudioBridgeSession.Output] = []
        janus.onOutput = { outputs.append($0) }
        try janus.join(offer: janus0.offer, muted: true)
        XCTAssertTrue(turn(loop, seconds: 5) { !outputs.isEmpty })
        XCTAssertEqual(outputs, [.failed("Janus connection: " + reference)])
        XCTAssertFalse(janus.isOpen)
        XCTAssertEqual(janus.session.state, .idle, "no Janus request was sent")
        janus0.media.close()
    }
}
