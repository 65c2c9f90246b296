import Foundation
import RoomTestSupport
import XCTest

/// The software-in-loop rig (scripts/hil/run, docs/hil.md) on the simulated board: roomserver,
/// the device under test and a peer appliance as real processes, every scenario in
/// scripts/hil/scenarios/ driven through buttons, LEDs and roomctl. The rig is what a hardware
/// rig runs; here it runs against this build's products (`--bin`, so it builds nothing).
final class HILRigTests: ProcessTestCase {
    private var rig: String { SimCard.repoRoot + "/scripts/hil/run" }

    /// Runs the rig; its step lines go to the test log.
    private func runRig(_ extra: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        for name in ["roomd", "roomserver", "roomctl"] { _ = try executable(name) }
        let r = try runSeparated("/bin/bash", [rig, "--bin", SimCard.buildDirectory] + extra)
        print(r.stdout)
        if !r.stderr.isEmpty { print("rig stderr:\n" + r.stderr) }
        return r
    }

    func testEveryScenarioPassesOnTheSimulatedBoard() throws {
        let dir = SimCard.repoRoot + "/scripts/hil/scenarios"
        let scenarios = try FileManager.default.contentsOfDirectory(atPath: dir)
            .filter { $0.hasSuffix(".sh") }.map { String($0.dropLast(3)) }.sorted()
        XCTAssertGreaterThanOrEqual(scenarios.count, 4, "scenarios in \(dir): \(scenarios)")
        // A scenario whose self-test still answered device_error after the rig's own reruns (the
        // machine spoilt every recording: its FAIL line says so) is run again under the suite's
        // one policy; the others keep their PASS. The last run of each scenario is judged. Only
        // the FAIL lines are read: scenario 60 provokes a device_error on purpose in every run,
        // and a search of the whole output once let any failure be run again.
        var passed = Set<String>()
        func passes(_ name: String, in lines: [String]) -> Bool {
            lines.contains { $0.hasPrefix("PASS \(name) ") || $0 == "PASS \(name)" }
        }
        let r = try Disturbance.rerun("hil rig", disturbed: { r in
            r.status != 0 && r.stdout.split(separator: "\n").contains { $0.hasPrefix("FAIL ") && $0.contains("device_error") }
        }) { () throws -> (status: Int32, stdout: String, stderr: String) in
            let r = try runRig(scenarios.filter { !passed.contains($0) })
            let lines = r.stdout.split(separator: "\n").map(String.init)
            for name in scenarios where passes(name, in: lines) { passed.insert(name) }
            return r
        }
        XCTAssertEqual(r.status, 0, "scripts/hil/run failed:\n\(r.stdout)\n\(r.stderr)")
        for name in scenarios {
            XCTAssertTrue(passed.contains(name), "no PASS line for \(name)")
        }
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertFalse(lines.contains { $0.hasPrefix("FAIL ") }, "failed scenarios: \(lines.filter { $0.hasPrefix("FAIL ") })")
    }

    /// Negative controls: the rig's audio checks do fail when the condition does not hold, and a
    /// failing scenario makes the rig exit non-zero with `FAIL name: why`.
    func testTheRigReportsAFailingScenario() throws {
        let dir = SimCard.scratch("hil-negative")
        try """
        baseline
        expect_hears 1
        """.write(toFile: dir + "/hears-an-audience-member.sh", atomically: true, encoding: .utf8)
        try """
        baseline
        dut_do raise-hand
        peer_do approve "$(dut_id)"
        wait_for on-stage
        expect_silent 1 2
        """.write(toFile: dir + "/silent-while-on-stage.sh", atomically: true, encoding: .utf8)
        let r = try runRig([dir + "/hears-an-audience-member.sh", dir + "/silent-while-on-stage.sh"])
        XCTAssertEqual(r.status, 1, r.stdout)
        XCTAssertTrue(r.stdout.contains("FAIL hears-an-audience-member: the peer does not hear the dut"), r.stdout)
        // Either check of expect_silent may be the one that fails: the level never drops below
        // the line within the settle time, or it dips in a pause of the dut's talk and rises
        // again (or packets arrive) within the window — all three are the rig reporting sound.
        let silentFailures = ["the peer still hears something", "the peer hears something", "the peer received"]
        XCTAssertTrue(silentFailures.contains { r.stdout.contains("FAIL silent-while-on-stage: \($0)") }, r.stdout)
        XCTAssertFalse(r.stdout.contains("PASS "), r.stdout)
    }
}
