import RoomCallMedia
import RoomBase
import RoomMedia
import RoomSystem
import XCTest

/// Issue 29's bad input on a call's media: datagrams from the far end's own address (the one
/// address listened to) that are not what the agreement says. Each is counted under its kind and
/// nothing reaches the engine or the digit handler; a good packet after them still does.
final class HostileRTPTests: XCTestCase {
    func rtp(pt: UInt8, seq: UInt16 = 1, timestamp: UInt32 = 1000, payload: [UInt8], first: UInt8 = 0x80) -> [UInt8] {
        [first, pt, UInt8(seq >> 8), UInt8(seq & 0xFF),
         UInt8(timestamp >> 24), UInt8(timestamp >> 16 & 0xFF), UInt8(timestamp >> 8 & 0xFF), UInt8(timestamp & 0xFF),
         0x12, 0x34, 0x56, 0x78] + payload
    }

    func testHostileDatagramsFromTheFarEndAreCountedAndGoNowhere() throws {
        let loop = try EventLoop()
        let far = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        let mine = try UDPSocket(bindingTo: try SocketAddress(ip: "127.0.0.1", port: 0))
        let incoming = SPSCRing<MediaPacket>(capacity: 64)
        let session = try CallMediaSession(loop: loop, socket: mine, incoming: incoming, parameters: CallMediaParameters(
            remote: far.localAddress, codec: .pcmu, payloadType: 0, telephoneEventPayloadType: 101))
        defer { session.close() }
        var digits = ""
        session.onDigit = { digits.append($0) }
        let to = try SocketAddress(ip: "127.0.0.1", port: session.localPort)
        let hostile: [(datagram: [UInt8], kind: String)] = [
            (rtp(pt: 101, payload: [5, 0x0A]), "malformed"),                       // an event shorter than its 4 bytes
            (rtp(pt: 101, payload: [16, 0x0A, 0, 160]), "malformed"),              // flash, not a DTMF digit
            (rtp(pt: 101, payload: [255, 0xFF, 0xFF, 0xFF]), "malformed"),
            (rtp(pt: 0, payload: [1, 2, 3, 4], first: 0x8F), "malformed"),         // 15 CSRCs announced, 1 present
            (rtp(pt: 0, payload: [1, 2, 3, 200], first: 0xA0), "malformed"),       // padding longer than the packet
            (rtp(pt: 0, payload: [0xBE, 0xDE, 0x7F, 0xFF], first: 0x90), "malformed"), // an extension of 32767 words
            (rtp(pt: 0, payload: [UInt8](repeating: 0xFF, count: MediaPacket.maxPayload + 1)), "malformed"),
            (rtp(pt: 0, payload: [1, 2], first: 0x40), "foreign"),                 // RTP version 1
            (Array(repeating: 0x80, count: 11), "foreign"),                          // shorter than a header
            (rtp(pt: 0, payload: [UInt8](repeating: 0, count: 3_000)), "foreign"),  // past the 2 KiB buffer
            (rtp(pt: 96, payload: [1, 2, 3]), "unknown"),
        ]
        for h in hostile { XCTAssertTrue(try far.send(h.datagram, to: to)) }
        func settle(until done: () -> Bool) throws {
            let end = monotonicNanoseconds() + 2_000_000_000
            while monotonicNanoseconds() < end && !done() { _ = try loop.runOnce(timeout: .milliseconds(10)) }
        }
        // Every datagram counted once somewhere (the 3,000-byte one as foreign: truncated).
        try settle { session.statistics.malformed + session.statistics.foreign + session.statistics.unknownPayloadType == hostile.count }
        let s = session.statistics
        XCTAssertEqual(s.malformed, hostile.filter { $0.kind == "malformed" }.count, "\(s)")
        XCTAssertEqual(s.foreign, hostile.filter { $0.kind == "foreign" }.count, "\(s)")
        XCTAssertEqual(s.unknownPayloadType, 1)
        XCTAssertEqual(s.packetsReceived, 0)
        XCTAssertEqual(digits, "")
        XCTAssertNil(incoming.pop())

        // What a well-behaved far end sends still works: a digit (its end packet three times) and audio.
        for _ in 0 ..< 3 { _ = try far.send(rtp(pt: 101, seq: 2, timestamp: 2000, payload: [5, 0x8A, 0, 160]), to: to) }
        _ = try far.send(rtp(pt: 0, seq: 3, timestamp: 2160, payload: [UInt8](repeating: 0xFF, count: 160)), to: to)
        try settle { session.statistics.packetsReceived == 1 }
        XCTAssertEqual(digits, "5")
        XCTAssertEqual(session.statistics.packetsReceived, 1)
        XCTAssertEqual(incoming.pop()?.length, 160)
    }
}
