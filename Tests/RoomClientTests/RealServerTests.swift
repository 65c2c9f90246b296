import RoomBase
import RoomClient
import RoomMedia
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// The session against the real `RoomServer` (RoomServerKit), in-process on one loop.
final class RealServerTests: XCTestCase {
    static let secret = [UInt8](repeating: 7, count: 32)

    func makeServer(loop: EventLoop, listen: SocketAddress = .ipv4Loopback(port: 0),
                    media: SocketAddress = .ipv4Loopback(port: 0)) throws -> RoomServer {
        // Plain signalling: RoomTLSTests runs the session and server over TLS.
        var configuration = RoomServerConfiguration(
            listen: [], media: media,
            keys: ["k1": RoomServerKey(keyID: "k1", appID: "app", secret: Self.secret)],
            room: RoomConfig(policy: .open, speakerLimit: 6, topN: 3))
        configuration.plainListen = [listen]
        let server = RoomServer(configuration: configuration, loop: loop)
        try server.start()
        return server
    }

    func token(user: String, publish: Bool) -> String {
        let now = RoomTokenVerifier.systemClock()
        return RoomToken.mint(
            claims: RoomTokenClaims(app: "app", room: "lobby", sub: user, name: user,
                                    grants: RoomGrants(publish: publish), exp: now + 3600, nbf: now, iat: now),
            keyID: "k1", secret: Self.secret)
    }

    final class Member {
        let outgoing = SPSCRing<MediaPacket>(capacity: 64)
        let incoming = SPSCRing<MediaPacket>(capacity: 256)
        var session: RoomSession!
        var events: [RoomSessionEvent] = []
    }

    func member(_ loop: EventLoop, _ servers: [SocketAddress], user: String, role: RoomRole, publish: Bool) throws -> Member {
        let m = Member()
        var config = RoomSessionConfiguration(servers: servers, token: token(user: user, publish: publish), role: role)
        config.backoff = RoomBackoff(initial: .milliseconds(50), maximum: .milliseconds(200))
        m.session = try RoomSession(loop: loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.onEvent = { [unowned m] in m.events.append($0) }
        m.session.start()
        return m
    }

    func testSpeakerIsHeardThroughTheRealServerAndRestartIsSurvived() throws {
        let loop = try EventLoop()
        var server: RoomServer? = try makeServer(loop: loop)
        let listen = server!.plainSignallingAddresses[0]
        let media = server!.mediaAddress!
        let a = try member(loop, [listen], user: "a", role: .streamer, publish: true)
        let b = try member(loop, [listen], user: "b", role: .audience, publish: false)
        XCTAssertTrue(try runLoop(loop) {
            a.session.isSendingMedia && a.session.isMediaPathUp && b.session.isMediaPathUp
                && b.session.participants.count == 2
        }, "a: \(a.session.connectionState) b: \(b.session.connectionState)")
        let aSSRC = try XCTUnwrap(a.session.joinInfo?.ssrc)
        XCTAssertEqual(b.session.participants[a.session.joinInfo!.participantID]?.stage, .onStage)

        // A speaks; B receives A's packets in its incoming ring.
        var seq: UInt16 = 1
        func speak(_ n: Int) {
            for _ in 0 ..< n {
                _ = a.outgoing.push(makePacket(sequence: seq, timestamp: UInt32(seq) * 480))
                seq &+= 1
            }
            a.session.outgoingSignal.signal()
        }
        XCTAssertTrue(try runLoop(loop) {
            speak(1)
            return b.incoming.availableToRead >= 5
        })
        let heard = try XCTUnwrap(b.incoming.pop())
        XCTAssertEqual(heard.ssrc, aSSRC)
        XCTAssertGreaterThan(heard.arrivalSamples, 0)
        XCTAssertEqual(a.incoming.availableToRead, 0, "A does not hear itself")

        // B (audience) is not forwarded: its packets are dropped locally already.
        _ = b.outgoing.push(makePacket(sequence: 1, timestamp: 480))
        b.session.outgoingSignal.signal()
        XCTAssertTrue(try runLoop(loop) { b.session.statistics.droppedNotOnStage == 1 })

        // Server restart on the same addresses: both come back by themselves.
        server!.shutdown()
        XCTAssertTrue(try runLoop(loop) { a.session.connectionState != .connected && b.session.connectionState != .connected })
        try runLoop(loop, for: 0.3)
        server = nil
        server = try makeServer(loop: loop, listen: listen, media: media)
        XCTAssertTrue(try runLoop(loop, seconds: 8) {
            a.session.connectionState == .connected && b.session.connectionState == .connected
                && a.session.isSendingMedia && b.session.isMediaPathUp && a.session.isMediaPathUp
        }, "a: \(a.session.connectionState) b: \(b.session.connectionState)")
        while b.incoming.pop() != nil {}
        XCTAssertTrue(try runLoop(loop) {
            speak(1)
            return b.incoming.availableToRead >= 3
        })
        XCTAssertEqual(b.incoming.pop()?.ssrc, a.session.joinInfo?.ssrc)
        XCTAssertGreaterThanOrEqual(a.session.statistics.reconnects, 1)
        XCTAssertTrue(a.events.contains { if case .removed(.roomClosed, _) = $0 { true } else { false } })
        a.session.leave()
        b.session.leave()
        XCTAssertTrue(try runLoop(loop) {
            a.session.connectionState == .disconnected(.left) && b.session.connectionState == .disconnected(.left)
        })
    }
}
