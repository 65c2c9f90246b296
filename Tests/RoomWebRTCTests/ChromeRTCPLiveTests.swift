import Foundation
import Glibc
import RoomSDP
import RoomSystem
import RoomTestSupport
import RoomWebRTC
import XCTest

/// Our RTCP against a browser: headless Chromium (Debian's `chromium`; skipped when it is not
/// installed) calls the appliance's `WebRTCMediaTransport` directly — Chromium offers (a fake
/// microphone), the transport answers through `OpusAudioNegotiation`, ICE/DTLS/SRTP connect,
/// 20 ms packets flow both ways (ours with every 10th sequence number never sent) — then
/// Chromium's `getStats()` says what it made of our SR and RR, and our `statistics` what we made
/// of its reports. Signalling goes through a 30-line Python HTTP relay the test writes (the page
/// posts its offer and stats, polls for the answer); the test talks to it with curl.
final class ChromeRTCPLiveTests: XCTestCase {
    private var processes: [Process] = []
    private var directory = ""

    override func tearDown() {
        for p in processes where p.isRunning { p.terminate(); p.waitUntilExit() }
        if !directory.isEmpty { try? FileManager.default.removeItem(atPath: directory) }
        super.tearDown()
    }

    private static let relay = """
        import http.server, sys
        store = {}
        page = open(sys.argv[2], 'rb').read()
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def reply(self, code, body=b'', kind='text/plain'):
                self.send_response(code); self.send_header('Content-Type', kind)
                self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
            def do_GET(self):
                if self.path == '/': return self.reply(200, page, 'text/html')
                key = self.path.strip('/')
                if key in store: return self.reply(200, store[key])
                self.reply(204)
            def do_POST(self):
                store[self.path.strip('/')] = self.rfile.read(int(self.headers['Content-Length']))
                self.reply(200)
        http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
        """

    /// The browser's side: a fake microphone, one audio transceiver, the offer after ICE
    /// gathering, the answer when the test has posted it, then `getStats()` every second.
    private static let page = """
        <!doctype html><script>
        (async () => {
          const post = (path, body) => fetch(path, {method: 'POST', body});
          try {
            const media = await navigator.mediaDevices.getUserMedia({audio: true});
            const pc = new RTCPeerConnection();
            pc.addTrack(media.getAudioTracks()[0], media);
            await pc.setLocalDescription(await pc.createOffer());
            await new Promise(r => { if (pc.iceGatheringState === 'complete') r(); pc.onicegatheringstatechange = () => pc.iceGatheringState === 'complete' && r(); });
            await post('/offer', pc.localDescription.sdp);
            let answer;
            while (!(answer = await (await fetch('/answer')).text())) await new Promise(r => setTimeout(r, 50));
            await pc.setRemoteDescription({type: 'answer', sdp: answer});
            setInterval(async () => {
              const stats = [];
              (await pc.getStats()).forEach(s => stats.push(s));
              await post('/stats', JSON.stringify({state: pc.connectionState, stats}));
            }, 1000);
          } catch (e) { await post('/error', String(e)); }
        })();
        </script>
        """

    private func curl(_ arguments: [String]) -> Data {
        let p = Process(), out = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        p.arguments = ["-s", "-m", "2"] + arguments
        p.standardOutput = out
        guard (try? p.run()) != nil else { return Data() }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return data
    }


