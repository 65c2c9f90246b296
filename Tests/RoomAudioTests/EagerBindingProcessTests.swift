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
    /// Re-executed through `/proc/self/exe` the kernel would name the process `exe`, and
    /// `ps -C roomd`, `pidof roomd`, `top` and the journal's `_COMM` would lose it. Seen on a
    /// running roomd once it has re-executed (`LD_BIND_NOW=1` in its environment): its name is
    /// still `roomd` and its command line is the one it was given.
    func testTheReexecutedRoomdKeepsItsNameAndArguments() throws {
        let dir = SimCard.scratch("eager-binding-name")
        SimCard.useRoom(dir, [:])
        let args = ["--board", SimCard.repoRoot + "/board/sim", "--loopback", "--duration", "10", "--stats-interval", "0",
                    "--control-socket", "none", "--state-dir", "none", "--config", "none"]
        let exe = try executable("roomd")
        let p = try launch(exe, args, env: ["ROOMSIM_CONFIG": dir + "/room.conf"], log: dir + "/roomd.log")
        let proc = "/proc/\(p.processIdentifier)"
        let deadline = Date().addingTimeInterval(5)
        var environ = ""
        while Date() < deadline, p.isRunning {
            environ = (try? String(contentsOfFile: proc + "/environ", encoding: .utf8)) ?? ""
            if environ.split(separator: "\0").contains("LD_BIND_NOW=1") { break }
            usleep(20_000)
        }
        XCTAssertTrue(environ.split(separator: "\0").contains("LD_BIND_NOW=1"), "roomd did not re-execute within 5 s")
        let comm = try String(contentsOfFile: proc + "/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(comm, "roomd", "the process's name after the re-exec")
        let cmdline = try String(contentsOfFile: proc + "/cmdline", encoding: .utf8).split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(Array(cmdline.dropFirst().prefix(args.count)), args, "the arguments after the re-exec")
        p.terminate()
        p.waitUntilExit()
    }
}
