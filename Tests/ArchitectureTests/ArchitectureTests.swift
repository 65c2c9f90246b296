import Foundation
import XCTest

/// The layering cannot rot silently (issue 28): every `import` under Sources/ against
/// `AllowedImports`, and roomctl's link set against what it must not load.
final class ArchitectureTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The modules under Sources/ by name, with their folder: tools (roombench, roomload,
    /// roomproxy) live one level down, in Sources/Tools/.
    static func moduleFolders() throws -> [(name: String, folder: String)] {
        var found: [(String, String)] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: root + "/Sources").sorted() {
            if name == "Tools" {
                for tool in try FileManager.default.contentsOfDirectory(atPath: root + "/Sources/Tools").sorted() {
                    found.append((tool, "Tools/" + tool))
                }
            } else {
                found.append((name, name))
            }
        }
        return found
    }

    /// Every import of every Swift file of a module: (module imported, file:line).
    static func imports(inFolder module: String) throws -> [(name: String, at: String)] {
        let dir = root + "/Sources/" + module
        guard let files = FileManager.default.enumerator(atPath: dir) else { return [] }
        var found: [(String, String)] = []
        for case let file as String in files where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if let name = importedModule(line) { found.append((name, "Sources/\(module)/\(file):\(n + 1)")) }
            }
        }
        return found
    }

    /// The module an `import` line names (`@preconcurrency import X`, `public import X`,
    /// `import struct X.Y`, `@testable import X`), nil for any other line.
    static func importedModule(_ line: Substring) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
        while let w = words.first, w.hasPrefix("@") || ["public", "internal", "package", "private", "fileprivate"].contains(w) {
            words = words.dropFirst()
        }
        guard words.first == "import", words.count >= 2 else { return nil }
        words = words.dropFirst()
        if ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"].contains(words.first!), words.count >= 2 {
            words = words.dropFirst()
        }
        return words.first.map { String($0.split(separator: ".")[0]) }
    }

    func testEveryModuleImportsOnlyWhatItsLayerAllows() throws {
        let folders = try Self.moduleFolders()
        let modules = folders.map(\.name)
        for (module, folder) in folders {
            let found = try Self.imports(inFolder: folder)
            if AllowedImports.cTargets.contains(module) {
                XCTAssertTrue(found.isEmpty, "\(module) is a C target but imports \(found.map(\.name))")
                continue
            }
            guard let allowed = AllowedImports.modules[module] else {
                XCTFail("Sources/\(module) is in no layer: add it to Tests/ArchitectureTests/AllowedImports.swift and docs/architecture.md")
                continue
            }
            for (name, at) in found where !allowed.contains(name) {
                XCTFail("\(at): \(module) imports \(name), which its layer does not allow (Tests/ArchitectureTests/AllowedImports.swift, docs/architecture.md)")
            }
            let used = Set(found.map(\.name))
            for name in allowed.subtracting(used).sorted() {
                XCTFail("\(module) may import \(name) but no longer does: take it off AllowedImports so the list stays the true graph")
            }
        }
        for module in AllowedImports.modules.keys where !modules.contains(module) {
            XCTFail("AllowedImports lists \(module), which is not under Sources/")
        }
    }

    /// The parser itself: the import forms the sources use, and lines that only look like one.
    func testImportLinesAreRead() {
        XCTAssertEqual(Self.importedModule("import Glibc"), "Glibc")
        XCTAssertEqual(Self.importedModule("@preconcurrency import RoomCore"), "RoomCore")
        XCTAssertEqual(Self.importedModule("public import struct RoomCore.RoomKey"), "RoomCore")
        XCTAssertEqual(Self.importedModule("  @testable import RoomAudio"), "RoomAudio")
        XCTAssertNil(Self.importedModule("// import Glibc"))
        XCTAssertNil(Self.importedModule("let important = 1"))
    }

    /// roomctl must not load the audio stack (it did nothing to stop that but a comment).
    func testRoomctlLinksNoAudioLibrary() throws {
        let readelf = "/usr/bin/readelf"
        guard FileManager.default.isExecutableFile(atPath: readelf) else { throw XCTSkip("no readelf (binutils)") }
        let candidates = [".build/debug/roomctl", ".build/release/roomctl"].map { Self.root + "/" + $0 }
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("roomctl is not built (swift build builds it)")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: readelf)
        p.arguments = ["-d", binary]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let needed = out.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        XCTAssertFalse(needed.isEmpty, "readelf -d \(binary) listed no NEEDED entries: \(out)")
        for library in AllowedImports.roomctlMustNotLink {
            XCTAssertFalse(needed.contains { $0.contains(library) }, "roomctl links \(library): \(needed.joined(separator: "\n"))")
        }
    }
}
