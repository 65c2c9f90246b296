import RoomICE
import RoomSDP
import RoomSystem
import RoomWebRTC
import XCTest

/// The server-reflexive candidate (`room.stun_server`): the media socket asks a STUN server for
/// its address as seen from outside, and offers it. The server here is a few lines on loopback
/// that answers as a NAT would look: with an address other than the socket's own.
final class ServerReflexiveTests: XCTestCase {
    private func run(_ loop: EventLoop, seconds: Double, until condition: () -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(2)) }
        return condition()
    }

    /// A STUN server on loopback that answers every request after the first with `mapped`.
    private func server(_ loop: EventLoop, answering mapped: STUNAddress, requests: @escaping () -> Void) throws -> UDPSocket {
        let stun = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        var count = 0
        var buffer = [UInt8](repeating: 0, count: 1500)
        try stun.onReadable(loop: loop) { socket in
            while let d = buffer.withUnsafeMutableBytes({ try? socket.receive(into: $0) }) ?? nil {
                guard let request = try? STUNMessage.parse(Array(buffer[0 ..< d.count])).message, request.messageClass == .request else { continue }
                count += 1
                requests()
                if count == 1 { continue }
                let answer = STUNMessage(class: .success, transactionID: request.transactionID,
                                         attributes: [.xorMappedAddress(mapped, transactionID: request.transactionID)])
                _ = try? socket.send(answer.serialize(), to: d.source)
            }
        }
        return stun
    }

    /// Issue 27 (found by the stun fuzz target): an IPv6 address answered to the IPv4 media
    /// socket became a "srflx" candidate of 16 dotted numbers. It is not this socket's address:
    /// no candidate (the timeout), and the host candidate alone is offered.
    func testAMappedAddressOfTheOtherFamilyIsNoCandidate() throws {
        let loop = try EventLoop()
        var requests = 0
        let v6 = STUNAddress(ip: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], port: 40_000)
        XCTAssertEqual(v6.host, "2001:db8:0:0:0:0:0:1")
        let stun = try server(loop, answering: v6) { requests += 1 }
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: 0))
        var result: ICECandidate??
        media.gatherServerReflexive(from: stun.localAddress, timeout: .milliseconds(400)) { result = .some($0) }
        XCTAssertTrue(run(loop, seconds: 2) { result != nil })
        XCTAssertNil(result ?? nil, "no candidate from an address of the other family")
        XCTAssertGreaterThanOrEqual(requests, 2, "it was answered")
    }

    func testTheNATsAddressBecomesASrflxCandidateRelatedToTheHostOne() throws {
        let loop = try EventLoop()
        var requests = 0
        // The first request is "lost": the transport must ask again.
        let stun = try server(loop, answering: STUNAddress(ip: [203, 0, 113, 7], port: 40_000)) { requests += 1 }
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: 0))
        var result: ICECandidate??
        media.gatherServerReflexive(from: stun.localAddress) { result = .some($0) }
        XCTAssertTrue(run(loop, seconds: 2) { result != nil })
        let candidate = try XCTUnwrap(result ?? nil, "no candidate after \(requests) request(s)")
        XCTAssertEqual(requests, 2, "asked again after the lost first request")
        XCTAssertEqual(candidate.kind, .srflx)
        XCTAssertEqual(candidate.address, "203.0.113.7")
        XCTAssertEqual(candidate.port, 40_000)
        XCTAssertEqual(candidate.relatedAddress, "127.0.0.1")
        XCTAssertEqual(candidate.relatedPort, Int(media.socket.localPort))
        XCTAssertLessThan(candidate.priority, ICECandidate.priority(kind: .host))
        // In the SDP offer, after the host candidate.
        var local = media.localEndpoint(ssrc: 1, cname: "c", sends: true, receives: true)
        local.candidates.append(candidate)
        let text = OpusAudioNegotiation.offer(local, sessionID: "1").text
        XCTAssertTrue(text.contains("typ srflx raddr 127.0.0.1 rport \(media.socket.localPort)"), text)
    }

    func testASilentServerGivesNoCandidateWithinTheTimeout() throws {
        let loop = try EventLoop()
        let silent = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        let media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: 0))
        var result: ICECandidate??
        let start = monotonicNanoseconds()
        media.gatherServerReflexive(from: silent.localAddress, timeout: .milliseconds(300)) { result = .some($0) }
        XCTAssertTrue(run(loop, seconds: 2) { result != nil })
        XCTAssertNil(result ?? nil)
        let waited = Double(monotonicNanoseconds() - start) / 1e6
        XCTAssertGreaterThanOrEqual(waited, 290, "gave up after the timeout, not before")
        XCTAssertLessThan(waited, 1500, "loose bound")
    }
}
