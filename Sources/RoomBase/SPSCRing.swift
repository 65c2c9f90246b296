import Synchronization

/// A lock-free ring buffer for exactly one producer thread and one consumer thread.
///
/// The audio thread must never block or allocate, so it talks to the rest of the daemon
/// through rings like this one: it only ever waits for nothing and touches memory that was
/// allocated when the ring was created.
///
/// Why `@unchecked Sendable`: the storage is a raw pointer the compiler cannot reason
/// about. Soundness rests on a contract the type cannot enforce:
/// - only one thread at a time calls `push`/`write` (the producer), and
/// - only one thread at a time calls `pop`/`read` (the consumer).
/// The producer owns `tail`, the consumer owns `head`; each publishes its index with a
/// release store after touching the slots, and reads the other's index with an acquire
/// load before touching them, so a slot is never read before its write is visible and never
/// overwritten before its read has finished. Two producers (or two consumers) would race.
///
/// `Element` is `BitwiseCopyable`, so slots need no initialisation or destruction and a
/// push or pop is a plain memory copy — no retain/release on the audio thread.
public final class SPSCRing<Element: BitwiseCopyable>: @unchecked Sendable {
    /// Number of elements the ring holds; a power of two so indices wrap with a mask.
    public let capacity: Int
    @usableFromInline let mask: Int
    @usableFromInline let storage: UnsafeMutablePointer<Element>
    /// Count of elements ever consumed. Written only by the consumer.
    @usableFromInline let head = Atomic<Int>(0)
    /// Count of elements ever produced. Written only by the producer.
    @usableFromInline let tail = Atomic<Int>(0)

    /// Allocates the storage once. `minimumCapacity` is rounded up to a power of two
    /// (at least 2); read `capacity` for the real size.
    public init(capacity minimumCapacity: Int) {
        precondition(minimumCapacity > 0 && minimumCapacity <= 1 << 40, "SPSCRing capacity must be in 1...2^40")
        var c = 2
        while c < minimumCapacity { c <<= 1 }
        capacity = c
        mask = c - 1
        storage = .allocate(capacity: c)
    }

    deinit { storage.deallocate() }

    /// Elements the consumer can take now. Exact when called by the consumer; a snapshot
    /// (possibly already stale) from any other thread.
    @inlinable
    public var availableToRead: Int {
        tail.load(ordering: .acquiring) &- head.load(ordering: .acquiring)
    }

    /// Free slots the producer can fill now. Exact when called by the producer.
    @inlinable
    public var availableToWrite: Int { capacity &- availableToRead }

    /// Appends one element; returns false (and drops nothing already queued) when full.
    @inlinable
    public func push(_ element: Element) -> Bool {
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)
        if t &- h >= capacity { return false }
        (storage + (t & mask)).initialize(to: element)
        tail.store(t &+ 1, ordering: .releasing)
        return true
    }

    /// Removes the oldest element, or returns nil when empty.
    @inlinable
    public func pop() -> Element? {
        let h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        if t == h { return nil }
        let element = storage[h & mask]
        head.store(h &+ 1, ordering: .releasing)
        return element
    }

    /// Appends as many elements of `source` as fit, in order; returns how many.
    @inlinable
    public func write(from source: UnsafeBufferPointer<Element>) -> Int {
        guard let base = source.baseAddress else { return 0 }
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)
        let n = min(source.count, capacity &- (t &- h))
        if n <= 0 { return 0 }
        let start = t & mask
        let first = min(n, capacity &- start)
        (storage + start).initialize(from: base, count: first)
        if n > first { storage.initialize(from: base + first, count: n &- first) }
        tail.store(t &+ n, ordering: .releasing)
        return n
    }

    /// Moves up to `destination.count` of the oldest elements into `destination`, in order;
    /// returns how many.
    @inlinable
    public func read(into destination: UnsafeMutableBufferPointer<Element>) -> Int {
        guard let base = destination.baseAddress else { return 0 }
        let h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        let n = min(destination.count, t &- h)
        if n <= 0 { return 0 }
        let start = h & mask
        let first = min(n, capacity &- start)
        base.update(from: storage + start, count: first)
        if n > first { (base + first).update(from: storage, count: n &- first) }
        head.store(h &+ n, ordering: .releasing)
        return n
    }
}
