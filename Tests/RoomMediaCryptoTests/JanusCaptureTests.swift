import Foundation
import Glibc
import RoomBase
import RoomClient
@testable import RoomJanusBackend
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSystem
import RoomTestSupport
@testable import RoomWebRTC
import XCTest

/// The appliance ↔ Janus path on the wire (issue 12's acceptance): a packet capture of a call
/// through a real Janus AudioBridge (`scripts/janus-dev`) holds only STUN, DTLS and SRTP on the
/// appliance's media port — no plaintext RTP: every RTP-shaped datagram decrypts, with the keys
/// DTLS exported, under an RFC 7714 reference on OpenSSL (not libsrtp), and none carries the
/// talker's payload in clear.
final class JanusCaptureTests: XCTestCase {
    static let marker = Array("ROOMD-PLAINTEXT-OPUS-MARKER-".utf8)
    private var janus: Process?

    override func tearDown() {
        if let janus, janus.isRunning { janus.terminate(); janus.waitUntilExit() }
        super.tearDown()
    }

    private func startJanus() throws -> Int {
        guard JanusDev.isInstalled else { throw XCTSkip("janus is not installed (scripts/setup installs it)") }
        let started = try JanusDev.start(directory: TestScratch.directory("roomd-janus-capture"))
        janus = started.process
        return started.port
    }

    func testTheJanusPathCarriesOnlySTUNDTLSAndSRTP() throws {
        let port = try startJanus()
        let capture = try PacketCapture()
        let loop = try EventLoop()
        RoomSession.prepareMediaEncryption()
        let outgoing = SPSCRing<MediaPacket>(capacity: 128), incoming = SPSCRing<MediaPacket>(capacity: 512)
        let session = try JanusRoomSession(
            loop: loop,
            configuration: JanusRoomConfiguration(endpoints: [HostPort(host: "127.0.0.1", port: UInt16(port))], tls: nil, room: 1234,
                                                  display: "Capture-Talker-Marker", role: .streamer),
            outgoing: outgoing, incoming: incoming)
        var lossReports: [Int] = []
        session.onEvent = { if case .receiverLoss(let permille, _) = $0 { lossReports.append(permille) } }
        session.start()
        XCTAssertTrue(run(loop, seconds: 10) { session.isMediaPathUp }, "state \(session.connectionState), Janus \(String(describing: session.janusState))")
        let transport = try XCTUnwrap(session.transport)
        let mediaPort = transport.socket.localPort
        let keys = try XCTUnwrap(transport.srtpMasterKeys, "the keys DTLS exported")

        // 1.5 s of 10 ms packets whose payload is the marker, and Janus's mix coming back.
        var sent = 0
        let start = monotonicNanoseconds()
        _ = run(loop, seconds: 1.5) {
            guard UInt64(sent) * 10_000_000 < monotonicNanoseconds() - start else { return false }
            var packet = MediaPacket()
            packet.timestamp = UInt32(sent) * 480
            packet.audioLevel = 30
            let payload = Self.marker + [UInt8(sent & 0xFF)] + Self.marker
            _ = payload.withUnsafeBytes { packet.setPayload($0) }
            if outgoing.push(packet) { sent += 1 }
            session.drainOutgoingMedia()
            return false
        }
        XCTAssertGreaterThanOrEqual(session.statistics.packetsSent, 100, "\(session.statistics)")
        XCTAssertGreaterThan(session.statistics.packetsReceived, 20, "Janus's mix reached the appliance: \(session.statistics)")
        // Janus's RTCP receiver reports: a round trip, and its loss of our stream for the FEC.
        XCTAssertTrue(run(loop, seconds: 3) { !lossReports.isEmpty && session.statistics.lastMediaRTTMs != nil },
                      "RTCP from Janus: \(String(describing: transport.statistics))")
        XCTAssertEqual(lossReports.last, 0, "nothing is lost on loopback")
        session.leave()
        _ = run(loop, seconds: 0.3) { false }

        // Each datagram appears twice on loopback (sent, received): classify them all.
        let datagrams = capture.drain().filter { !$0.isTCP && ($0.sourcePort == mediaPort || $0.destinationPort == mediaPort) }
        var stun = 0, dtls = 0, rtp: [PacketCapture.Datagram] = [], rtcp = 0, other: [PacketCapture.Datagram] = []
        for d in datagrams {
            guard let first = d.payload.first else { other.append(d); continue }
            switch first {
            case 0 ... 3: stun += 1
            case 20 ... 63: dtls += 1
            case 128 ... 191 where d.payload.count > 1 && (72 ... 78).contains(d.payload[1] & 0x7F): rtcp += 1
            case 128 ... 191: rtp.append(d)
            default: other.append(d)
            }
        }
        XCTAssertTrue(other.isEmpty, "datagrams that are neither STUN, DTLS nor SRTP: \(other.prefix(5))")
        XCTAssertGreaterThan(stun, 0, "ICE checks and consent")
        XCTAssertGreaterThanOrEqual(dtls, 4, "the DTLS handshake's flights")
        let up = rtp.filter { $0.sourcePort == mediaPort }, down = rtp.filter { $0.destinationPort == mediaPort }
        XCTAssertGreaterThanOrEqual(up.count, 100, "the capture saw the appliance's packets")
        XCTAssertGreaterThan(down.count, 20, "and Janus's")
        for d in datagrams {
            XCTAssertFalse(contains(d.payload, Array(Self.marker[0 ..< 12])), "plaintext payload on the wire: \(d)")
        }
        // Every RTP-shaped datagram is SRTP under the DTLS-exported keys: ours with the local
        // key, Janus's with the remote one, and neither with the other's.
        let upKeys = ReferenceSRTP.sessionKeys(master: keys.local), downKeys = ReferenceSRTP.sessionKeys(master: keys.remote)
        var markersFound = 0
        for (packets, right, wrong) in [(up, upKeys, downKeys), (down, downKeys, upKeys)] {
            for d in packets {
                let plain = try XCTUnwrap(ReferenceSRTP.decrypt(d.payload, keys: right), "\(d) does not decrypt as RFC 7714 SRTP")
                XCTAssertNil(ReferenceSRTP.decrypt(d.payload, keys: wrong))
                let header = try plain.withUnsafeBytes { try RTPPacket.parse($0) }
                XCTAssertEqual(header.payloadType, 111)
                if Array(plain[header.payloadOffset...].prefix(Self.marker.count)) == Self.marker { markersFound += 1 }
            }
        }
        XCTAssertEqual(markersFound, up.count, "every packet the appliance sent carries the talker's payload once decrypted")
    }

    private func run(_ loop: EventLoop, seconds: Double, until condition: () -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() {
            if monotonicNanoseconds() > deadline { return false }
            _ = try? loop.runOnce(timeout: .milliseconds(5))
        }
        return true
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0 ... haystack.count - needle.count).contains { Array(haystack[$0 ..< $0 + needle.count]) == needle }
    }
}
