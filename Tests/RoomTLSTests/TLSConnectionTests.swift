import Foundation
import RoomBase
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest

/// `TLSConnection` on its own: StreamConnection's write and backpressure contract kept
/// through TLS records, and large messages intact.
final class TLSConnectionTests: XCTestCase {
    /// An encrypted key: a clear error at once, not OpenSSL's passphrase prompt on the terminal
    /// (a service has nobody to answer it; started by hand, the server sat at the prompt).
    func testEncryptedServerKeyIsRefusedWithoutPrompting() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let encrypted = certs.path("encrypted.key")
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["pkey", "-in", certs.path("server.key"), "-aes256", "-passout", "pass:secret", "-out", encrypted]
        try openssl.run()
        openssl.waitUntilExit()
        XCTAssertEqual(openssl.terminationStatus, 0)
        let started = Date()
        XCTAssertThrowsError(try TLSServerContext(certificateChainFile: certs.path("server.pem"), keyFile: encrypted)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("encrypted.key: the private key is encrypted with a passphrase"), text)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "no prompt waited for")
    }

    func testLargeMessagesAndBackpressureThroughTLS() throws {
        let certs = try TestCertificates()
        try certs.issue()
        let loop = try EventLoop()
        let limit = 256 * 1024
        let serverContext = try TLSServerContext(certificateChainFile: certs.path("server.pem"), keyFile: certs.path("server.key"))
        var accepted: TLSConnection?
        var received: [UInt8] = []
        var readBuffer = [UInt8](repeating: 0, count: 10_000)  // smaller than a record: reads stop mid-record
        let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop, outgoingLimit: limit) { stream in
            let c = try? TLSConnection(stream: stream, role: .server(serverContext), loop: loop)
            c?.isReadingPaused = true  // a peer that does not read, until the test says so
            c?.setEventHandler { [weak c] event in
                guard let c, case .readable = event else { return }
                // One read per event: the connection must call again for what is left.
                let r = try? readBuffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
                if case .bytes(let n)? = r { received += readBuffer[0 ..< n] }
            }
            accepted = c
        }
        let clientContext = try TLSClientContext(settings: TLSClientSettings(caFile: certs.path("ca.pem")))
        let stream = try StreamConnection.connect(to: .ipv4Loopback(port: listener.localPort), loop: loop, outgoingLimit: limit)
        let client = try TLSConnection(stream: stream, role: .client(clientContext, serverName: "127.0.0.1"), loop: loop)
        var connected = false
        var drained = 0
        client.setEventHandler { event in
            switch event {
            case .connected: connected = true
            case .drained: drained += 1
            default: break
            }
        }
        func turn(_ seconds: Double, until condition: () -> Bool) -> Bool {
            let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
            while !condition() {
                if monotonicNanoseconds() > deadline { return false }
                _ = try? loop.runOnce(timeout: .milliseconds(5))
            }
            return true
        }

        var rng = SplitMix64(seed: 11)
        func bytes(_ count: Int) -> [UInt8] { (0 ..< count).map { _ in UInt8(truncatingIfNeeded: rng.next()) } }
        XCTAssertEqual(client.write(bytes(limit + 1)), .backpressure, "more than the limit at once is refused whole")
        var sent = bytes(100_000)
        XCTAssertEqual(client.write(sent), .accepted, "queued until the handshake is done")
        XCTAssertTrue(turn(5) { connected && accepted?.isHandshakeComplete == true })
        XCTAssertTrue(client.sessionDescription.hasPrefix("TLSv1.3"), client.sessionDescription)

        // The reader is paused: TCP fills, then the writer's buffer, then writes are refused.
        var refused = false
        for _ in 0 ..< 1000 {
            let chunk = bytes(40_000)
            switch client.write(chunk) {
            case .accepted: sent += chunk
            case .backpressure: refused = true
            case .closed: XCTFail("closed")
            }
            if refused { break }
            _ = try? loop.runOnce(timeout: .milliseconds(1))
        }
        XCTAssertTrue(refused, "a peer that does not read pushes back")
        XCTAssertLessThanOrEqual(client.bufferedByteCount, limit)
        XCTAssertTrue(received.isEmpty)

        // The reader resumes: everything arrives, in order, and the writer hears `.drained`.
        accepted?.isReadingPaused = false
        XCTAssertTrue(turn(20) { received.count >= sent.count }, "\(received.count) of \(sent.count)")
        XCTAssertEqual(received.count, sent.count)
        XCTAssertTrue(received == sent, "the bytes arrive unchanged")
        XCTAssertTrue(turn(2) { drained > 0 })

        // close_notify: the reader sees the end of the stream.
        var ended = false
        accepted?.setEventHandler { [weak accepted] event in
            guard let c = accepted, case .readable = event else { return }
            var scratch = [UInt8](repeating: 0, count: 64)
            if (try? scratch.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }) == .endOfStream { ended = true }
        }
        client.closeAfterFlush()
        XCTAssertTrue(turn(2) { ended })
    }
}
