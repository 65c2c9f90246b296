/// The jitter buffer's received packets waiting to play, kept by sequence number (slot =
/// sequence modulo the capacity), with their payloads and the copy of the one handed out.
///
/// All storage is allocated at init and freed with the store; nothing here allocates
/// afterwards. Non-copyable: it owns that storage, and a copy would share it.
struct JitterSlotStore: ~Copyable {
    struct Slot {
        var sequence: Int64     // unwrapped sequence number; `empty` when free
        var relative: Int64     // unwrapped timestamp - first timestamp
        var duration: Int64
        var told: Bool          // duration given by the caller (else inferred)
        var timestamp: UInt32
        var length: Int
        static let empty = Int64.min
    }

    /// Number of packet slots.
    let capacity: Int
    private let maxPayload: Int
    private let slots: UnsafeMutablePointer<Slot>
    private let payloads: UnsafeMutableRawPointer
    private let output: UnsafeMutableRawPointer          // copy of the packet handed out
    /// Packets waiting.
    private(set) var count = 0

    init(capacity: Int, maxPayloadBytes: Int) {
        self.capacity = capacity
        maxPayload = maxPayloadBytes
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(sequence: Slot.empty, relative: 0, duration: 0, told: false, timestamp: 0, length: 0),
                         count: capacity)
        payloads = .allocate(byteCount: capacity * maxPayloadBytes, alignment: 16)
        output = .allocate(byteCount: maxPayloadBytes, alignment: 16)
    }

    deinit {
        slots.deallocate()
        payloads.deallocate()
        output.deallocate()
    }

    subscript(index: Int) -> Slot { slots[index] }

    func index(of sequence: Int64) -> Int {
        let c = Int64(capacity)
        let r = sequence % c
        return Int(r < 0 ? r + c : r)
    }

    func isFree(_ index: Int) -> Bool { slots[index].sequence == Slot.empty }

    /// Stores a packet in the (free) slot `index`, copying its payload.
    mutating func put(_ slot: Slot, at index: Int, payload: UnsafeRawBufferPointer) {
        if payload.count > 0, let src = payload.baseAddress {
            (payloads + index * maxPayload).copyMemory(from: src, byteCount: payload.count)
        }
        slots[index] = slot
        count += 1
    }

    mutating func setDuration(_ duration: Int64, at index: Int) {
        slots[index].duration = duration
    }

    mutating func free(_ index: Int) {
        slots[index].sequence = Slot.empty
        count -= 1
    }

    mutating func removeAll() {
        for i in 0 ..< capacity { slots[i].sequence = Slot.empty }
        count = 0
    }

    /// Slot of the buffered packet with the lowest sequence number.
    func lowest() -> Int? {
        var best: Int?
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
            if best == nil || slots[i].sequence < slots[best!].sequence { best = i }
        }
        return best
    }

    /// Slot of the next packet to play: the lowest sequence number after `lastPlayed`, up to
    /// `highest`.
    func next(after lastPlayed: Int64, highest: Int64) -> Int? {
        guard count > 0, lastPlayed < highest else { return nil }
        var s = lastPlayed + 1
        let last = min(highest, lastPlayed + Int64(capacity))
        while s <= last {
            let i = index(of: s)
            if slots[i].sequence == s { return i }
            s += 1
        }
        return nil
    }

    /// A packet whose duration the caller did not give lasts what the stream's timestamp steps
    /// say (`inferred`: the smallest of the last few), or up to the next packet's timestamp if
    /// sooner.
    func inferredLength(of index: Int, inferred: Int64, granule: Int64) -> Int64 {
        var d = inferred
        let following = self.index(of: slots[index].sequence + 1)
        if slots[following].sequence == slots[index].sequence + 1 {
            let step = slots[following].relative - slots[index].relative
            if step >= granule { d = min(d, step) }
        }
        return d
    }

    /// Copies a slot's payload to the output buffer, so what the caller holds stays valid
    /// whatever is inserted before the next `nextFrame`.
    mutating func packet(at index: Int) -> JitterBuffer.Packet {
        let slot = slots[index]
        if slot.length > 0 { output.copyMemory(from: payloads + index * maxPayload, byteCount: slot.length) }
        return JitterBuffer.Packet(
            sequenceNumber: UInt16(truncatingIfNeeded: slot.sequence),
            timestamp: slot.timestamp,
            durationSamples: Int(slot.duration),
            payload: UnsafeRawBufferPointer(start: output, count: slot.length))
    }

    /// How far apart, in sequence numbers and in timestamps, the buffered packets and one with
    /// `sequence` and `relative` would be.
    func spread(with sequence: Int64, relative: Int64) -> (sequences: Int64, time: Int64) {
        var lowSeq = sequence, highSeq = sequence, lowRel = relative, highRel = relative
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
            lowSeq = min(lowSeq, slots[i].sequence)
            highSeq = max(highSeq, slots[i].sequence)
            lowRel = min(lowRel, slots[i].relative)
            highRel = max(highRel, slots[i].relative)
        }
        return (highSeq - lowSeq, highRel - lowRel)
    }

    /// Frees the packets that end at or before `landing`; returns how many, and the highest
    /// sequence number among them (`Int64.min` when none).
    mutating func dropEnding(by landing: Int64) -> (dropped: Int, highestSequence: Int64) {
        var dropped = 0
        var highest = Int64.min
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty {
            let s = slots[i]
            if s.relative + s.duration <= landing {
                highest = max(highest, s.sequence)
                free(i)
                dropped += 1
            }
        }
        return (dropped, highest)
    }

    /// `landing`, or the start of the earliest packet buffered if that is sooner.
    func earliestStart(before landing: Int64) -> Int64 {
        var landing = landing
        for i in 0 ..< capacity where slots[i].sequence != Slot.empty && slots[i].relative < landing {
            landing = slots[i].relative
        }
        return landing
    }
}
