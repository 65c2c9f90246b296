@testable import RoomProtocol
import RoomCrypto
import XCTest

final class BindingDatagramTests: XCTestCase {
    let key = MediaKey(bytes: Array(100 ..< 116))!

    func testLayout() {
        let bytes = BindingDatagram(participantID: 0x0102_0304, timestampMs: 0x1122_3344_5566_7788).encoded(key: key)
        XCTAssertEqual(bytes.count, 32)
        XCTAssertEqual(Array(bytes[0 ..< 4]), Array("RMB1".utf8))
        XCTAssertEqual(Array(bytes[4 ..< 8]), [1, 2, 3, 4])
        XCTAssertEqual(Array(bytes[8 ..< 16]), [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])
        // The tag is HMAC-SHA256 over the first 16 bytes with the media key, truncated.
        let full = HMAC.sha256(key: key.bytes, message: Array(bytes[0 ..< 16]))
        XCTAssertEqual(Array(bytes[16 ..< 32]), Array(full.prefix(16)))
    }

    func testRoundTripAndServerReply() throws {
        let request = BindingDatagram(participantID: 42, timestampMs: 1_700_000_000_000)
        let bytes = request.encoded(key: key)
        XCTAssertEqual(try BindingDatagram.parse(bytes, key: key), request)
        let claimed = try bytes.withUnsafeBytes { try BindingDatagram.claimedParticipantID($0) }
        XCTAssertEqual(claimed, 42)

        let reply = BindingDatagram(participantID: BindingDatagram.serverParticipantID, timestampMs: request.timestampMs)
        XCTAssertEqual(try BindingDatagram.parse(reply.encoded(key: key), key: key).participantID, 0)
    }

    func testWritesIntoCallerBuffer() throws {
        var buffer = [UInt8](repeating: 0xEE, count: 40)
        let written = try buffer.withUnsafeMutableBytes {
            try BindingDatagram(participantID: 5, timestampMs: 6).write(into: $0, key: key)
        }
        XCTAssertEqual(written, 32)
        XCTAssertEqual(Array(buffer[32...]), [UInt8](repeating: 0xEE, count: 8), "nothing written past the datagram")
        XCTAssertEqual(try BindingDatagram.parse(Array(buffer.prefix(32)), key: key), BindingDatagram(participantID: 5, timestampMs: 6))

        var small = [UInt8](repeating: 0, count: 31)
        XCTAssertThrowsError(try small.withUnsafeMutableBytes { try BindingDatagram(participantID: 5, timestampMs: 6).write(into: $0, key: key) }) {
            XCTAssertEqual($0 as? BindingError, .bufferTooSmall(needed: 32, available: 31))
        }
    }

    func testAnyFlippedBitIsRejected() {
        let bytes = BindingDatagram(participantID: 42, timestampMs: 99).encoded(key: key)
        for index in 0 ..< bytes.count {
            for bit in 0 ..< 8 {
                var forged = bytes
                forged[index] ^= 1 << bit
                XCTAssertThrowsError(try BindingDatagram.parse(forged, key: key), "byte \(index) bit \(bit)") { error in
                    let expected: BindingError = index < 4 ? .badMagic : .badTag
                    XCTAssertEqual(error as? BindingError, expected)
                }
            }
        }
    }

    func testWrongKeyLengthAndMagic() {
        let bytes = BindingDatagram(participantID: 42, timestampMs: 99).encoded(key: key)
        XCTAssertThrowsError(try BindingDatagram.parse(bytes, key: MediaKey.random())) {
            XCTAssertEqual($0 as? BindingError, .badTag)
        }
        XCTAssertThrowsError(try BindingDatagram.parse(Array(bytes.prefix(31)), key: key)) {
            XCTAssertEqual($0 as? BindingError, .wrongLength(31))
        }
        XCTAssertThrowsError(try BindingDatagram.parse(bytes + [0], key: key)) {
            XCTAssertEqual($0 as? BindingError, .wrongLength(33))
        }
        XCTAssertThrowsError(try BindingDatagram.parse([], key: key)) {
            XCTAssertEqual($0 as? BindingError, .wrongLength(0))
        }
    }

    func testDistinguishableFromRTP() {
        let binding = BindingDatagram(participantID: 1, timestampMs: 1).encoded(key: key)
        XCTAssertTrue(binding.withUnsafeBytes { BindingDatagram.looksLikeBinding($0) })
        for first in UInt8(0x80) ... 0xBF {  // every RTP version-2 first byte
            XCTAssertFalse([first, 0, 0, 0].withUnsafeBytes { BindingDatagram.looksLikeBinding($0) })
        }
        XCTAssertFalse([UInt8]().withUnsafeBytes { BindingDatagram.looksLikeBinding($0) })
    }

    func testReplayGuardOnlyAcceptsNewerTimestamps() {
        var guardian = BindingReplayGuard()
        XCTAssertTrue(guardian.accept(1000, receiverNowMs: 50))
        XCTAssertFalse(guardian.accept(1000, receiverNowMs: 60), "exact replay")
        XCTAssertFalse(guardian.accept(999, receiverNowMs: 70), "older datagram")
        XCTAssertTrue(guardian.accept(6000, receiverNowMs: 5050))
        XCTAssertEqual(guardian.lastAccepted, 6000)
    }

    /// One forged datagram with a huge timestamp must not lock the sender out for the session:
    /// it is refused, and so is anything more than `maxLeadMs` ahead of the sender's clock as
    /// the receiver sees it run; a lead within the bound costs the real sender at most that.
    func testReplayGuardRefusesTimestampsFarAheadOfTheSendersClock() {
        var guardian = BindingReplayGuard()
        XCTAssertTrue(guardian.accept(1_000, receiverNowMs: 500_000))
        XCTAssertFalse(guardian.accept(UInt64.max, receiverNowMs: 500_100), "2^64-1 would lock the sender out")
        XCTAssertFalse(guardian.accept(1_000 + 60_000, receiverNowMs: 500_100), "a minute ahead after 0.1 s")
        XCTAssertTrue(guardian.accept(5_000, receiverNowMs: 504_000), "the genuine sender goes on")
        // The most a forger gains: the bound's lead, which the sender's clock passes in time.
        XCTAssertTrue(guardian.accept(5_000 + BindingReplayGuard.maxLeadMs, receiverNowMs: 504_001))
        XCTAssertFalse(guardian.accept(10_000, receiverNowMs: 509_000))
        XCTAssertTrue(guardian.accept(15_100, receiverNowMs: 515_100), "back once its clock passes the lead")
        // 30 minutes on, the clocks still agree: a timestamp at the sender's real time passes.
        XCTAssertTrue(guardian.accept(1_000 + 1_800_000, receiverNowMs: 500_000 + 1_800_000))
    }

    func testGarbageNeverTraps() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0 ..< 5000 {
            var bytes = (0 ..< Int.random(in: 0 ... 40, using: &generator)).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
            if bytes.count >= 4, Bool.random(using: &generator) { bytes.replaceSubrange(0 ..< 4, with: Array("RMB1".utf8)) }
            XCTAssertThrowsError(try BindingDatagram.parse(bytes, key: key))
        }
    }
}
