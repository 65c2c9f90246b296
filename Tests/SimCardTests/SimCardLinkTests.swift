// The plugin is C and must load without the Swift runtime: alsa-lib loads it into roomd (which
// carries its own, static runtime) and into aplay/arecord. SwiftPM links library products with
// swiftc, which adds swiftrt.o and libswiftCore.so; Package.swift leaves both out
// (-nostartfiles, -static-stdlib). That only works while the plugin has no Swift code.
import Glibc
import XCTest

final class SimCardLinkTests: XCTestCase {
    private func output(_ command: String) throws -> String {
        guard let pipe = popen(command + " 2>&1", "r") else { throw XCTSkip("popen failed: \(command)") }
        var text = ""
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), pipe) != nil {
            text += String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        XCTAssertEqual(pclose(pipe), 0, "\(command) failed: \(text)")
        return text
    }

    private var plugin: String { "\(SimCard.buildDir)/\(SimCard.pluginName)" }

    func testPluginNeedsNoSwiftRuntime() throws {
        try SimCard.setUp()
        let dynamic = try output("readelf -dW '\(plugin)'")
        XCTAssertTrue(dynamic.contains("libasound.so"), dynamic)
        XCTAssertFalse(dynamic.contains("libswift"), "the plugin must not pull the Swift runtime into roomd:\n\(dynamic)")
        XCTAssertFalse(dynamic.contains("/opt/swift") || dynamic.contains("usr/lib/swift"), "no RUNPATH into the toolchain:\n\(dynamic)")
    }

    func testPluginHasNoSwiftCode() throws {
        try SimCard.setUp()
        let sections = try output("readelf -SW '\(plugin)'")
        XCTAssertFalse(sections.contains("swift5_"), """
            the plugin has Swift metadata, but it is linked without swiftrt.o (Package.swift, \
            RoomSimCard): keep it C, or link it with the runtime again
            """)
        let undefined = try output("nm -D --undefined-only '\(plugin)'")
        XCTAssertFalse(undefined.contains("swift_"), undefined)
    }
}
