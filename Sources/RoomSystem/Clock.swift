import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the same clock the simulated sound card stamps its stream
/// starts with, so positions and log times can be compared to the sample.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// CPU time consumed by the calling thread, for the engine's own CPU share.
@inline(__always)
public func threadCPUNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

public func sleepMilliseconds(_ ms: Int) {
    var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
