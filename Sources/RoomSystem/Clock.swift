import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the same clock the simulated sound card stamps its stream
/// starts with, so positions and log times can be compared to the sample.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// The calling thread's CPU clock as other threads can read it (`pthread_getcpuclockid`): a
/// clock id naming this thread, not `CLOCK_THREAD_CPUTIME_ID`, which means "whoever asks".
public func currentThreadCPUClock() -> clockid_t? {
    var clock = clockid_t()
    return pthread_getcpuclockid(pthread_self(), &clock) == 0 ? clock : nil
}

/// CPU time on a clock from `currentThreadCPUClock()`; nil once that thread has ended.
public func cpuNanoseconds(on clock: clockid_t) -> UInt64? {
    var ts = timespec()
    guard clock_gettime(clock, &ts) == 0 else { return nil }
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time consumed by the calling thread, for the engine's own CPU share.
@inline(__always)
public func threadCPUNanoseconds() -> UInt64 { cpuNanoseconds(on: CLOCK_THREAD_CPUTIME_ID) ?? 0 }

extension Duration {
    /// Whole nanoseconds for deadlines on `monotonicNanoseconds()`: 0 for zero or negative
    /// durations, and saturating (half of UInt64's range, so adding it to "now" cannot wrap)
    /// for absurdly long ones.
    public var monotonicNanosecondCount: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        if seconds >= Int64(UInt64.max / 1_000_000_000) - 1 { return UInt64.max / 2 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}

public func sleepMilliseconds(_ ms: Int) {
    var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
