import Foundation
import RoomTestSupport
import XCTest

/// The suite's rerun policy (RoomTestSupport/Disturbance.swift): how many runs it grants.
final class DisturbanceTests: XCTestCase {
    func testAnUndisturbedRunIsMadeOnce() {
        var runs = 0
        _ = Disturbance.rerun("undisturbed", disturbed: { (_: Int) in false }) { runs += 1; return runs }
        XCTAssertEqual(runs, 1)
    }

    func testADefectOnAMachineThatDoesNotStallGetsTwoMoreRunsOnly() {
        var runs = 0
        let last = Disturbance.rerun("always disturbed", disturbed: { (_: Int) in true }) { runs += 1; return runs }
        XCTAssertEqual(runs, 1 + Disturbance.extraRuns)
        XCTAssertEqual(last, runs, "the last run is the one judged")
    }

    /// The whole process stopped for 60 ms in every run (SIGSTOP, and a child that sends SIGCONT):
    /// what a spell of the VM's own stalls looks like to the witness thread.
    func testRunsInWhichTheMachineStalledAreMadeAgainUpToTheLimit() throws {
        var runs = 0
        _ = try Disturbance.rerun("machine stalls", disturbed: { (_: Int) in true }) { () throws -> Int in
            runs += 1
            let waker = Process()
            waker.executableURL = URL(fileURLWithPath: "/bin/sh")
            waker.arguments = ["-c", "sleep 0.06; kill -CONT \(getpid())"]
            try waker.run()
            kill(getpid(), SIGSTOP)
            waker.waitUntilExit()
            return runs
        }
        XCTAssertEqual(runs, Disturbance.runsWhileTheMachineStalls)
    }
}
