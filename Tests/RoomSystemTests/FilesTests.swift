import Foundation
import RoomSystem
import XCTest

final class FilesTests: XCTestCase {
    func testAtomicWriteReplacesContentAndLeavesNoTemp() throws {
        let dir = NSTemporaryDirectory() + "roomsystem-files-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/state"
        try Files.writeAtomically(path, Array("one".utf8))
        try Files.writeAtomically(path, Array("two".utf8))
        XCTAssertEqual(try Files.readText(path), "two")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["state"])
    }

    func testReadingAMissingFileNamesIt() {
        XCTAssertThrowsError(try Files.read("/nonexistent/x")) { XCTAssertTrue("\($0)".contains("/nonexistent/x")) }
    }

    func testResolveAndDirectory() {
        XCTAssertEqual(Files.resolve("a.conf", relativeTo: "/etc/roomd"), "/etc/roomd/a.conf")
        XCTAssertEqual(Files.resolve("/abs", relativeTo: "/etc"), "/abs")
        XCTAssertEqual(Files.directory(of: "/etc/roomd/board.conf"), "/etc/roomd")
        XCTAssertEqual(Files.directory(of: "board.conf"), ".")
    }
}
