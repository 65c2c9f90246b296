import RoomProtocol
import XCTest

final class ProtocolVersionTests: XCTestCase {
    func testVersionIsPositive() { XCTAssertGreaterThan(roomProtocolVersion, 0) }
}
