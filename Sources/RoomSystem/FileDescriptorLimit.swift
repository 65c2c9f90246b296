import Glibc

/// The process's open-file limit (RLIMIT_NOFILE). A server holds one descriptor per client:
/// the soft limit a shell or systemd hands out (often 1024) is far below the hard one.
public enum FileDescriptorLimit {
    /// Raises the soft limit to the hard one where it is lower; returns what holds afterwards
    /// (the old soft limit if raising failed). Unlimited reads as Int.max.
    @discardableResult
    public static func raiseToHard() -> (soft: Int, hard: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (1024, 1024) }
        func value(_ v: rlim_t) -> Int { v > rlim_t(Int.max) ? Int.max : Int(v) }   // RLIM_INFINITY is all ones
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return (value(limit.rlim_cur), value(limit.rlim_max))
    }
}
