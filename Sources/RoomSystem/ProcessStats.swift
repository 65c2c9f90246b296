import Glibc

/// Resource use of this process, for the status line and the benches.
public enum ProcessStats {
    /// Resident set size in MiB, from /proc/self/statm (pages × page size).
    public static func residentMegabytes() -> Double {
        guard let text = try? Files.readText("/proc/self/statm") else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }

    /// User + system CPU time of the whole process (all threads), nanoseconds.
    public static func cpuNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}

/// Blocks SIGINT/SIGTERM/SIGHUP for the process and lets the main loop poll for them, so no
/// asynchronous signal handler (and no global mutable state) is needed.
public struct SignalWaiter: Sendable {
    public enum Received: Sendable { case interrupt, terminate, hangup }

    public init() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits up to `milliseconds` for a blocked signal.
    public func wait(milliseconds: Int) -> Received? {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        var timeout = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        let sig = sigtimedwait(&set, nil, &timeout)
        switch sig {
        case SIGINT: return .interrupt
        case SIGTERM: return .terminate
        case SIGHUP: return .hangup
        default: return nil
        }
    }
}
