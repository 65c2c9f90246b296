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
        XCTAssertThrowsError(try Files.read(tmp.path)) { XCTAssertTrue("\($0)".hasSuffix("is a directory"), "\($0)") }
        try Files.writeAtomically(tmp.path + "/big", [UInt8](repeating: 7, count: 70_000))
        XCTAssertEqual(try Files.read(tmp.path + "/big").count, 70_000, "more than one 64 KiB chunk")
        XCTAssertThrowsError(try Files.read(tmp.path + "/big", limit: 1000)) {
            XCTAssertTrue("\($0)".contains("larger than 1000 bytes"), "\($0)")
        }
        XCTAssertEqual(retryingEINTR { Int32(5) }, 5)
    }
}

/// `SystemFile` and the small file primitives the modules above RoomSystem use instead of Glibc.
final class SystemFileTests: XCTestCase {
    func testWritesReadsAtOffsetsAndClosesOnce() throws {
        let tmp = makeTemporaryDirectory("systemfile")
        defer { tmp.remove() }
        let path = tmp.path + "/take.wav.partial"
        let out = try SystemFile(path: path, access: .write, options: .createTruncating)
        try out.writeAll(Array("0123456789".utf8))
        try out.writeAll(Array("ab".utf8), at: 4)
        try out.sync()
        XCTAssertEqual(try out.size(), 10)
        out.close()
        out.close()
        XCTAssertFalse(out.isOpen)
        XCTAssertEqual(out.descriptor, -1)
        XCTAssertThrowsError(try out.writeAll([1])) {
            XCTAssertEqual(($0 as? SystemError)?.errno, .badDescriptor)
            XCTAssertTrue("\($0)".hasPrefix(path + ": "), "\($0)")
        }

        let input = try SystemFile(path: path, access: .read)
        var bytes = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(bytes.withUnsafeMutableBytes { input.read(into: $0, at: 3) }, 4)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), "3ab6")
        XCTAssertEqual(bytes.withUnsafeMutableBytes { input.read(into: $0, at: 10) }, 0)
        XCTAssertEqual(try Files.readText(path), "0123ab6789")
    }

    func testOpenErrorsNameTheLabelAndKeepErrno() {
        XCTAssertThrowsError(try SystemFile(path: "/nonexistent-roomd-dir/x", access: .read)) {
            XCTAssertEqual(($0 as? SystemError)?.errno, .noSuchFile)
            XCTAssertEqual("\($0)", "/nonexistent-roomd-dir/x: No such file or directory")
        }
        XCTAssertThrowsError(try SystemFile(path: "/dev/spidev-none.0", access: .write, label: "LED ring /dev/spidev-none.0")) {
            XCTAssertTrue("\($0)".hasPrefix("LED ring /dev/spidev-none.0: "), "\($0)")
        }
    }

    func testPipeIsNonBlocking() throws {
        let pipe = try SystemFile.pipe(label: "test pipe")
        var buffer = [UInt8](repeating: 0, count: 8)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { pipe.read.read(into: $0) }, -1)
        XCTAssertTrue(Errno.current.isWouldBlock)
        XCTAssertEqual(Array("press\n".utf8).withUnsafeBytes { pipe.write.write($0) }, 6)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { pipe.read.read(into: $0) }, 6)
        XCTAssertEqual(String(decoding: buffer.prefix(6), as: UTF8.self), "press\n")
    }

    func testDirectoriesFIFOsKindsAndGroups() throws {
        let tmp = makeTemporaryDirectory("kinds")
        defer { tmp.remove() }
        let dir = tmp.path + "/sim"
        try Files.makeDirectory(dir, mode: 0o755)
        try Files.makeDirectory(dir, mode: 0o755)   // existing: fine
        XCTAssertThrowsError(try Files.makeDirectory(tmp.path + "/missing/sim", mode: 0o755, label: "gpio sim directory")) {
            XCTAssertEqual(($0 as? SystemError)?.errno, .noSuchFile)
            XCTAssertTrue("\($0)".hasPrefix("gpio sim directory: "), "\($0)")
        }
        try Files.makeFIFO(dir + "/mute", mode: 0o600)
        try Files.changeMode(dir + "/mute", to: 0o660)
        XCTAssertEqual(Files.kind(of: dir), .directory)
        XCTAssertEqual(Files.kind(of: dir + "/mute"), .fifo)
        XCTAssertNil(Files.kind(of: dir + "/none"))
        try Files.writeAtomically(dir + "/leds", Array("mute=0\n".utf8))
        XCTAssertEqual(Files.kind(of: dir + "/leds"), .regular)
        try Files.remove(dir + "/leds")
        XCTAssertNil(Files.kind(of: dir + "/leds"))
        XCTAssertThrowsError(try Files.rename(dir + "/none", to: dir + "/other", label: dir + "/other")) {
            XCTAssertEqual("\($0)", dir + "/other: No such file or directory")
        }
        let group = try FileManager.default.attributesOfItem(atPath: dir)[.groupOwnerAccountID] as? NSNumber
        XCTAssertEqual(Files.owningGroup(of: dir).map(Int.init), group?.intValue)
        XCTAssertNil(Files.owningGroup(of: dir + "/none"))
        XCTAssertEqual(Groups.name(of: 0), "root")
        XCTAssertEqual(ProcessIdentity.effectiveUserID, geteuid())
        XCTAssertEqual(ProcessIdentity.groupID, getgid())
        XCTAssertNotNil(HostName.current)
    }
}
