import RoomSDP
import RoomSystem
import RoomWebRTC
import XCTest

/// Two `WebRTCMediaTransport`s on loopback, one event loop: offer/answer through RoomSDP, our
/// ICE agent on both sides, DTLS-SRTP, then 20 ms RTP both ways and the SRTCP reports between
/// them — the whole path RTCP takes, on real sockets and the real clock.
final class WebRTCMediaTransportRTCPTests: XCTestCase {
    private var loop: EventLoop!

    private func run(seconds: Double, until condition: () -> Bool = { false }) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while !condition() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(2)) }
        return condition()
    }

    private func rtp(sequence: UInt16, timestamp: UInt32, ssrc: UInt32) -> [UInt8] {
        var p: [UInt8] = [0x80, 111, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        for v in [timestamp, ssrc] { p += [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        return p + [0xF8, 0xFF, 0xFE]   // an Opus CELT silence frame
    }

    /// Connects an offerer (controlling, DTLS server) and an answerer.
    private func connectedPair() throws -> (a: WebRTCMediaTransport, b: WebRTCMediaTransport, ssrcA: UInt32, ssrcB: UInt32) {
        loop = try EventLoop()
        let a = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: 0))
        let b = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: "127.0.0.1", port: 0))
        let ssrcA: UInt32 = 0xA1A1_A1A1, ssrcB: UInt32 = 0xB2B2_B2B2
        let localA = a.localEndpoint(ssrc: ssrcA, cname: "appliance-a", sends: true, receives: true)
        let localB = b.localEndpoint(ssrc: ssrcB, cname: "peer-b", sends: true, receives: true)
        let offer = OpusAudioNegotiation.offer(localA, sessionID: "1")
        let (answer, agreementB) = try OpusAudioNegotiation.answer(to: offer, local: localB, sessionID: "2")
        let agreementA = try OpusAudioNegotiation.accept(answer: answer, to: localA)
        a.start(agreementA, controlling: true)
        b.start(agreementB, controlling: false)
        let up = run(seconds: 5) {
            if case .connected = a.state, case .connected = b.state { return true }
            return false
        }
        XCTAssertTrue(up, "a \(a.state), b \(b.state)")
        return (a, b, ssrcA, ssrcB)
    }

    /// 2.5 s of 20 ms packets both ways, a dropping every 10th of its sequence numbers (as a
    /// lossy path would): both send SRs, read each other's reports, and learn the round trip;
    /// a learns that b lost ~10 % of its stream, b that a lost none. Closing a sends a BYE.
    func testReportsFlowBothWaysWithRoundTripAndLoss() throws {
        let (a, b, ssrcA, ssrcB) = try connectedPair()
        var receivedByA = 0, receivedByB = 0
        a.onRTP = { _ in receivedByA += 1 }
        b.onRTP = { _ in receivedByB += 1 }
        var next = monotonicNanoseconds()
        var i: UInt32 = 0
        _ = run(seconds: 2.5) {
            if monotonicNanoseconds() >= next {
                if i % 10 != 5 {
                    rtp(sequence: UInt16(truncatingIfNeeded: 1000 + i), timestamp: i * 960, ssrc: ssrcA).withUnsafeBytes { _ = a.sendRTP($0) }
                }
                rtp(sequence: UInt16(truncatingIfNeeded: 60000 + i), timestamp: 5000 &+ i * 960, ssrc: ssrcB).withUnsafeBytes { _ = b.sendRTP($0) }
                i += 1
                next += 20_000_000
            }
            return false
        }
        let sa = a.statistics, sb = b.statistics
        print("rtcp loopback: a \(sa)\nrtcp loopback: b \(sb)")
        XCTAssertGreaterThan(receivedByA, 100)
        XCTAssertGreaterThan(receivedByB, 100)
        for (name, s) in [("a", sa), ("b", sb)] {
            // First report 50-150 ms after connecting, then every 0.5-1.5 s: 2 to 5 in 2.5 s.
            XCTAssertTrue((2 ... 6).contains(s.rtcpSent), "\(name) sent \(s.rtcpSent) reports: \(s)")
            XCTAssertGreaterThanOrEqual(s.rtcpReceived, 2, "\(name): \(s)")
            XCTAssertEqual(s.rtcpIgnored, 0, "\(name): \(s)")
            XCTAssertEqual(s.srtpRefused, 0, "\(name): \(s)")
            let rtt = try XCTUnwrap(s.roundTripMs, "\(name) learnt no round trip: \(s)")
            XCTAssertLessThan(rtt, 20, "\(name): loopback, one event loop")
            XCTAssertLessThan(try XCTUnwrap(s.remoteJitterMs), 10, "\(name)")
        }
        let lostOfA = try XCTUnwrap(sa.remoteFractionLost)
        XCTAssertTrue((0.05 ... 0.15).contains(lostOfA), "b reports \(lostOfA) of a's stream lost; 10 % were never sent")
        XCTAssertEqual(sb.remoteFractionLost, 0)

        // Leaving: a's last report carries a BYE, which b reads.
        let before = b.statistics.rtcpReceived
        a.close()
        XCTAssertEqual(a.statistics.rtcpSent, sa.rtcpSent + 1)
        XCTAssertTrue(run(seconds: 0.5) { b.statistics.rtcpReceived > before }, "b got the BYE: \(b.statistics)")
        b.close()
    }

    /// RTCP that is not valid SRTCP from the selected pair is refused and counted, never read:
    /// a forged tag counts in `srtpRefused`, nothing changes in the RTCP figures.
    func testForgedSRTCPIsRefused() throws {
        let (a, b, _, _) = try connectedPair()
        _ = run(seconds: 0.3) { b.statistics.rtcpReceived > 0 }
        XCTAssertGreaterThan(b.statistics.rtcpReceived, 0, "\(b.statistics)")
        let sender = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        defer { sender.close() }
        // From elsewhere: dropped before SRTCP (RFC 7675 consent), counted as such.
        let forged: [UInt8] = [0x80, 201, 0, 1, 0xB2, 0xB2, 0xB2, 0xB2] + [UInt8](repeating: 0x55, count: 20) + [0x80, 0, 0, 9]
        let elsewhere = b.statistics.fromElsewhere
        _ = forged.withUnsafeBytes { try? sender.send($0, to: b.socket.localAddress) }
        XCTAssertTrue(run(seconds: 0.5) { b.statistics.fromElsewhere > elsewhere })
        // From the selected pair (a's own socket): refused by SRTCP authentication.
        let refused = b.statistics.srtpRefused, received = b.statistics.rtcpReceived
        _ = forged.withUnsafeBytes { try? a.socket.send($0, to: b.socket.localAddress) }
        XCTAssertTrue(run(seconds: 0.5) { b.statistics.srtpRefused > refused }, "\(b.statistics)")
        XCTAssertEqual(b.statistics.rtcpReceived, received)
        XCTAssertEqual(b.statistics.rtcpIgnored, 0)
        a.close()
        b.close()
    }
}
