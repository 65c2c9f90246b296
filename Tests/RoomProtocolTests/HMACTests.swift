@testable import RoomProtocol
import XCTest

final class HMACTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }

    // RFC 4231 §4.2, test case 1.
    func testRFC4231Case1() {
        let mac = HMACSHA256.mac(key: [UInt8](repeating: 0x0B, count: 20), message: Array("Hi There".utf8))
        XCTAssertEqual(hex(mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    }

    // RFC 4231 §4.7, test case 6: a 131-byte key, longer than the hash block, which the
    // one-shot libsodium API could not take.
    func testRFC4231Case6KeyLongerThanBlock() {
        let mac = HMACSHA256.mac(
            key: [UInt8](repeating: 0xAA, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        XCTAssertEqual(hex(mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    func testConstantTimeEquality() {
        XCTAssertTrue(HMACSHA256.equal([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(HMACSHA256.equal([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(HMACSHA256.equal([1, 2, 3], [1, 2]))
        XCTAssertTrue(HMACSHA256.equal([], []))
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
