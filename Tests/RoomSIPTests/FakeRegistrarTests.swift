import Foundation
import RoomSystem
import XCTest
@testable import RoomSIP

/// A registrar of the test's own on the same loop, for the answers kamailio's test
/// configuration does not give: a server error, 423, garbage. It answers each REGISTER with
/// whatever `answer` returns (status line and extra headers), echoing the request's Via, From,
/// To (tagged), Call-ID and CSeq as RFC 3261 §8.2.6.2 asks.
final class FakeRegistrar {
    let socket: UDPSocket
    var requests: [String] = []
    var answer: (String) -> (status: String, headers: String) = { _ in ("200 OK", "") }

    init(loop: EventLoop) throws {
        socket = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
        try socket.onReadable(loop: loop) { [unowned self] s in
            while let d = (try? s.receive(into: buffer)) ?? nil {
                let text = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[0 ..< d.count]), as: UTF8.self)
                requests.append(text)
                let (status, headers) = answer(text)
                send(Self.response(to: text, status: status, headers: headers), to: d.source)
            }
        }
    }

    func send(_ text: String, to address: SocketAddress) {
        _ = try? socket.send(Array(text.utf8), to: address)
    }

    static func response(to request: String, status: String, headers: String) -> String {
        let lines = request.components(separatedBy: "\r\n")
        func header(_ name: String) -> String { lines.first { $0.lowercased().hasPrefix(name.lowercased() + ":") } ?? "" }
        return "SIP/2.0 \(status)\r\n\(header("Via"))\r\n\(header("From"))\r\n\(header("To"));tag=fake\r\n"
            + "\(header("Call-ID"))\r\n\(header("CSeq"))\r\n\(headers)Content-Length: 0\r\n\r\n"
    }
}

final class FakeRegistrarTests: XCTestCase {
    func agent(_ loop: EventLoop, _ registrar: FakeRegistrar, expires: Int = 60) throws -> SIPUserAgent {
        let account = try SIPAccount(registrar: registrar.socket.localAddress, domain: "example.org", user: "room",
                                     password: "x", expires: expires)
        return try SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
    }

    func testServerErrorFailsThenRetries() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        registrar.answer = { _ in ("503 Service Unavailable", "") }
        let ua = try agent(loop, registrar)
        defer { ua.close() }
        ua.retryInterval = .milliseconds(300)
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 3) { if case .failed = ua.registrationState { true } else { false } })
        XCTAssertEqual(ua.registrationState, .failed(SIPRegistrationFailure(
            statusCode: 503, reason: "registrar \(registrar.socket.localAddress) refused sip:room@example.org: Service Unavailable",
            willRetry: true, retryDelay: .milliseconds(300))))
        registrar.answer = { _ in ("200 OK", "") }
        XCTAssertTrue(try run(loop, seconds: 3) { ua.registrationState == .registered(expires: 60) }, "\(ua.registrationState)")
        XCTAssertEqual(registrar.requests.count, 2)
    }

    func testIntervalTooBriefIsAnsweredWithMinExpires() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        registrar.answer = { request in
            request.contains("Expires: 30\r\n") ? ("423 Interval Too Brief", "Min-Expires: 90\r\n") : ("200 OK", "Expires: 90\r\n")
        }
        let ua = try agent(loop, registrar, expires: 30)
        defer { ua.close() }
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 3) { ua.registrationState == .registered(expires: 90) }, "\(ua.registrationState)")
        XCTAssertEqual(registrar.requests.count, 2)
        XCTAssertTrue(registrar.requests[1].contains("Expires: 90\r\n"))
    }

    /// Garbage and a response to no transaction from the registrar's address, and a valid-looking
    /// response from another address, are dropped without changing anything; the real answer
    /// that follows registers. The granted time is the Contact's expires parameter.
    func testGarbageAndStrangersAreDropped() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        let stranger = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        var ua: SIPUserAgent!
        registrar.answer = { request in
            let me = ua.localAddress
            registrar.send("\u{0}\u{ff}SIP/2.0 200 OK\r\nVia: \r\n\r\n", to: me)
            registrar.send(FakeRegistrar.response(to: request.replacingOccurrences(of: "branch=z9hG4bK", with: "branch=z9hG4bKother"),
                                                  status: "200 OK", headers: ""), to: me)
            _ = try? stranger.send(Array(FakeRegistrar.response(to: request, status: "403 Forbidden", headers: "").utf8), to: me)
            let contact = "sip:room@127.0.0.1:\(me.port!)"
            return ("200 OK", "Contact: <\(contact)>;expires=45\r\nExpires: 3000\r\n")
        }
        ua = try agent(loop, registrar)
        defer { ua.close() }
        ua.register()
        XCTAssertTrue(try run(loop, seconds: 3) { ua.registrationState == .registered(expires: 45) }, "\(ua.registrationState)")
        XCTAssertTrue(try run(loop, seconds: 1) { ua.datagramsDropped >= 3 })
        XCTAssertEqual(ua.datagramsDropped, 3)
        XCTAssertEqual(ua.registrationState, .registered(expires: 45))
    }
}

extension FakeRegistrarTests {
    /// osip reads "SIP/2.0 42.3" as status 42 (the sip fuzz target's first find): the agent
    /// drops such a response instead of ending the REGISTER with it.
    func testStatusOutside100To699IsDropped() throws {
        let loop = try EventLoop()
        let registrar = try FakeRegistrar(loop: loop)
        var first = true
        registrar.answer = { _ in
            defer { first = false }
            return first ? ("42.3 Nonsense", "") : ("200 OK", "")
        }
        let ua = try agent(loop, registrar)
        defer { ua.close() }
        ua.register()
        // The dropped answer leaves the REGISTER out; osip retransmits it (timer E, 500 ms),
        // and the second answer registers.
        XCTAssertTrue(try run(loop, seconds: 3) { ua.registrationState == .registered(expires: 60) }, "\(ua.registrationState)")
        XCTAssertEqual(ua.datagramsDropped, 1)
    }
}
