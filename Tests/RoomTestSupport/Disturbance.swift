import CLinux
import Foundation

/// The suite's one policy for a real-time run that the machine, not the code under test,
/// disturbed: an xrun, a stalled test process, a self-test that answered `device_error` ("run it
/// again"). Such a run is made again, at most `extraRuns` times more, as a person or the HIL rig
/// would, and the test judges the last run — so a defect, which shows in every run, still fails,
/// while a busy 2-core machine (another job keeping one core busy) does not fail the suite.
///
/// This VM also has spells of a minute or more in which every real-time run gets xruns (nothing
/// of ours running; a fresh-clone CI once had the clock-skew test disturbed three times in 14 s).
/// So a witness that does not depend on the code under test watches each run: a thread per CPU
/// that sleeps 1 ms at a time and notes how late it wakes. While the last disturbed run's witness saw
/// the machine stall for `machineStallMilliseconds` or more, the run is made again, up to
/// `runsWhileTheMachineStalls` runs in all. A defect that causes xruns on a machine that does not
/// stall still gets only `extraRuns` more.
public enum Disturbance {
    /// Runs after the first, at most, when nothing shows the machine stalled.
    public static let extraRuns = 2
    /// A sleeping thread woken this late (ms) means the machine stopped us: two 10 ms periods.
    public static let machineStallMilliseconds = 20.0
    /// Runs in all, at most, while the last disturbed run saw the machine stall.
    public static let runsWhileTheMachineStalls = 8

    /// `run()`, and again while `disturbed` says the machine spoilt the last one (see above).
    /// `label` names the test in the log line each rerun prints.
    public static func rerun<Run>(_ label: String, disturbed: (Run) -> Bool, _ run: () throws -> Run) rethrows -> Run {
        try rerun(label, disturbed: { result, _ in disturbed(result) }, run)
    }

    /// The same, for runs whose only witness of a disturbance is the machine's: `disturbed`
    /// also gets the longest stall the witness saw in this run (ms), so a timing bound missed
    /// while the machine stalled (`machineStallMilliseconds` or more) can count as disturbed, and
    /// the same miss on a machine that did not stall stays a failure.
    public static func rerun<Run>(_ label: String, disturbed: (Run, _ machineStallMs: Double) -> Bool,
                                  _ run: () throws -> Run) rethrows -> Run {
        var runs = 0
        while true {
            let witness = StallWitness()
            let result: Run
            do { result = try run() } catch { _ = witness.stop(); throw error }   // no witness left behind
            let stall = witness.stop()
            runs += 1
            guard disturbed(result, stall) else { return result }
            let machineStalled = stall >= machineStallMilliseconds
            let mayRunAgain = runs <= extraRuns || (machineStalled && runs < runsWhileTheMachineStalls)
            guard mayRunAgain else { return result }
            print("\(label): the machine disturbed the run (longest stall of a sleeping thread \(Int(stall)) ms): running it again")
        }
    }
}

/// Threads that sleep 1 ms at a time until stopped, one pinned to each CPU (a VM's vCPU can be
/// taken away while the other runs on: the audio thread on it stalls, a witness on the other
/// CPU would not notice), and return the longest any of them overslept (ms): how long the
/// machine kept a runnable thread of this process from running. Our own audio thread cannot
/// hide a defect behind this: a stall only buys more runs, and the last run is still judged.
final class StallWitness: @unchecked Sendable {
    private let lock = NSLock()
    private var running = true
    private var longest = 0.0
    private let done = DispatchSemaphore(value: 0)
    private let threads: Int

    init() {
        let cpus = max(1, min(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 64))
        threads = cpus
        for cpu in 0..<cpus {
            let thread = Thread { [self] in
                StallWitness.pin(to: cpu)
                var last = DispatchTime.now().uptimeNanoseconds
                while true {
                    usleep(1000)
                    let now = DispatchTime.now().uptimeNanoseconds
                    let late = Double(now - last) / 1e6 - 1
                    lock.lock()
                    longest = max(longest, late)
                    let keepGoing = running
                    lock.unlock()
                    last = now
                    if !keepGoing { break }
                }
                done.signal()
            }
            thread.start()
        }
    }

    /// Keeps the calling thread on `cpu` (a CPU that cannot be chosen leaves it where it is).
    private static func pin(to cpu: Int) {
        _ = clinux_pin_thread_to_cpu(Int32(cpu))
    }

    /// Stops the threads; the longest oversleep any of them saw, in ms.
    func stop() -> Double {
        lock.lock()
        running = false
        lock.unlock()
        for _ in 0..<threads { done.wait() }
        lock.lock()
        defer { lock.unlock() }
        return longest
    }
}
