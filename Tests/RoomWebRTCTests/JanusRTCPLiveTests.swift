import Foundation
import Glibc
import RoomJanus
import RoomSDP
import RoomSystem
import RoomTestSupport
import RoomWebRTC
import XCTest

/// Our SRTCP against the real Janus (Debian's 1.1.2; skipped when it is not installed): the
/// appliance joins an AudioBridge room over `WebRTCMediaTransport`, sends 20 ms Opus packets for
/// a few seconds, and then both sides' views are read — ours from `statistics` (Janus's SR and RR
/// read: round trip, loss, jitter), Janus's from its Admin API `handle_info` (the RTCP context
/// of the stream: the round trip Janus computed from our RR echoing its SR, the loss and jitter
/// our RR reported) and from its log at debug level 6 (SRTCP unprotect errors, unknown SSRCs,
/// the jitter and round trip it computed from our RR, our BYE at close).
final class JanusRTCPLiveTests: XCTestCase {
    private var janus: Process?
    private var directory = ""

    override func tearDown() {
        if let janus, janus.isRunning { janus.terminate(); janus.waitUntilExit() }
        if !directory.isEmpty { try? FileManager.default.removeItem(atPath: directory) }
        super.tearDown()
    }


    /// Janus with the WebSocket API and the HTTP Admin API on loopback, the AudioBridge with
    /// room 1234 (scripts/janus-dev), ICE on the interface janus-dev picks. Returns (WebSocket port, Admin port).
    private func startJanus() throws -> (ws: Int, admin: Int) {
        guard JanusDev.isInstalled else { throw XCTSkip("janus is not installed") }
        // The Admin API and Janus's RTCP logging (level 6) by janus-dev's environment.
        let admin = try freeLoopbackPort()
        let started = try JanusDev.start(directory: NSTemporaryDirectory() + "roomd-janus-rtcp-\(getpid())-\(UInt32.random(in: 0 ... .max))",
                                         environment: ["JANUS_ADMIN_PORT": "\(admin)", "JANUS_DEBUG_LEVEL": "6"])
        janus = started.process
        directory = started.directory
        return (started.port, admin)
    }

