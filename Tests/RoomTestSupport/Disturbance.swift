/// The suite's one policy for a real-time run that the machine, not the code under test,
/// disturbed: an xrun, a stalled test process, a self-test that answered `device_error` ("run it
/// again"). Such a run is made again, at most `extraRuns` times more, as a person or the HIL rig
/// would, and the test judges the last run — so a defect, which shows in every run, still fails,
/// while a busy 2-core machine (another job keeping one core busy) does not fail the suite.
public enum Disturbance {
    /// Runs after the first, at most.
    public static let extraRuns = 2

    /// `run()`, and again while `disturbed` says the machine spoilt the last one (at most
    /// `extraRuns` more times). `label` names the test in the log line each rerun prints.
    public static func rerun<Run>(_ label: String, disturbed: (Run) -> Bool, _ run: () throws -> Run) rethrows -> Run {
        var result = try run()
        for _ in 0..<extraRuns where disturbed(result) {
            print("\(label): the machine disturbed the run: running it again")
            result = try run()
        }
        return result
    }
}
