import Foundation
import RoomTestSupport
import RoomSystem
import XCTest

final class FilesTests: XCTestCase {
    func testAtomicWriteReplacesContentAndLeavesNoTemp() throws {
        let dir = TestScratch.directory("roomsystem-files")
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

/// Issue 10 (11): errors carry errno (callers tell EACCES from ENOENT without parsing text), and
/// an atomic write syncs the directory too (the rename is the directory's content).
final class SystemErrorTests: XCTestCase {
    func testErrorsCarryErrno() {
        XCTAssertThrowsError(try Files.read("/nonexistent-roomd-dir/file")) {
            XCTAssertEqual(($0 as? SystemError)?.errno, .noSuchFile)
        }
        XCTAssertThrowsError(try Files.writeAtomically("/proc/version/x", [1])) {
            XCTAssertEqual(($0 as? SystemError)?.errno?.rawValue, ENOTDIR)
        }
        XCTAssertNil(SystemError("plain text").errno)
        XCTAssertEqual("\(Errno.accessDenied)", "Permission denied")
        XCTAssertTrue(Errno(rawValue: EWOULDBLOCK).isWouldBlock)
    }

    func testDirectorySyncNamesTheDirectory() throws {
        let tmp = makeTemporaryDirectory("sync")
        defer { tmp.remove() }
        try Files.writeAtomically(tmp.path + "/settings.conf", Array("a = 1\n".utf8))
        XCTAssertEqual(try Files.readText(tmp.path + "/settings.conf"), "a = 1\n")
        XCTAssertNoThrow(try Files.syncDirectory(of: tmp.path + "/settings.conf"))
        XCTAssertNoThrow(try Files.syncDirectory(of: "relative-name"))   // the current directory
        XCTAssertThrowsError(try Files.syncDirectory(of: "/nonexistent-roomd-dir/x")) {
            XCTAssertEqual(($0 as? SystemError)?.errno, .noSuchFile)
            XCTAssertTrue("\($0)".contains("/nonexistent-roomd-dir"), "\($0)")
        }
        XCTAssertEqual(retryingEINTR { Int32(5) }, 5)
    }
}
