import RoomBase


/// The fate of one datagram. Every datagram draws the same five numbers whatever the
/// outcome, so the decisions for datagram n depend only on the seed and n.
struct Decision {
    var drop: Bool
    var delayNs: UInt64
    var duplicate: Bool
    var duplicateDelayNs: UInt64
    var reorder: Bool

    static func draw(_ rng: inout SplitMix64, _ im: Impairment) -> Decision {
        let uLoss = rng.unit(), uDelay = rng.unit(), uDup = rng.unit(), uDupDelay = rng.unit(), uReorder = rng.unit()
        func delay(_ u: Double) -> UInt64 {
            let ms = im.baseDelayMs + u * 2 * im.jitterMs
            return UInt64((ms * 1_000_000).rounded())
        }
        return Decision(drop: uLoss * 100 < im.lossPct, delayNs: delay(uDelay),
                        duplicate: uDup * 100 < im.duplicatePct, duplicateDelayNs: delay(uDupDelay),
                        reorder: uReorder * 100 < im.reorderPct)
    }
}

/// Datagrams waiting for their send time: a fixed pool of buffers (allocated once) and a
/// deadline heap (RoomBase's, shared with the event loop's timers) pointing into it. Equal
/// deadlines leave in the order they were queued.
struct DelayQueue {
    /// Where a queued datagram is and where it goes.
    struct Entry {
        var slot: Int32
        var length: Int32
        var flow: UInt32
        var direction: UInt8
    }

    let slotSize: Int
    let slotCount: Int
    private let storage: UnsafeMutableRawPointer
    private var free: [Int32]
    private var heap: DeadlineHeap<Entry>
    private var nextSeq: UInt64 = 0
    private(set) var peak = 0

    init(slotCount: Int, slotSize: Int) {
        self.slotCount = slotCount
        self.slotSize = slotSize
        storage = .allocate(byteCount: slotCount * slotSize, alignment: 16)
        free = (0..<Int32(slotCount)).reversed().map { $0 }
        heap = DeadlineHeap(capacity: slotCount)
    }

    func deallocate() { storage.deallocate() }

    var count: Int { heap.count }
    var earliest: UInt64? { heap.first?.deadline }

    /// A free buffer, or nil when the pool is exhausted.
    mutating func takeSlot() -> Int32? { free.popLast() }
    mutating func releaseSlot(_ slot: Int32) { free.append(slot) }

    func buffer(_ slot: Int32) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: storage + Int(slot) * slotSize, count: slotSize)
    }

    /// Copies `bytes` into a free slot; nil when the pool is exhausted or they do not fit.
    mutating func store(_ bytes: UnsafeRawBufferPointer) -> Int32? {
        guard bytes.count <= slotSize, let slot = takeSlot() else { return nil }
        buffer(slot).copyMemory(from: bytes)
        return slot
    }

    mutating func push(deadline: UInt64, slot: Int32, length: Int, flow: UInt32, direction: Direction) {
        let e = Entry(slot: slot, length: Int32(length), flow: flow, direction: UInt8(direction.rawValue))
        heap.push(.init(deadline: deadline, seq: nextSeq, item: e))
        nextSeq += 1
        peak = max(peak, heap.count)
    }

    /// Removes and returns the earliest entry if it is due at `now`, with its deadline. The
    /// caller sends it and releases its slot.
    mutating func popDue(now: UInt64) -> (entry: Entry, deadline: UInt64)? {
        heap.popDue(now: now).map { ($0.item, $0.deadline) }
    }
}
