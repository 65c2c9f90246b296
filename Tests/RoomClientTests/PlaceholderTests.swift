import XCTest
final class RoomClientPlaceholderTests: XCTestCase { func testModuleBuilds() { XCTAssertTrue(true) } }
