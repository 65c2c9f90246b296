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
