import Foundation
import Glibc
import RoomBase
@testable import RoomClient
import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest

/// Issue 11's acceptance: a packet capture of a call on the loopback path — signalling over
/// TLS and media over SRTP, as installed — holds no plaintext token, key, name or Opus payload,
/// and the captured media decrypts with the participants' keys through `ReferenceSRTP` (OpenSSL,
/// no libsrtp): it is standard SRTP, not just scrambled bytes.
///
/// The capture is a packet socket (AF_PACKET, what tcpdump uses) on every interface, so it
/// sees the packets as the kernel carried them (TCP segments and UDP datagrams); it needs root
/// (CAP_NET_RAW), else the test is skipped.
final class CallCaptureTests: XCTestCase {
    static let secret = [UInt8](repeating: 3, count: 32)
    /// What the talker "says": a payload no encryption would leave on the wire by chance.
    static let marker = Array("ROOMD-PLAINTEXT-OPUS-MARKER-".utf8)

    func testCapturedCallIsSRTPThatDecryptsWithTheKeysAndHoldsNoPlaintext() throws {
        let capture = try PacketCapture()
        // A throwaway CA and a server certificate for 127.0.0.1, removed with the test.
        let certificates = try TestCertificates()
        do { try certificates.issue(san: "IP:127.0.0.1", days: 2) } catch {
            throw XCTSkip("scripts/make-dev-certs failed (openssl missing?): \(error)")
        }
        let loop = try EventLoop()
        var configuration = RoomServerConfiguration(
            listen: [.ipv4Loopback(port: 0)], media: .ipv4Loopback(port: 0),
            keys: ["k1": RoomServerKey(keyID: "k1", appID: "app", secret: Self.secret)],
            room: RoomConfig(policy: .open, speakerLimit: 6, topN: 3))
        configuration.tls = RoomServerTLSFiles(certFile: certificates.path("server.pem"), keyFile: certificates.path("server.key"))
        XCTAssertTrue(configuration.srtp, "encrypted by default")
        let server = RoomServer(configuration: configuration, loop: loop)
        try server.start()
        let mediaPort = try XCTUnwrap(server.mediaAddress?.port)
        let signallingPort = try XCTUnwrap(server.signallingAddresses.first?.port)
        var tokens: [String] = []

        func member(_ user: String, publish: Bool, role: RoomRole) throws -> (RoomSession, SPSCRing<MediaPacket>, SPSCRing<MediaPacket>) {
            let now = RoomTokenVerifier.systemClock()
            let token = RoomToken.mint(
                claims: RoomTokenClaims(app: "app", room: "lobby", sub: user, name: user, grants: RoomGrants(publish: publish),
                                        exp: now + 3600, nbf: now, iat: now),
                keyID: "k1", secret: Self.secret)
            tokens.append(token)
            var config = RoomSessionConfiguration(servers: server.signallingAddresses, token: token, role: role)
            config.tls = TLSClientSettings(caFile: certificates.path("ca.pem"))
            config.requireMediaEncryption = true
            let outgoing = SPSCRing<MediaPacket>(capacity: 128), incoming = SPSCRing<MediaPacket>(capacity: 256)
            let session = try RoomSession(loop: loop, configuration: config, outgoing: outgoing, incoming: incoming)
            session.start()
            return (session, outgoing, incoming)
        }
        let (a, aOut, _) = try member("Talker-Alice-Marker", publish: true, role: .streamer)
        let (b, _, bIn) = try member("Listener-Bob-Marker", publish: false, role: .audience)
        XCTAssertTrue(try run(loop) { a.isSendingMedia && a.isMediaPathUp && b.isMediaPathUp })
        let aKeys = try XCTUnwrap(a.mediaEncryption), bKeys = try XCTUnwrap(b.mediaEncryption)
        let aPort = try XCTUnwrap(a.udp?.localPort), bPort = try XCTUnwrap(b.udp?.localPort)

        var sent = 0
        XCTAssertTrue(try run(loop) {
            var packet = MediaPacket()
            packet.sequenceNumber = UInt16(sent)
            packet.timestamp = UInt32(sent) * 480
            packet.audioLevel = 25
            packet.voiceActivity = true
            let payload = Self.marker + [UInt8(sent & 0xFF)] + Self.marker
            _ = payload.withUnsafeBytes { packet.setPayload($0) }
            if sent < 60, aOut.push(packet) { sent += 1 }
            a.drainOutgoingMedia()
            return bIn.availableToRead >= 50
        }, "listener got \(bIn.availableToRead) of \(sent)")
        var heard = 0
        while let p = bIn.pop() {
            if p.withPayload({ Array($0.prefix(Self.marker.count)) }) == Self.marker { heard += 1 }
        }
        XCTAssertGreaterThanOrEqual(heard, 50, "the listener hears the talker in plain after decryption")
        XCTAssertEqual(b.statistics.srtpAuthenticationFailures + b.statistics.srtpReplays, 0)

        let captured = capture.drain()
        // Signalling: TLS records only, and none of the secrets or names the join carried.
        let signalling = captured.filter { $0.isTCP && ($0.sourcePort == signallingPort || $0.destinationPort == signallingPort) && !$0.payload.isEmpty }
        XCTAssertGreaterThanOrEqual(signalling.count, 4, "the capture saw the signalling (hellos, welcomes, events)")
        let clientFirst = try XCTUnwrap(signalling.first { $0.destinationPort == signallingPort })
        XCTAssertEqual(Array(clientFirst.payload.prefix(3)), [0x16, 0x03, 0x01], "the client's first bytes are a TLS ClientHello record")
        let aMediaKey = try XCTUnwrap(a.mediaKey), bMediaKey = try XCTUnwrap(b.mediaKey)
        var secrets: [(String, [UInt8])] = [("Talker-Alice-Marker", Array("Talker-Alice-Marker".utf8)),
                                            ("Listener-Bob-Marker", Array("Listener-Bob-Marker".utf8)),
                                            ("hello", Array("\"hello\"".utf8)), ("welcome", Array("\"welcome\"".utf8))]
        for (i, t) in tokens.enumerated() { secrets.append(("token \(i)", Array(t.utf8.prefix(40)))) }
        for key in [a.mediaEncryption!.uplink.bytes, a.mediaEncryption!.downlink.bytes, b.mediaEncryption!.uplink.bytes,
                    b.mediaEncryption!.downlink.bytes, aMediaKey.bytes, bMediaKey.bytes] {
            secrets.append(("key (raw)", key))
            secrets.append(("key (base64)", Array(Base64.encode(key).utf8.prefix(20))))
        }
        let tcpStream = signalling.flatMap(\.payload)
        for (what, bytes) in secrets {
            XCTAssertFalse(contains(tcpStream, bytes), "\(what) in clear on the signalling connection")
        }
        // The capture: every datagram to or from the server's media port.
        let datagrams = captured.filter { !$0.isTCP && ($0.sourcePort == mediaPort || $0.destinationPort == mediaPort) }
        let rtp = datagrams.filter { ($0.payload.first ?? 0) & 0xC0 == 0x80 }
        let up = rtp.filter { $0.sourcePort == aPort && $0.destinationPort == mediaPort }
        let down = rtp.filter { $0.sourcePort == mediaPort && $0.destinationPort == bPort }
        XCTAssertGreaterThanOrEqual(up.count, 50, "the capture saw the talker's packets")
        XCTAssertGreaterThanOrEqual(down.count, 50, "and the forwarded ones")
        XCTAssertEqual(up.count + down.count, rtp.count, "no other RTP on the media port")
        for d in datagrams {
            XCTAssertFalse(contains(d.payload, Array(Self.marker[0 ..< 12])), "plaintext payload on the wire: \(d)")
        }
        // Decrypted independently: the talker's uplink key opens what it sent, the listener's
        // downlink key what the server forwarded, and neither opens the other's.
        let upKeys = ReferenceSRTP.sessionKeys(master: aKeys.uplink.bytes)
        let downKeys = ReferenceSRTP.sessionKeys(master: bKeys.downlink.bytes)
        for (packets, keys, wrong) in [(up, upKeys, downKeys), (down, downKeys, upKeys)] {
            for d in packets {
                let plain = try XCTUnwrap(ReferenceSRTP.decrypt(d.payload, keys: keys), "does not decrypt as RFC 7714 SRTP")
                let header = try plain.withUnsafeBytes { try RTPPacket.parse($0) }
                XCTAssertEqual(header.audioLevel?.level, 25)
                XCTAssertEqual(Array(plain[header.payloadOffset ..< header.payloadOffset + Self.marker.count]), Self.marker)
                XCTAssertNil(ReferenceSRTP.decrypt(d.payload, keys: wrong))
            }
        }
        a.leave()
        b.leave()
        _ = try run(loop, seconds: 2) { a.connectionState == .disconnected(.left) && b.connectionState == .disconnected(.left) }
    }

