import Glibc
import Synchronization

/// Reads the per-thread heap-allocation counter of libroomallocprobe.so when it is preloaded
/// (scripts/bench does that). Looked up once with dlsym; calling it allocates nothing.
public struct AllocationProbe: @unchecked Sendable {
    private typealias CountFunction = @convention(c) () -> UInt
    private let count: CountFunction?
    private let retainCount: CountFunction?

    public init() {
        // A nil handle is RTLD_DEFAULT: search every loaded object, preloads included.
        if let symbol = dlsym(nil, "roomallocprobe_thread_count") {
            count = unsafeBitCast(symbol, to: CountFunction.self)
        } else {
            count = nil
        }
        retainCount = dlsym(nil, "roomallocprobe_thread_retains").map { unsafeBitCast($0, to: CountFunction.self) }
    }

    public var isAvailable: Bool { count != nil }

    private static let sink = Atomic<Int>(0)

    /// Proves the probe counts: one malloc on this thread must move the counter by exactly one.
    /// A probe that silently counted nothing would make "0 allocations" meaningless.
    public func verify() -> Bool {
        guard count != nil else { return false }
        let before = threadAllocations()
        let p = malloc(64)
        // Publishing the pointer keeps the optimizer from deleting the malloc/free pair.
        Self.sink.store(Int(bitPattern: p), ordering: .relaxed)
        let after = threadAllocations()
        free(p)
        return after == before + 1
    }

    /// Allocations made so far by the calling thread, or 0 without the probe.
    @inline(__always)
    public func threadAllocations() -> UInt { count?() ?? 0 }

    /// Swift retains made so far by the calling thread, or 0 without the probe.
    @inline(__always)
    public func threadRetains() -> UInt { retainCount?() ?? 0 }

    /// Proves the retain counter counts: retaining an object must move it.
    public func verifyRetains() -> Bool {
        guard retainCount != nil else { return false }
        final class Box {}
        let box = Box()
        let before = threadRetains()
        let unmanaged = Unmanaged.passUnretained(box).retain()
        let after = threadRetains()
        unmanaged.release()
        return after > before
    }
}
