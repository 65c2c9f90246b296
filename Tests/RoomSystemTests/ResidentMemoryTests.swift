import Glibc
import RoomSystem
import XCTest

/// ResidentMemory.releaseReadOnlyFilePages must unmap clean read-only file pages (they come back
/// from the file on the next touch) and must never touch a mapping holding copy-on-write pages:
/// those would silently fall back to the file's bytes.
final class ResidentMemoryTests: XCTestCase {
    private let pages = 64
    private let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// A file of `pages` pages, page i filled with the byte i + 1.
    private func makeFile() throws -> (path: String, fd: Int32) {
        var template = Array("/tmp/roomsystem-resident-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else { throw XCTSkip("mkstemp failed") }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        for i in 0..<pages {
            let page = [UInt8](repeating: UInt8(i + 1), count: pageSize)
            XCTAssertEqual(page.withUnsafeBytes { write(fd, $0.baseAddress, pageSize) }, pageSize)
        }
        return (path, fd)
    }

    /// Rss of the mapping starting at `address`, KiB, from /proc/self/smaps.
    private func residentKiB(of address: UnsafeRawPointer) throws -> Int {
        let start = String(UInt(bitPattern: address), radix: 16)
        let text = try Files.readText("/proc/self/smaps")
        var inMapping = false
        for line in text.split(separator: "\n") {
            if let first = line.split(separator: " ").first, first.contains("-"), !first.hasSuffix(":") {
                inMapping = first.hasPrefix(start + "-")
            } else if inMapping, line.hasPrefix("Rss:") {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
            }
        }
        XCTFail("mapping at \(start) not in /proc/self/smaps")
        return -1
    }

    func testReadOnlyFilePagesAreUnmappedAndReadBackUnchanged() throws {
        let (path, fd) = try makeFile()
        defer { close(fd); unlink(path) }
        let length = pages * pageSize
        let map = try XCTUnwrap(mmap(nil, length, PROT_READ, MAP_PRIVATE, fd, 0))
        XCTAssertNotEqual(map, MAP_FAILED)
        defer { munmap(map, length) }
        let bytes = map.assumingMemoryBound(to: UInt8.self)
        var sum = 0
        for i in 0..<pages { sum += Int(bytes[i * pageSize]) }
        XCTAssertEqual(sum, pages * (pages + 1) / 2)
        XCTAssertEqual(try residentKiB(of: map), length / 1024)

        XCTAssertGreaterThanOrEqual(ResidentMemory.releaseReadOnlyFilePages(), length / 1024)
        XCTAssertEqual(try residentKiB(of: map), 0, "a clean read-only file mapping is unmapped")
        for i in 0..<pages { XCTAssertEqual(bytes[i * pageSize + 7], UInt8(i + 1), "page \(i) reads back from the file") }
    }

    func testMappingWithCopyOnWritePagesIsLeftAlone() throws {
        let (path, fd) = try makeFile()
        defer { close(fd); unlink(path) }
        let length = pages * pageSize
        // Written privately, then made read-only: what RELRO looks like after relocation.
        let map = try XCTUnwrap(mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        XCTAssertNotEqual(map, MAP_FAILED)
        defer { munmap(map, length) }
        let bytes = map.assumingMemoryBound(to: UInt8.self)
        bytes[3 * pageSize] = 0xAB
        for i in 0..<pages { _ = bytes[i * pageSize + 1] }
        XCTAssertEqual(mprotect(map, length, PROT_READ), 0)
        let before = try residentKiB(of: map)

        ResidentMemory.releaseReadOnlyFilePages()
        XCTAssertEqual(try residentKiB(of: map), before, "a mapping with a copy-on-write page is not touched")
        XCTAssertEqual(bytes[3 * pageSize], 0xAB, "the private write survives")
        XCTAssertEqual(bytes[5 * pageSize], 6)
    }

    func testBreakdownAndPeak() {
        let resident = ResidentMemory.breakdown()
        XCTAssertGreaterThan(resident.file, 0)
        XCTAssertGreaterThan(resident.anonymous, 0)
        // The current figure first: the peak read after it cannot be lower (read the other way
        // round, the test process grew between the two reads and the check failed).
        let current = ProcessStats.residentMegabytes()
        XCTAssertGreaterThanOrEqual(ResidentMemory.peakMegabytes(), current - 0.01)
    }
}
