import Foundation
import RoomSystem
import RoomTLS
import RoomTestSupport
import XCTest
@testable import RoomSIP

/// A TLS registrar of the test's own on the agent's loop, for what kamailio will not do on
/// demand: hold an answer (osip must not retransmit on a reliable transport), close the
/// connection (reconnect and register again, the old Contact taken off), send a message a
/// stream cannot frame (the connection is dropped and made again).
final class FakeTLSRegistrarTests: XCTestCase {
    final class Registrar {
        let context: TLSServerContext
        var listener: TCPListener!
        var connections: [TLSConnection] = []
        var framers: [ObjectIdentifier: SIPStreamFramer] = [:]
        /// Every request received, as text, with the connection it came on.
        var requests: [(text: String, connection: TLSConnection)] = []
        var answers = true

        init(loop: EventLoop, certificates: TestCertificates) throws {
            context = try TLSServerContext(certificateChainFile: certificates.path("server.pem"), keyFile: certificates.path("server.key"))
            listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop) { [unowned self] stream in
                guard let tls = try? TLSConnection(stream: stream, role: .server(self.context), loop: loop) else { return }
                self.connections.append(tls)
                self.framers[ObjectIdentifier(tls)] = SIPStreamFramer()
                tls.setEventHandler { [unowned self, unowned tls] event in
                    if case .readable = event { self.read(tls) }
                }
            }
        }

        var port: Int { Int(listener.localPort) }

        private func read(_ tls: TLSConnection) {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16_384, alignment: 8)
            defer { buffer.deallocate() }
            while case .bytes(let n) = (try? tls.read(into: buffer)) ?? .endOfStream {
                let items = (try? framers[ObjectIdentifier(tls)]?.append(UnsafeRawBufferPointer(rebasing: buffer[0 ..< n]))) ?? []
                for case .message(let bytes) in items {
                    let text = String(decoding: bytes, as: UTF8.self)
                    requests.append((text, tls))
                    if answers { answer(text, on: tls) }
                }
            }
        }

        func answer(_ request: String, on tls: TLSConnection) {
            let lines = request.components(separatedBy: "\r\n")
            func header(_ name: String) -> [String] { lines.filter { $0.lowercased().hasPrefix(name.lowercased() + ":") } }
            let contact = header("Contact").first { !$0.contains("expires=0") }.map { $0.dropFirst("Contact:".count).trimmingCharacters(in: .whitespaces) }
            var text = "SIP/2.0 200 OK\r\n" + (header("Via") + header("From")).joined(separator: "\r\n") + "\r\n"
                + (header("To").first ?? "") + ";tag=fake\r\n" + (header("Call-ID") + header("CSeq")).joined(separator: "\r\n") + "\r\n"
            if let contact { text += "Contact: \(contact);expires=60\r\n" }
            text += "Content-Length: 0\r\n\r\n"
            tls.write(Array(text.utf8))
        }
    }

    var loop: EventLoop!
    var certificates: TestCertificates!
    var registrar: Registrar!
    var ua: SIPUserAgent!

    override func setUpWithError() throws {
        loop = try EventLoop()
        certificates = try TestCertificates()
        try certificates.issue()
        registrar = try Registrar(loop: loop, certificates: certificates)
        let account = try SIPAccount(registrar: SocketAddressForTests.loopback(registrar.port), domain: "127.0.0.1", user: "room", password: "pw")
        let context = try TLSClientContext(settings: TLSClientSettings(caFile: certificates.path("ca.pem")))
        ua = try SIPUserAgent(loop: loop, account: account, tls: tlsConnector(context: context, serverName: "127.0.0.1"))
        ua.firstReconnectDelay = .milliseconds(100)
    }

    override func tearDown() {
        ua?.close()
        registrar?.listener.close()
    }

    var isRegistered: Bool { if case .registered = ua.registrationState { true } else { false } }

    /// No retransmission while the answer is held (UDP's timer E would resend at 0.5 s); the
    /// registrar closes the connection: the state says so, the agent connects again and
    /// registers, taking the first connection's Contact off.
    func testNoRetransmissionOnTLSAndReconnectAfterThePeerCloses() throws {
        registrar.answers = false
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 5) { registrar.requests.count == 1 })
        XCTAssertFalse(try run(loop, seconds: 0.7) { registrar.requests.count > 1 }, "a REGISTER resent over TLS")
        registrar.answers = true
        let first = registrar.requests[0]
        registrar.answer(first.text, on: first.connection)
        XCTAssertTrue(try run(loop, seconds: 5) { isRegistered }, "\(ua.registrationState)")
        let firstContact = ua.contactURI

        var states: [SIPRegistrationState] = []
        ua.onRegistrationChange = { states.append($0) }
        first.connection.closeAfterFlush()
        XCTAssertTrue(try run(loop, seconds: 5) { states.count >= 2 && isRegistered }, "\(states)")
        guard case .failed(let lost) = states.first else { return XCTFail("\(states)") }
        XCTAssertTrue(lost.reason.contains("TLS connection lost") && lost.willRetry, lost.description)
        XCTAssertEqual(ua.tlsConnectsStarted, 2)
        XCTAssertNotEqual(ua.contactURI, firstContact)
        let again = try XCTUnwrap(registrar.requests.last?.text)
        XCTAssertTrue(again.contains("<\(firstContact)>;expires=0"), again)
        XCTAssertTrue(again.contains("<\(ua.contactURI)>"), again)
    }

    /// A message without Content-Length on the stream: the framing is lost, the connection
    /// is dropped and made again.
    func testUnframableMessageDropsTheConnection() throws {
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 5) { isRegistered })
        let connection = try XCTUnwrap(registrar.requests.last?.connection)
        connection.write(Array("OPTIONS sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.1;branch=z9hG4bKx\r\n\r\n".utf8))
        XCTAssertTrue(try run(loop, seconds: 5) { ua.tlsConnectsStarted == 2 && isRegistered && registrar.requests.count >= 2 },
                      "\(ua.registrationState) \(String(describing: ua.tlsConnectsStarted))")
    }
}
