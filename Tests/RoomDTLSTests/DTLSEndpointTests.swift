import Foundation
import XCTest
import RoomDTLS
import RoomSDP

/// Two endpoints handshaking through memory, with loss: the keys agree crosswise, the profile
/// is AEAD-GCM, and a certificate other than the one the SDP announced is refused.
final class DTLSEndpointTests: XCTestCase {
    /// Runs on the real clock (OpenSSL's retransmission timer is real time).
    @discardableResult
    func handshake(client: DTLSEndpoint, server: DTLSEndpoint, dropEvery: Int = 0, until limit: UInt64 = 10_000) -> UInt64 {
        let start = DispatchTime.now().uptimeNanoseconds
        var now: UInt64 { (DispatchTime.now().uptimeNanoseconds - start) / 1_000_000 }
        var sent = 0
        client.start(now: now)
        server.start(now: now)
        while now < limit {
            for (from, to) in [(client, server), (server, client)] {
                for datagram in from.takeOutgoing() {
                    sent += 1
                    if dropEvery > 0 && sent % dropEvery == 0 { continue }
                    datagram.withUnsafeBytes { to.receive($0, now: now) }
                }
            }
            if case .connected = client.state, case .connected = server.state { return now }
            if case .failed = client.state { return now }
            if case .failed = server.state { return now }
            usleep(2_000)
            client.tick(now: now)
            server.tick(now: now)
        }
        return now
    }

    func testHandshakeAgreesOnGCMKeysBothWays() throws {
        let a = try DTLSIdentity(), b = try DTLSIdentity()
        XCTAssertNotEqual(a.fingerprint, b.fingerprint)
        let client = try DTLSEndpoint(identity: a, role: .client, expectedPeer: b.fingerprint)
        let server = try DTLSEndpoint(identity: b, role: .server, expectedPeer: a.fingerprint)
        handshake(client: client, server: server)
        guard case .connected(let c) = client.state, case .connected(let s) = server.state else {
            return XCTFail("client \(client.state), server \(server.state)")
        }
        XCTAssertEqual(c.profile, "SRTP_AEAD_AES_128_GCM")
        XCTAssertEqual(c.local.count, 28)
        XCTAssertEqual(c.local, s.remote)
        XCTAssertEqual(c.remote, s.local)
        XCTAssertNotEqual(c.local, c.remote)
    }

    func testRetransmissionsCarryTheHandshakeThroughLoss() throws {
        let a = try DTLSIdentity(), b = try DTLSIdentity()
        let client = try DTLSEndpoint(identity: a, role: .client, expectedPeer: b.fingerprint)
        let server = try DTLSEndpoint(identity: b, role: .server, expectedPeer: a.fingerprint)
        let t = handshake(client: client, server: server, dropEvery: 3, until: 8_000)
        guard case .connected = client.state, case .connected = server.state else {
            return XCTFail("client \(client.state), server \(server.state) after \(t) ms")
        }
    }

    func testACertificateOtherThanTheAnnouncedOneIsRefused() throws {
        let a = try DTLSIdentity(), b = try DTLSIdentity(), mallory = try DTLSIdentity()
        let client = try DTLSEndpoint(identity: a, role: .client, expectedPeer: b.fingerprint)
        let server = try DTLSEndpoint(identity: mallory, role: .server, expectedPeer: a.fingerprint)
        handshake(client: client, server: server)
        guard case .failed(let why) = client.state else { return XCTFail("client \(client.state)") }
        XCTAssertTrue(why.contains("not the sha-256"), why)
    }
}