    /// One Admin API request over HTTP (curl: Foundation's URLSession would drag libcurl's
    /// FoundationNetworking into the test target for one call).
    private func admin(port: Int, _ body: [String: Any]) throws -> [String: Any] {
        let p = Process(), out = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        p.arguments = ["-s", "-m", "2", "-d", String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self),
                       "http://127.0.0.1:\(port)/admin"]
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }

    func testJanusReadsOurSRTCPAndWeReadItsReports() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { throw XCTSkip("curl is not installed") }
        guard let interface = LocalAddress.firstNonLoopbackIPv4() else { throw XCTSkip("no IPv4 interface besides loopback for Janus's ICE") }
        let ports = try startJanus()
        let loop = try EventLoop()
        func run(seconds: Double, until condition: () -> Bool = { false }) -> Bool {
            let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
            while !condition() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(2)) }
            return condition()
        }

        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: interface.address, port: 0))
        let ssrc = UInt32.random(in: 1 ... .max)
        let local = media.localEndpoint(ssrc: ssrc, cname: "roomd-rtcp-test", sends: true, receives: true)
        var outputs: [JanusAudioBridgeSession.Output] = []
        let connection = JanusConnection(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: UInt16(ports.ws)),
                                         session: JanusAudioBridgeSession(room: 1234, display: "roomd rtcp test"))
        connection.onOutput = { outputs.append($0) }
        let offer = OpusAudioNegotiation.offer(local, sessionID: "\(UInt32.random(in: 1 ... .max))")
        func answer() -> String? {
            for case .answer(let sdp) in outputs { return sdp }
            return nil
        }
        // Janus takes a moment to listen: join again until the WebSocket opens.
        _ = run(seconds: 5) {
            if !connection.isOpen {
                if case .failed? = outputs.last { outputs.removeAll(); connection.close() }
                if outputs.isEmpty { try? connection.join(offer: offer.text, muted: false) }
                _ = run(seconds: 0.2) { connection.isOpen }
            }
            return connection.isOpen
        }
        _ = run(seconds: 5) { answer() != nil }
        let sdp = try XCTUnwrap(answer(), "no answer from Janus: \(outputs)")
        let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: sdp), to: local)
        media.start(agreement, controlling: true)
        connection.trickle(.end)
        let logPath = directory + "/janus.log"
        func janusLog() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
        XCTAssertTrue(run(seconds: 6) { if case .connected = media.state { true } else { false } },
                      "\(media.state)\n\(janusLog().suffix(1500))")

        // 4 s of 20 ms CELT-silence frames, every 10th sequence number never sent (a lossy
        // uplink as Janus sees it): Janus reports every second, we every 0.5-1.5 s.
        var packet = [UInt8](repeating: 0, count: 64)
        var sequence = UInt16.random(in: 0 ... 1000), timestamp = UInt32.random(in: 0 ... 1_000_000)
        var next = monotonicNanoseconds()
        _ = run(seconds: 4) {
            guard monotonicNanoseconds() >= next else { return false }
            let header: [UInt8] = [0x80, agreement.payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF),
                                   UInt8(timestamp >> 24), UInt8((timestamp >> 16) & 0xFF), UInt8((timestamp >> 8) & 0xFF), UInt8(timestamp & 0xFF),
                                   UInt8(ssrc >> 24), UInt8((ssrc >> 16) & 0xFF), UInt8((ssrc >> 8) & 0xFF), UInt8(ssrc & 0xFF)]
            packet.replaceSubrange(0 ..< 15, with: header + [0xF8, 0xFF, 0xFE])
            if sequence % 10 != 5 { packet.withUnsafeBytes { _ = media.sendRTP(UnsafeRawBufferPointer(rebasing: $0[0 ..< 15])) } }
            sequence &+= 1
            timestamp &+= 960
            next += 20_000_000
            return false
        }
        let ours = media.statistics
        print("janus rtcp: ours \(ours)")

        // Janus's view, from its Admin API.
        let session = try XCTUnwrap(connection.session.sessionID), handle = try XCTUnwrap(connection.session.handleID)
        let info = try admin(port: ports.admin, ["janus": "handle_info", "transaction": "rtcp", "session_id": session, "handle_id": handle])
        let handleInfo = info["info"] as? [String: Any]
        let webrtc = handleInfo?["webrtc"] as? [String: Any]
        let mediaInfo = (webrtc?["media"] as? [String: Any])?.values.first as? [String: Any]
        let rtcp = (mediaInfo?["rtcp"] as? [String: Any])?["main"] as? [String: Any]
        print("janus rtcp: Janus's RTCP context of the stream \(rtcp ?? [:])\njanus rtcp: Janus's stats \(mediaInfo?["stats"] ?? "none")")

        // What Janus logged about our RTCP, then our BYE.
        media.close()
        _ = run(seconds: 0.5)
        let log = janusLog()
        let rtcpLines = log.split(separator: "\n").filter { $0.contains("RTCP") || $0.contains("rtt=") || $0.contains("jitter=") }
        print("janus rtcp: Janus's log lines on RTCP:\n\(rtcpLines.suffix(12).joined(separator: "\n"))")

        XCTAssertGreaterThanOrEqual(ours.rtcpSent, 3, "\(ours)")
        XCTAssertGreaterThanOrEqual(ours.rtcpReceived, 3, "Janus sends SR + SDES and RR every second: \(ours)")
        XCTAssertEqual(ours.rtcpIgnored, 0, "\(ours)")
        XCTAssertEqual(ours.srtpRefused, 0, "\(ours)")
        XCTAssertNotNil(ours.roundTripMs, "Janus's RR echoes our SR: \(ours)")
        let lost = try XCTUnwrap(ours.remoteFractionLost, "\(ours)")
        XCTAssertTrue((0.05 ... 0.15).contains(lost), "Janus's RR says \(lost) of our stream lost; 10 % never went out")
        XCTAssertFalse(log.contains("SRTCP unprotect error"), "\(rtcpLines.joined(separator: "\n"))")
        XCTAssertFalse(log.contains("Unknown SSRC, dropping RTCP"), "\(rtcpLines.joined(separator: "\n"))")
        XCTAssertTrue(log.contains("Got RTCP BYE"), "Janus read our BYE at close")
        // Logged by janus_rtcp_incoming_rr: the first for every RR block, the second only when
        // the block echoes one of Janus's SRs (LSR ≠ 0).
        XCTAssertTrue(log.contains("jitter="), "Janus read a report block of ours")
        XCTAssertTrue(log.contains("rtt="), "our RR echoed Janus's SR")
        // Janus's out-(media-)link-quality is computed only from RR blocks about its stream
        // (two, 2 s apart): non-zero means it read ours. Its rtt (whole ms) stays 0 on one machine.
        XCTAssertNotNil(rtcp?["rtt"] as? Int, "handle_info: \(info)")
        XCTAssertEqual(rtcp?["out-media-link-quality"] as? Int, 100, "Janus read our RR blocks: \(rtcp ?? [:])")
        connection.close()
    }
}
