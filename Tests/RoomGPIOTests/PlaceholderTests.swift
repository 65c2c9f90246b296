import XCTest
final class RoomGPIOPlaceholderTests: XCTestCase { func testModuleBuilds() { XCTAssertTrue(true) } }
