import RoomMedia
import XCTest

final class MediaPacketRTPTests: XCTestCase {
    func testRoundTripKeepsEveryField() throws {
        var p = MediaPacket()
        p.ssrc = 0xDEAD_BEEF
        p.sequenceNumber = 65535
        p.timestamp = 0xFFFF_FF00
        p.audioLevel = 37
        p.voiceActivity = true
        let payload: [UInt8] = (0..<120).map { UInt8($0 * 7 & 0xFF) }
        XCTAssertTrue(payload.withUnsafeBytes { p.setPayload($0) })
        var datagram = [UInt8](repeating: 0, count: 1500)
        let n = try datagram.withUnsafeMutableBytes { try p.serializeRTP(into: $0) }
        XCTAssertEqual(datagram[0] >> 6, 2, "RTP version 2")
        let back = try datagram[0..<n].withUnsafeBytes { try MediaPacket(rtp: $0, arrivalSamples: 1234) }
        XCTAssertEqual(back.ssrc, p.ssrc)
        XCTAssertEqual(back.sequenceNumber, p.sequenceNumber)
        XCTAssertEqual(back.timestamp, p.timestamp)
        XCTAssertEqual(back.audioLevel, 37)
        XCTAssertTrue(back.voiceActivity)
        XCTAssertEqual(back.arrivalSamples, 1234)
        XCTAssertEqual(back.withPayload { Array($0) }, payload)
    }

    func testRefusesNonOpusAndOversizePayloads() throws {
        let other = RTPPacket(payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3)
        var datagram = [UInt8](repeating: 0, count: 1500)
        let small: [UInt8] = [1, 2, 3]
        let n = try datagram.withUnsafeMutableBytes { d in try small.withUnsafeBytes { try other.serialize(payload: $0, into: d) } }
        XCTAssertThrowsError(try datagram[0..<n].withUnsafeBytes { try MediaPacket(rtp: $0, arrivalSamples: 0) }) {
            XCTAssertEqual($0 as? MediaPacketError, .payloadType(96))
        }
        let opus = RTPPacket(sequenceNumber: 1, timestamp: 2, ssrc: 3)
        let big = [UInt8](repeating: 9, count: MediaPacket.maxPayload + 1)
        let m = try datagram.withUnsafeMutableBytes { d in try big.withUnsafeBytes { try opus.serialize(payload: $0, into: d) } }
        XCTAssertThrowsError(try datagram[0..<m].withUnsafeBytes { try MediaPacket(rtp: $0, arrivalSamples: 0) }) {
            XCTAssertEqual($0 as? MediaPacketError, .payloadTooLong(MediaPacket.maxPayload + 1))
        }
        XCTAssertThrowsError(try [UInt8(0x80)].withUnsafeBytes { try MediaPacket(rtp: $0, arrivalSamples: 0) })
    }
}
