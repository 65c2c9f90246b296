import FoundationEssentials
import RoomBase
import RoomProtocol
import XCTest

final class MediaKeyTests: XCTestCase {
    func testRandomKeysAreSixteenBytesAndDiffer() {
        let keys = (0 ..< 64).map { _ in MediaKey.random() }
        XCTAssertTrue(keys.allSatisfy { $0.bytes.count == 16 })
        XCTAssertEqual(Set(keys).count, keys.count)
        // 64 × 16 random bytes: every byte value zero would mean randombytes_buf never ran.
        XCTAssertTrue(keys.contains { $0.bytes.contains { $0 != 0 } })
    }

    func testBase64RoundTripAndLength() {
        let key = MediaKey.random()
        XCTAssertEqual(key.base64.count, 24)
        XCTAssertEqual(MediaKey(base64: key.base64), key)
        XCTAssertNil(MediaKey(base64: Base64.encode([UInt8](repeating: 1, count: 15))))
        XCTAssertNil(MediaKey(base64: Base64.encode([UInt8](repeating: 1, count: 17))))
        XCTAssertNil(MediaKey(bytes: []))
    }

    func testDescriptionDoesNotLeakTheKey() {
        let key = MediaKey(bytes: Array(1 ... 16))!
        XCTAssertFalse("\(key)".contains(key.base64))
        XCTAssertFalse(String(reflecting: key).contains("16"))
    }
}
