import Foundation
import RoomBase
import RoomClient
import RoomMedia
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest

/// roomserver with one TLS and one plain listener, and room sessions, on one loop turned by
/// the test thread.
final class TLSHarness {
    static let secret = [UInt8](repeating: 7, count: 32)
    let loop: EventLoop
    /// The server on the test's loop; nil with `workers` (then `group` runs it on threads).
    let server: RoomServer!
    let group: RoomServerWorkers?
    let certificates: TestCertificates

    init(certificates: TestCertificates, cert: String = "server", helloTimeoutMs: Int64? = nil, workers: Int? = nil) throws {
        self.certificates = certificates
        loop = try EventLoop()
        var configuration = RoomServerConfiguration(
            listen: [.ipv4Loopback(port: 0)], media: .ipv4Loopback(port: 0),
            keys: ["k1": RoomServerKey(keyID: "k1", appID: "app", secret: Self.secret)],
            room: RoomConfig(policy: .open, speakerLimit: 6, topN: 3))
        configuration.plainListen = [.ipv4Loopback(port: 0)]
        if let helloTimeoutMs { configuration.limits.helloTimeoutMs = helloTimeoutMs }
        configuration.tls = RoomServerTLSFiles(certFile: certificates.path("\(cert).pem"), keyFile: certificates.path("\(cert).key"))
        if let workers {
            group = try RoomServerWorkers(configuration: configuration, count: workers)
            server = nil
        } else {
            group = nil
            server = RoomServer(configuration: configuration, loop: loop)
            try server.start()
        }
    }

    deinit {
        group?.shutdown()
        group?.wait()
    }

    var tlsAddress: SocketAddress { (group?.signallingAddresses ?? server.signallingAddresses)[0] }
    var plainAddress: SocketAddress { (group?.plainSignallingAddresses ?? server.plainSignallingAddresses)[0] }

    func token(user: String, room: String = "lobby") -> String {
        let now = RoomTokenVerifier.systemClock()
        return RoomToken.mint(
            claims: RoomTokenClaims(app: "app", room: room, sub: user, name: user,
                                    grants: RoomGrants(publish: true), exp: now + 3600, nbf: now, iat: now),
            keyID: "k1", secret: Self.secret)
    }

    final class Member {
        let outgoing = SPSCRing<MediaPacket>(capacity: 64)
        let incoming = SPSCRing<MediaPacket>(capacity: 64)
        var session: RoomSession!
        var states: [RoomConnectionState] = []
        var joined: Bool { session.connectionState == .connected }
        var failure: String? {
            if case .failed(let reason) = session.connectionState { return reason }
            return nil
        }
    }

    /// A session to `address` (default: the TLS listener) with `tls` (nil: plain).
    func member(_ user: String, tls: TLSClientSettings?, address: SocketAddress? = nil, serverName: String? = nil,
                room: String = "lobby") throws -> Member {
        let m = Member()
        var config = RoomSessionConfiguration(servers: [address ?? tlsAddress], token: token(user: user, room: room), role: .streamer)
        config.tls = tls
        if let serverName { config.tls?.serverName = serverName }
        config.backoff = RoomBackoff(initial: .milliseconds(50), maximum: .milliseconds(200))
        config.handshakeTimeout = .seconds(2)
        m.session = try RoomSession(loop: loop, configuration: config, outgoing: m.outgoing, incoming: m.incoming)
        m.session.onEvent = { [unowned m] event in
            if case .stateChanged(let s) = event { m.states.append(s) }
        }
        m.session.start()
        return m
    }

    @discardableResult
    func run(seconds: Double = 5, until condition: () -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() {
            if monotonicNanoseconds() > deadline { return false }
            _ = try? loop.runOnce(timeout: .milliseconds(10))
        }
        return true
    }

    func turn(seconds: Double) { _ = run(seconds: seconds) { false } }
}
