import Foundation
import Glibc
import RoomDTLS
import RoomCore
import RoomICE
import RoomMediaCrypto
import RoomProtocol
import RoomJanus
import RoomSDP
import RoomSystem
import XCTest

/// Against the real Janus (Debian's `janus` 1.1.2, skipped when it is not installed): the
/// appliance's WebSocket client, AudioBridge session, SDP offer and ICE agent, together. Janus
/// (libnice, full ICE) must answer the offer, complete connectivity checks with the agent, and
/// finish DTLS-SRTP with `DTLSEndpoint` — Janus then reports the PeerConnection up (`webrtcup`).
/// Media (SRTP/RTCP through the engine) is the next step (docs/webrtc.md).
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
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return nil }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET),
                  entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0,
                  entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var text = [CChar](repeating: 0, count: 64)
            addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var a = sin.pointee.sin_addr
                _ = inet_ntop(AF_INET, &a, &text, 64)
            }
            let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return (String(validatingCString: entry.pointee.ifa_name) ?? "", address)
        }
        return nil
    }

    /// Janus with only the WebSocket transport (on loopback) and the AudioBridge; ICE on `interface`.
    func startJanus(interface: (name: String, address: String)) throws -> Int {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/janus") else { throw XCTSkip("janus is not installed") }
        directory = NSTemporaryDirectory() + "roomd-janus-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = Int.random(in: 20_000 ... 40_000)
        let lib = "/usr/lib/x86_64-linux-gnu/janus"
        let files = [
            "janus.jcfg": """
            general: { configs_folder = "\(directory)" plugins_folder = "\(lib)/plugins" transports_folder = "\(lib)/transports"
                       events_folder = "\(lib)/events" loggers_folder = "\(lib)/loggers" debug_level = 4 session_timeout = 60 }
            plugins: { disable = "libjanus_echotest.so,libjanus_videocall.so,libjanus_sip.so,libjanus_nosip.so,libjanus_streaming.so,libjanus_textroom.so,libjanus_recordplay.so,libjanus_voicemail.so,libjanus_lua.so,libjanus_duktape.so,libjanus_videoroom.so" }
            transports: { disable = "libjanus_http.so,libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_pfunix.so,libjanus_rabbitmq.so" }
            events: { broadcast = false }
            loggers: { disable = "libjanus_jsonlog.so" }
            nat: { ice_enforce_list = "\(interface.name)" ignore_mdns = true }
            """,
            "janus.transport.websockets.jcfg": """
            general: { json = "plain" ws = true ws_port = \(port) ws_interface = "lo" wss = false }
            admin: { admin_ws = false }
            """,
            "janus.plugin.audiobridge.jcfg": """
            general: { }
            room-1234: { description = "roomd test room" sampling_rate = 48000 }
            """,
        ]
        for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/janus")
        p.arguments = ["-C", directory + "/janus.jcfg", "-F", directory, "-L", directory + "/janus.log"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        janus = p
        return port
    }

    func testTheApplianceJoinsAnAudioBridgeAndJanusReportsThePeerConnectionUp() throws {
        guard let interface = Self.localInterface() else { throw XCTSkip("no IPv4 interface besides loopback for Janus's ICE") }
        let port = try startJanus(interface: interface)
        let loop = try EventLoop()
        let start = DispatchTime.now().uptimeNanoseconds
        func nowMs() -> UInt64 { (DispatchTime.now().uptimeNanoseconds - start) / 1_000_000 }
        func run(seconds: Double, until condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while !condition() && Date() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(10)) }
            return condition()
        }

        // The media socket and the local ICE side.
        let udp = try UDPSocket(bindingTo: try SocketAddress(ip: interface.address, port: 0))
        var rng = SystemRandomNumberGenerator()
        let identity = try DTLSIdentity()
        var dtls: DTLSEndpoint?
        var srtpIn: SRTPSession?
        var fromJanus = (rtp: 0, decrypted: 0, refused: 0)
        let local = OpusAudioNegotiation.LocalEndpoint(
            iceUfrag: "rmd\(rng.next() % 10_000)", icePassword: "roomd-live-test-password-\(rng.next() % 1_000_000)",
            fingerprint: identity.fingerprint,
            candidates: [ICECandidate(foundation: "1", priority: ICECandidate.priority(kind: .host),
                                      address: interface.address, port: Int(udp.localPort), kind: .host)],
            ssrc: UInt32.random(in: 1 ... .max), cname: "roomd-test")
        let agent = ICEAgent(role: .controlling, local: .init(ufrag: local.iceUfrag, password: local.icePassword),
                             tieBreaker: rng.next(), hmac: STUNMessage.hmacSHA1, random: { UInt64.random(in: 0 ... .max) })
        func flushICE() {
            for out in agent.takeOutgoing() {
                let ip = out.destination.ip.map(String.init).joined(separator: ".")
                if let to = try? SocketAddress(ip: ip, port: out.destination.port) { _ = try? udp.send(out.bytes, to: to) }
            }
            // DTLS goes where ICE selected.
            if let dtls, let selected = agent.selectedAddress,
               let to = try? SocketAddress(ip: selected.ip.map(String.init).joined(separator: "."), port: selected.port) {
                for datagram in dtls.takeOutgoing() { _ = try? udp.send(datagram, to: to) }
            }
        }
        var buffer = [UInt8](repeating: 0, count: 2048)
        try udp.onReadable(loop: loop) { socket in
            while let d = buffer.withUnsafeMutableBytes({ try? socket.receive(into: $0) }) ?? nil {
                let parts = d.source.host.split(separator: ".").compactMap { UInt8($0) }
                guard parts.count == 4, let p = d.source.port else { continue }
                buffer.withUnsafeBytes {
                    let datagram = UnsafeRawBufferPointer(rebasing: $0[0 ..< d.count])
                    let from = STUNAddress(ip: parts, port: p)
                    if agent.receive(datagram, from: from, now: nowMs()) { return }
                    // RFC 7983: 20-63 is DTLS; only from where ICE selected.
                    if let first = datagram.first, (20 ... 63).contains(first), from == agent.selectedAddress {
                        dtls?.receive(datagram, now: nowMs())
                    }
                    // RTP (not RTCP: payload types 200-206 with rtcp-mux, RFC 5761) from Janus.
                    if datagram.count > 12, datagram[0] & 0xC0 == 0x80, !(72 ... 78).contains(datagram[1] & 0x7F),
                       from == agent.selectedAddress, let srtpIn {
                        fromJanus.rtp += 1
                        var copy = Array(datagram)
                        let outcome = copy.withUnsafeMutableBytes { srtpIn.unprotect($0, length: datagram.count) }
                        if case .rtp = outcome { fromJanus.decrypted += 1 } else { fromJanus.refused += 1 }
                    }
                }
            }
            flushICE()
        }

        // The WebSocket to Janus and the AudioBridge session on it.
        var ws = WebSocketClient(nonce: (0 ..< 16).map { _ in UInt8.random(in: 0 ... 255) }, sha1: WebSocketClient.sha1,
                                 maskSource: { UInt32.random(in: 0 ... .max) })
        var session = JanusAudioBridgeSession(room: 1234, display: "roomd live test")
        var outputs: [JanusAudioBridgeSession.Output] = []
        var connection: StreamConnection?
        let janusAddress = try SocketAddress(ip: "127.0.0.1", port: UInt16(port))
        func pump() {
            for text in session.takeOutgoing() { ws.send(text: text) }
            let bytes = ws.takeOutgoing()
            if !bytes.isEmpty { _ = connection?.write(bytes) }
        }
        var opened = false
        XCTAssertTrue(run(seconds: 5) {
            if connection == nil || connection?.isOpen == false {
                connection = try? StreamConnection.connect(to: janusAddress, loop: loop) { c, event in
                    switch event {
                    case .connected:
                        ws.open(host: "127.0.0.1:\(port)")
                        pump()
                    case .readable:
                        var chunk = [UInt8](repeating: 0, count: 65_536)
                        while case .bytes(let n)? = try? chunk.withUnsafeMutableBytes({ try c.read(into: $0) }) {
                            for event in ws.receive(chunk[0 ..< n]) {
                                switch event {
                                case .opened: opened = true
                                case .text(let t): outputs += session.receive(t, now: nowMs())
                                default: break
                                }
                            }
                        }
                        pump()
                    default: break
                    }
                }
                Thread.sleep(forTimeInterval: 0.1)
            }
            return opened
        }, "WebSocket to Janus on port \(port)")

        let offer = OpusAudioNegotiation.offer(local, sessionID: "\(UInt32.random(in: 1 ... .max))")
        session.join(offer: offer.text, muted: true, now: nowMs())
        pump()
        XCTAssertTrue(run(seconds: 5) { outputs.contains { if case .answer = $0 { true } else { false } } || session.state != .joining && session.state != .attaching && session.state != .creatingSession },
                      "Janus answered: \(outputs)")
        guard case .answer(let sdp)? = outputs.first(where: { if case .answer = $0 { true } else { false } }) else {
            return XCTFail("no SDP answer from Janus; state \(session.state), outputs \(outputs)")
        }
        XCTAssertTrue(outputs.contains { if case .joined = $0 { true } else { false } }, "\(outputs)")
        let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: sdp), to: local)
        XCTAssertEqual(agreement.payloadType, 111)
        XCTAssertFalse(agreement.remoteCandidates.isEmpty, "Janus offers host candidates on loopback:\n\(sdp)")

        agent.start(remote: .init(ufrag: agreement.remoteUfrag, password: agreement.remotePassword),
                    candidates: agreement.remoteCandidates.compactMap { c in
                        let parts = c.address.split(separator: ".").compactMap { UInt8($0) }
                        return parts.count == 4 ? (STUNAddress(ip: parts, port: UInt16(c.port)), c.priority) : nil
                    }, now: nowMs())
        if agreement.remoteCandidatesComplete { agent.remoteCandidatesComplete() }
        session.trickle(.end, now: nowMs())
        pump()
        let connected = run(seconds: 6) {
            agent.tick(now: nowMs())
            flushICE()
            return agent.state == .connected
        }
        let log = (try? String(contentsOfFile: directory + "/janus.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(connected, "ICE with Janus: \(agent.state), \(agent.counters)\nanswer:\n\(sdp)\nJanus log:\n\(log.suffix(3000))")
        XCTAssertEqual(agent.counters.refusedIntegrity, 0, "every answer from Janus verified with its password")

        // DTLS-SRTP: Janus answered setup:active, so it sends the ClientHello; the appliance serves.
        XCTAssertEqual(agreement.dtlsRole, .server)
        let endpoint = try DTLSEndpoint(identity: identity, role: agreement.dtlsRole == .client ? .client : .server,
                                        expectedPeer: agreement.remoteFingerprint)
        dtls = endpoint
        endpoint.start(now: nowMs())
        let up = run(seconds: 6) {
            agent.tick(now: nowMs())
            endpoint.tick(now: nowMs())
            flushICE()
            if case .failed = endpoint.state { return true }
            return outputs.contains(.mediaUp)
        }
        XCTAssertTrue(up, "Janus's webrtcup: DTLS \(endpoint.state), outputs \(outputs)")
        guard case .connected(let keys) = endpoint.state else { return XCTFail("DTLS: \(endpoint.state)") }
        XCTAssertEqual(keys.profile, "SRTP_AEAD_AES_128_GCM", "Janus's libsrtp offers GCM too")
        XCTAssertTrue(outputs.contains(.mediaUp), "Janus reports the PeerConnection up")

        // Media both ways with the exported keys: 2 s of 20 ms Opus frames (CELT silence, the
        // RFC 6464 level in extension 1 as negotiated) to Janus, whatever Janus sends decrypted.
        let sendKey = try XCTUnwrap(SRTPMasterKey(bytes: keys.local)), receiveKey = try XCTUnwrap(SRTPMasterKey(bytes: keys.remote))
        let srtpOut = try SRTPSession(key: sendKey, direction: .protect)
        srtpIn = try SRTPSession(key: receiveKey, direction: .unprotect)
        let opusSilence: [UInt8] = [0xF8, 0xFF, 0xFE]
        var packetBuffer = [UInt8](repeating: 0, count: 1500)
        var sequence: UInt16 = UInt16.random(in: 0 ... 1000)
        var nextSend = nowMs()
        _ = run(seconds: 2.5) {
            if nowMs() >= nextSend, let selected = agent.selectedAddress,
               let to = try? SocketAddress(ip: selected.ip.map(String.init).joined(separator: "."), port: selected.port) {
                let header = RTPPacket(sequenceNumber: sequence, timestamp: UInt32(sequence) &* 960, ssrc: offer.media[0].attribute("ssrc")
                    .flatMap { UInt32($0.split(separator: " ")[0]) } ?? 1, audioLevel: RTPAudioLevel(voiceActivity: false, level: 127))
                let n = packetBuffer.withUnsafeMutableBytes { out in
                    opusSilence.withUnsafeBytes { try? header.serialize(payload: $0, into: out, audioLevelExtensionID: agreement.audioLevelExtensionID ?? 1) }
                } ?? 0
                if let total = packetBuffer.withUnsafeMutableBytes({ srtpOut.protect($0, length: n) }) {
                    _ = try? udp.send(Array(packetBuffer[0 ..< total]), to: to)
                }
                sequence &+= 1
                nextSend += 20
            }
            agent.tick(now: nowMs())
            flushICE()
            return false
        }
        XCTAssertTrue(outputs.contains(.janusReceivesAudio(true)), "Janus decrypts our SRTP and says it receives audio: \(outputs)")
        XCTAssertGreaterThanOrEqual(srtpOut.statistics.protected, 100, "2 s of 20 ms packets sent")
        XCTAssertGreaterThan(fromJanus.rtp, 0, "Janus sends the room's mix")
        XCTAssertEqual(fromJanus.decrypted, fromJanus.rtp, "every RTP packet from Janus decrypts with the exported key (\(fromJanus))")
        session.leave(now: nowMs())
        pump()
        _ = run(seconds: 0.3) { false }
    }
}
