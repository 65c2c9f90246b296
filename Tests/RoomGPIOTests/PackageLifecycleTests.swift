import Foundation
import Glibc
import XCTest

/// The Debian packages on this machine: scripts/packaging/lifecycle-test builds roomd and
/// roomserver .debs (scripts/package) from the release build, installs them with dpkg, checks
/// accounts, files, modes, conffiles, enablement, man pages and the maintainer scripts' requests
/// to systemd, upgrades to a rebuilt package with a higher version (conffile edit kept, restart
/// requested), removes (configuration kept), purges (configuration and data gone), and puts the
/// machine back as it was. docs/packaging.md, "The lifecycle test".
///
/// It needs root, a usable dpkg, the packaging tools, and the release programs in
/// .build/release (scripts/package builds them; the test does not run SwiftPM itself, which
/// `swift test` holds). Set ROOMD_SKIP_PACKAGE_TEST=1 to leave a machine's dpkg alone.
final class PackageLifecycleTests: XCTestCase {
    /// Repository root: this file is <root>/Tests/RoomGPIOTests/PackageLifecycleTests.swift.
    static let repo = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let script = repo + "/scripts/packaging/lifecycle-test"

    func testInstallUpgradeRemovePurge() throws {
        if ProcessInfo.processInfo.environment["ROOMD_SKIP_PACKAGE_TEST"] == "1" {
            throw XCTSkip("ROOMD_SKIP_PACKAGE_TEST=1")
        }
        guard getuid() == 0 else { throw XCTSkip("installs packages and creates system users: needs root") }
        let bin = Self.repo + "/.build/release"
        for name in ["roomd", "roomctl", "roomserver"] where !FileManager.default.isExecutableFile(atPath: bin + "/" + name) {
            throw XCTSkip("no release build in \(bin) (\(name) missing): run scripts/package once, which builds it")
        }

        let started = Date()
        let r = try run("/bin/bash", [Self.script, "--bin-dir", bin])
        let seconds = Date().timeIntervalSince(started)
        let lines = (r.stdout + r.stderr).split(separator: "\n").map(String.init)
        if r.status == 77 {
            throw XCTSkip(lines.first { $0.hasPrefix("SKIP: ") }.map { String($0.dropFirst(6)) } ?? "skipped by the script")
        }
        let failures = lines.filter { $0.hasPrefix("FAIL: ") }
        let passed = lines.filter { $0.hasPrefix("ok: ") }.count
        print("lifecycle-test: \(passed) checks passed, \(failures.count) failed, \(Int(seconds)) s")
        XCTAssertEqual(r.status, 0, "lifecycle-test exit status \(r.status):\n" + (failures.isEmpty ? lines.suffix(40) : failures[...]).joined(separator: "\n"))
        XCTAssertEqual(failures, [])
        // Every step must have happened (a script that stops early must not pass).
        for step in ["== install", "== edit the conffile", "== remove", "== purge", "== teardown", "ok: machine as found",
                     "lifecycle test: all checks passed"] {
            XCTAssertTrue(lines.contains { $0.hasPrefix(step) }, "no \"\(step)\" in the output")
        }
    }

    /// Runs a command to completion; stdout and stderr through files (no pipe can fill up).
    func run(_ exe: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let dir = NSTemporaryDirectory() + "roomd-lifecycle-xctest-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var environment = ProcessInfo.processInfo.environment
        // useradd/userdel, dpkg and friends live in sbin.
        environment["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + (environment["PATH"] ?? "")
        return try runCommand(exe, args, scratch: dir, environment: environment)
    }
}
