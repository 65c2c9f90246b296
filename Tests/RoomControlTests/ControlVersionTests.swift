import RoomControl
import XCTest
final class ControlVersionTests: XCTestCase { func testVersion() { XCTAssertEqual(controlAPIVersion, 1) } }
