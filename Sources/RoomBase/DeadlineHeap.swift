/// A binary min-heap of items by deadline; among equal deadlines, the lower sequence number
/// (the caller's order of arrival) comes first. Shared by the event loop's timers and
/// roomproxy's delay queue, which both need "what is due next, in the order it was queued".
/// The caller supplies the sequence numbers: the event loop keeps them to recognise stale
/// entries of re-armed or cancelled timers.
///
/// Inlinable: used from other modules, the generic code ran unspecialized (metadata lookups and
/// witness calls on every comparison): 0.6 % of roomd's CPU samples in the engine bench (perf,
/// ~30 timers fired a second). Specialized for the caller's `Item` it is a few compares.
public struct DeadlineHeap<Item> {
    public struct Entry {
        public var deadline: UInt64
        public var seq: UInt64
        public var item: Item

        @inlinable
        public init(deadline: UInt64, seq: UInt64, item: Item) {
            self.deadline = deadline
            self.seq = seq
            self.item = item
        }

        @inlinable
        func fires(before o: Entry) -> Bool { deadline != o.deadline ? deadline < o.deadline : seq < o.seq }
    }

    @usableFromInline var entries: [Entry] = []

    @inlinable
    public init(capacity: Int = 0) { entries.reserveCapacity(capacity) }

    @inlinable
    public var count: Int { entries.count }
    @inlinable
    public var isEmpty: Bool { entries.isEmpty }
    /// The entry due first.
    @inlinable
    public var first: Entry? { entries.first }

    @inlinable
    public mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            if !entries[child].fires(before: entries[parent]) { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the entry due first.
    @inlinable @discardableResult
    public mutating func popFirst() -> Entry? {
        guard let top = entries.first else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            siftDown(0)
        }
        return top
    }

    /// Removes and returns the entry due first if it is due at `now`.
    @inlinable
    public mutating func popDue(now: UInt64) -> Entry? {
        guard let top = entries.first, top.deadline <= now else { return nil }
        return popFirst()
    }

    /// Replaces the contents (heapify in O(n)): the event loop drops cancelled timers this way.
    @inlinable
    public mutating func replaceAll(with newEntries: [Entry]) {
        entries = newEntries
        var i = entries.count / 2
        while i > 0 { i -= 1; siftDown(i) }
    }

    @inlinable
    mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            if left >= entries.count { return }
            var best = left
            if left + 1 < entries.count, entries[left + 1].fires(before: entries[left]) { best = left + 1 }
            if !entries[best].fires(before: entries[parent]) { return }
            entries.swapAt(best, parent)
            parent = best
        }
    }
}