    private func run(_ loop: EventLoop, seconds: Double = 5, until condition: () -> Bool) throws -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() {
            if monotonicNanoseconds() > deadline { return false }
            _ = try loop.runOnce(timeout: .milliseconds(5))
        }
        return true
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0 ... haystack.count - needle.count).contains { Array(haystack[$0 ..< $0 + needle.count]) == needle }
    }
}

/// IPv4 UDP datagrams and TCP segments as a packet socket sees them (on loopback each appears
/// twice: sent and received).
final class PacketCapture {
    struct Datagram: CustomStringConvertible {
        let sourcePort: UInt16
        let destinationPort: UInt16
        let payload: [UInt8]
        var isTCP = false
        var description: String { "\(isTCP ? "TCP" : "UDP") \(sourcePort)→\(destinationPort), \(payload.count) bytes" }
    }

    private let fd: Int32

    init() throws {
        let ethPIP = UInt16(0x0800)
        fd = socket(AF_PACKET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), Int32(ethPIP.bigEndian))
        guard fd >= 0 else { throw XCTSkip("no packet socket (needs root / CAP_NET_RAW): errno \(errno)") }
        var size: Int32 = 16 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    func drain() -> [Datagram] {
        var out: [Datagram] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            let ip = buffer[0 ..< n]
            guard n >= 20, ip[0] >> 4 == 4, ip[9] == 17 || ip[9] == 6 else { continue }
            let h = Int(ip[0] & 0x0F) * 4
            if ip[9] == 6 {
                let total = Int(ip[2]) << 8 | Int(ip[3])
                guard n >= h + 20, total <= n else { continue }
                let dataOffset = Int(ip[h + 12] >> 4) * 4
                guard h + dataOffset <= total else { continue }
                out.append(Datagram(sourcePort: UInt16(ip[h]) << 8 | UInt16(ip[h + 1]),
                                    destinationPort: UInt16(ip[h + 2]) << 8 | UInt16(ip[h + 3]),
                                    payload: Array(ip[h + dataOffset ..< total]), isTCP: true))
                continue
            }
            guard n >= h + 8 else { continue }
            let udpLength = Int(ip[h + 4]) << 8 | Int(ip[h + 5])
            guard udpLength >= 8, h + udpLength <= n else { continue }
            out.append(Datagram(sourcePort: UInt16(ip[h]) << 8 | UInt16(ip[h + 1]),
                                destinationPort: UInt16(ip[h + 2]) << 8 | UInt16(ip[h + 3]),
                                payload: Array(ip[h + 8 ..< h + udpLength])))
        }
        return out
    }
}

