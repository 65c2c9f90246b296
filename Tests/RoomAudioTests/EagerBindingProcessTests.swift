import Foundation
import XCTest

/// roomd binds every library's imports at load (`EagerBinding`): it re-executes itself once
/// with `LD_BIND_NOW=1`. Seen from outside: the dynamic loader starts twice (with
/// `LD_DEBUG=statistics` it prints its start-up figures once per start), the second time with
/// `LD_BIND_NOW` in the environment; already set, or set empty to keep lazy binding, roomd
/// starts once. Either way the program's own behaviour is the same.
final class EagerBindingProcessTests: ProcessTestCase {
    private func version(_ bindNow: String?) throws -> (status: Int32, out: String, loaderStarts: Int) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try executable("roomd"))
        p.arguments = ["--version"]
        var environment = Self.environment(["LD_DEBUG": "statistics"])
        environment["LD_BIND_NOW"] = bindNow
        p.environment = environment
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self),
                e.components(separatedBy: "total startup time in dynamic loader").count - 1)
    }

    func testRoomdReexecutesOnceWithBindNow() throws {
        let lazy = try version(nil)
        XCTAssertEqual(lazy.status, 0)
        XCTAssertEqual(lazy.loaderStarts, 2, "roomd did not re-execute itself with LD_BIND_NOW")
        let bound = try version("1")
        XCTAssertEqual(bound.loaderStarts, 1, "roomd re-executed although LD_BIND_NOW was set")
        let keptLazy = try version("")
        XCTAssertEqual(keptLazy.loaderStarts, 1, "LD_BIND_NOW= (empty) must keep lazy binding without a re-exec")
        XCTAssertTrue(lazy.out.hasPrefix("roomd "), lazy.out)
        XCTAssertEqual(lazy.out, bound.out)
        XCTAssertEqual(lazy.out, keptLazy.out)
    }
}