    func testChromiumReadsOurReportsAndWeReadItsOwn() throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/curl", "/usr/bin/python3"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed")
        }
        guard let address = LocalAddress.firstNonLoopbackIPv4()?.address else { throw XCTSkip("no IPv4 interface besides loopback") }
        directory = NSTemporaryDirectory() + "roomd-chrome-rtcp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.relay.write(toFile: directory + "/relay.py", atomically: true, encoding: .utf8)
        try Self.page.write(toFile: directory + "/page.html", atomically: true, encoding: .utf8)
        // Free now: a random port in the ephemeral range could be in use (Chromium then had no page).
        let port = try freeLoopbackPort()
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        relay.arguments = [directory + "/relay.py", "\(port)", directory + "/page.html"]
        try relay.run()
        processes.append(relay)
        let base = "http://127.0.0.1:\(port)"
        let start = Date()
        while curl([base + "/"]).isEmpty && Date().timeIntervalSince(start) < 5 { usleep(50_000) }

        let chromium = Process()
        chromium.executableURL = URL(fileURLWithPath: "/usr/bin/chromium")
        chromium.arguments = ["--headless=new", "--no-sandbox", "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                              "--disable-features=WebRtcHideLocalIpsWithMdns", "--user-data-dir=\(directory)/profile",
                              "--no-first-run", base + "/"]
        chromium.standardOutput = FileHandle.nullDevice
        chromium.standardError = FileHandle.nullDevice
        try chromium.run()
        processes.append(chromium)

        var offerText = ""
        let offerDeadline = Date().addingTimeInterval(15)
        while offerText.isEmpty && Date() < offerDeadline {
            offerText = String(decoding: curl([base + "/offer"]), as: UTF8.self)
            if offerText.isEmpty { usleep(100_000) }
        }
        XCTAssertFalse(offerText.isEmpty, "no offer from Chromium: \(String(decoding: curl([base + "/error"]), as: UTF8.self))")
        guard !offerText.isEmpty else { return }

        let loop = try EventLoop()
        func run(seconds: Double, until condition: () -> Bool = { false }) -> Bool {
            let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
            while !condition() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(2)) }
            return condition()
        }
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: address, port: 0))
        let ssrc = UInt32.random(in: 1 ... .max)
        let local = media.localEndpoint(ssrc: ssrc, cname: "roomd-chrome-test", sends: true, receives: true)
        // ROOMD_CHROME_NO_RTCP=1: what Chromium makes of the call when we send no RTCP at all.
        let withoutRTCP = ProcessInfo.processInfo.environment["ROOMD_CHROME_NO_RTCP"] != nil
        media.sendsRTCP = !withoutRTCP
        var (answer, agreement) = try OpusAudioNegotiation.answer(to: try SessionDescription(parsing: offerText), local: local, sessionID: "7")
        // As DTLS client we get Chromium's choice of SRTP profile, and Chromium 156 (the DTLS
        // server) picks SRTP_AES128_CM_SHA1_80 over the GCM we offer first; roomd's SRTP runs
        // GCM only. So this test answers `passive` (the appliance is the DTLS server and chooses).
        var text = answer.text
        if ProcessInfo.processInfo.environment["ROOMD_CHROME_DTLS_ACTIVE"] == nil {
            text = text.replacingOccurrences(of: "a=setup:active", with: "a=setup:passive")
            agreement.dtlsRole = .server
        }
        _ = answer
        media.start(agreement, controlling: false)
        _ = curl(["--data-binary", text, base + "/answer"])
        XCTAssertTrue(run(seconds: 8) { if case .connected = media.state { true } else { false } }, "\(media.state)")

        var fromChrome = 0
        media.onRTP = { _ in fromChrome += 1 }
        var sequence = UInt16.random(in: 0 ... 1000), timestamp = UInt32.random(in: 0 ... 1_000_000)
        var next = monotonicNanoseconds()
        _ = run(seconds: 5) {
            guard monotonicNanoseconds() >= next else { return false }
            let packet: [UInt8] = [0x80, agreement.payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF),
                                   UInt8(timestamp >> 24), UInt8((timestamp >> 16) & 0xFF), UInt8((timestamp >> 8) & 0xFF), UInt8(timestamp & 0xFF),
                                   UInt8(ssrc >> 24), UInt8((ssrc >> 16) & 0xFF), UInt8((ssrc >> 8) & 0xFF), UInt8(ssrc & 0xFF), 0xF8, 0xFF, 0xFE]
            if sequence % 10 != 5 { packet.withUnsafeBytes { _ = media.sendRTP($0) } }
            sequence &+= 1
            timestamp &+= 960
            next += 20_000_000
            return false
        }
        let ours = media.statistics
        let report = try JSONSerialization.jsonObject(with: curl([base + "/stats"])) as? [String: Any] ?? [:]
        let stats = report["stats"] as? [[String: Any]] ?? []
        func ofType(_ type: String) -> [String: Any]? { stats.first { $0["type"] as? String == type } }
        let remoteInbound = ofType("remote-inbound-rtp"), remoteOutbound = ofType("remote-outbound-rtp"), inbound = ofType("inbound-rtp")
        func pick(_ s: [String: Any]?, _ keys: [String]) -> String {
            keys.map { "\($0): \(s?[$0].map { "\($0)" } ?? "—")" }.joined(separator: ", ")
        }
        print("""
            chrome rtcp: ours \(ours)
            chrome rtcp: Chromium \(report["state"] ?? "?"), RTP from it \(fromChrome)
            chrome rtcp: remote-inbound-rtp (from our RR) \(pick(remoteInbound, ["roundTripTime", "fractionLost", "packetsLost", "jitter", "roundTripTimeMeasurements", "reportsReceived"]))
            chrome rtcp: remote-outbound-rtp (from our SR) \(pick(remoteOutbound, ["packetsSent", "bytesSent", "remoteTimestamp", "reportsSent", "roundTripTimeMeasurements"]))
            chrome rtcp: inbound-rtp (our stream) \(pick(inbound, ["packetsReceived", "packetsLost", "jitter"]))
            """)
        media.close()

        XCTAssertGreaterThan(fromChrome, 100, "Chromium's fake microphone, 20 ms Opus")
        XCTAssertGreaterThan(inbound?["packetsReceived"] as? Int ?? 0, 100, "Chromium receives our stream")
        if withoutRTCP {
            XCTAssertNil(remoteInbound, "no report blocks from us, no remote-inbound-rtp")
            XCTAssertNil(remoteOutbound, "no SR from us, no remote-outbound-rtp")
            XCTAssertNil(ours.roundTripMs, "nothing of ours for Chromium to echo")
            return
        }
        XCTAssertGreaterThanOrEqual(ours.rtcpReceived, 1, "Chromium reports on audio every ~2.5 s (5 s × [0.5, 1.5]): \(ours)")
        XCTAssertEqual(ours.rtcpIgnored, 0, "\(ours)")
        XCTAssertEqual(ours.srtpRefused, 0, "\(ours)")
        XCTAssertNotNil(ours.roundTripMs, "Chromium's report echoes our SR: \(ours)")
        let lost = try XCTUnwrap(ours.remoteFractionLost, "\(ours)")
        XCTAssertTrue((0.05 ... 0.15).contains(lost), "Chromium says \(lost) of our stream lost; 10 % never went out")
        XCTAssertNotNil(remoteInbound?["roundTripTime"], "Chromium's remote-inbound-rtp comes from our report blocks: \(stats)")
        XCTAssertNotNil(remoteOutbound?["packetsSent"], "Chromium's remote-outbound-rtp comes from our SR: \(stats)")
    }
}
