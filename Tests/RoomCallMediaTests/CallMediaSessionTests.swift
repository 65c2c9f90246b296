import RoomCallMedia
import RoomBase
import RoomMedia
import RoomMediaCrypto
import RoomSystem
import XCTest

/// Issue 29: a call's RTP, two sessions facing each other on loopback — the appliance and a far
/// end — through SDES-keyed SRTP.
final class CallMediaSessionTests: XCTestCase {
    private struct Pair {
        let loop: EventLoop
        let a: CallMediaSession, b: CallMediaSession
        let aIn: SPSCRing<MediaPacket>, bIn: SPSCRing<MediaPacket>
    }

    private func key(_ n: Int, _ seed: UInt8) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) } }

    private func pair(codec: AudioCodec = .pcmu, pt: UInt8 = 0, profile: SRTPProfile? = .aesCM128HMACSHA1_80,
                      bKeyFor a: [UInt8]? = nil) throws -> Pair {
        let loop = try EventLoop()
        let sa = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        let sb = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        let ka = profile.map { key($0.keyAndSaltLength, 1) }, kb = profile.map { key($0.keyAndSaltLength, 2) }
        let aIn = SPSCRing<MediaPacket>(capacity: 256), bIn = SPSCRing<MediaPacket>(capacity: 256)
        let pa = CallMediaParameters(remote: sb.localAddress, codec: codec, payloadType: pt, telephoneEventPayloadType: 101,
                                     srtp: profile.map { .init(profile: $0, local: ka!, remote: kb!) })
        let pb = CallMediaParameters(remote: sa.localAddress, codec: codec, payloadType: pt, telephoneEventPayloadType: 101,
                                     srtp: profile.map { .init(profile: $0, local: kb!, remote: a ?? ka!) })
        let a = try CallMediaSession(loop: loop, socket: sa, incoming: aIn, parameters: pa)
        let b = try CallMediaSession(loop: loop, socket: sb, incoming: bIn, parameters: pb)
        return Pair(loop: loop, a: a, b: b, aIn: aIn, bIn: bIn)
    }

    private func frames(_ count: Int, codec: AudioCodec, into ring: SPSCRing<MediaPacket>) {
        for i in 0..<count {
            var p = MediaPacket()
            p.codec = codec
            p.sequenceNumber = UInt16(i)
            p.timestamp = UInt32(i * codec.rtpClockRate / 50)
            let payload = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 160)
            _ = payload.withUnsafeBytes { p.setPayload($0) }
            XCTAssertTrue(ring.push(p))
        }
    }

    private func spin(_ loop: EventLoop, seconds: Double = 0.2, until done: () -> Bool = { false }) throws {
        let end = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while monotonicNanoseconds() < end && !done() { _ = try loop.runOnce(timeout: .milliseconds(10)) }
    }

    func testFramesCrossThroughSRTPWithTheirCodecAndMediaClock() throws {
        for profile in [SRTPProfile.aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32, .aeadAES128GCM] {
            let p = try pair(profile: profile)
            let out = SPSCRing<MediaPacket>(capacity: 64)
            frames(10, codec: .pcmu, into: out)
            p.a.drain(out)
            var got: [MediaPacket] = []
            try spin(p.loop) { while let m = p.bIn.pop() { got.append(m) }; return got.count == 10 }
            XCTAssertEqual(got.count, 10, "\(profile)")
            XCTAssertTrue(got.allSatisfy { $0.codec == .pcmu && $0.length == 160 })
            // 20 ms frames: 160 ticks of the 8 kHz RTP clock apart, 960 of the media clock.
            XCTAssertEqual(zip(got.dropFirst(), got).map { $0.timestamp &- $1.timestamp }, Array(repeating: 960, count: 9))
            XCTAssertEqual(zip(got.dropFirst(), got).map { $0.sequenceNumber &- $1.sequenceNumber }, Array(repeating: 1, count: 9))
            XCTAssertEqual(got[3].withPayload { Array($0) }, [UInt8](repeating: 3, count: 160))
            XCTAssertEqual(p.b.remoteSSRC, got[0].ssrc)
            XCTAssertEqual(p.a.statistics.packetsSent, 10)
            XCTAssertEqual(p.b.statistics.packetsReceived, 10)
            p.a.close(); p.b.close()
        }
    }

    func testAWrongKeyIsRefusedAndNothingPlays() throws {
        let p = try pair(bKeyFor: key(30, 9))
        let out = SPSCRing<MediaPacket>(capacity: 64)
        frames(5, codec: .pcmu, into: out)
        p.a.drain(out)
        try spin(p.loop) { p.b.statistics.srtpRefused == 5 }
        XCTAssertEqual(p.b.statistics.srtpRefused, 5)
        XCTAssertNil(p.bIn.pop())
    }

    func testHoldSendsNothingAndAnotherCodecsFrameIsNotSent() throws {
        let p = try pair()
        var held = p.a.parameters
        held.sends = false
        try p.a.update(held)
        let out = SPSCRing<MediaPacket>(capacity: 64)
        frames(3, codec: .pcmu, into: out)
        frames(2, codec: .opus, into: out)
        p.a.drain(out)
        held.sends = true
        try p.a.update(held)
        frames(2, codec: .opus, into: out)   // the engine still on the previous codec's frames
        p.a.drain(out)
        try spin(p.loop, seconds: 0.1)
        XCTAssertEqual(p.a.statistics.packetsSent, 0)
        XCTAssertEqual(p.a.statistics.framesHeld, 7)
        XCTAssertNil(p.bIn.pop())
    }

    /// Digits cross as RFC 4733 events, each reported once although its packets repeat; audio is
    /// held back while a digit plays; anything but DTMF digits is refused whole.
    func testDigitsCrossOnceEachAsTelephoneEvents() throws {
        let p = try pair()
        var digits = ""
        p.b.onDigit = { digits.append($0) }
        XCTAssertFalse(p.a.sendDigits("12x"))
        XCTAssertEqual(CallMediaSession.invalidDigit(in: "12x"), "x")
        XCTAssertFalse(p.a.sendDigits(""))
        XCTAssertTrue(p.a.sendDigits("1#9*a"))
        try spin(p.loop, seconds: 2) { digits.count == 5 }
        XCTAssertEqual(digits, "1#9*A")
        XCTAssertEqual(p.b.statistics.digitsReceived, 5)
        // Per digit: 5 tone packets and 3 end packets.
        try spin(p.loop, seconds: 0.1)
        XCTAssertEqual(p.a.statistics.eventPacketsSent, 5 * 8)
    }

    func testDatagramsFromElsewhereAreDroppedAndCounted() throws {
        let p = try pair()
        let stranger = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        _ = try stranger.send([0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 1, 2, 3], to: p.b.parameters.remote == p.a.parameters.remote ? p.a.parameters.remote : try SocketAddress(ip: "127.0.0.1", port: p.b.localPort))
        try spin(p.loop) { p.b.statistics.foreign == 1 }
        XCTAssertEqual(p.b.statistics.foreign, 1)
        XCTAssertNil(p.bIn.pop())
    }
}
