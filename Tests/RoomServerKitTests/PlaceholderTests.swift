import XCTest
final class RoomServerKitPlaceholderTests: XCTestCase { func testModuleBuilds() { XCTAssertTrue(true) } }
