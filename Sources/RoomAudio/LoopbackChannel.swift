/// Stands in for the network until rooms exist: encoded frames go in, come out a fixed number
/// of frames later, optionally with deterministic pseudo-random loss. Holding frames back lets
/// the receiver see the packet after a lost one and rebuild the loss from its FEC data — the
/// same decision the jitter buffer makes. All storage is allocated up front.
final class LoopbackChannel {
    enum Slot: Equatable { case packet(length: Int), lost, silent }

    static let maxPacket = 1276
    private let depth: Int
    private let bytes: UnsafeMutablePointer<UInt8>
    private let slots: UnsafeMutablePointer<Slot>
    private var head = 0          // index of the oldest slot
    private var count = 0
    private let lossPercent: Int
    private var random: UInt64 = 0x9E37_79B9_7F4A_7C15

    init(delayFrames: Int, lossPercent: Int) {
        depth = delayFrames + 2
        self.lossPercent = lossPercent
        bytes = .allocate(capacity: depth * Self.maxPacket)
        slots = .allocate(capacity: depth)
        slots.initialize(repeating: .silent, count: depth)
        self.delayFrames = delayFrames
    }

    let delayFrames: Int

    deinit {
        bytes.deallocate()
        slots.deallocate()
    }

    /// Buffer the caller encodes straight into, avoiding a copy; commit with `commit`.
    var nextPacketBuffer: UnsafeMutablePointer<UInt8> { bytes + ((head + count) % depth) * Self.maxPacket }

    /// Queues what the sender produced for this frame: a packet of `length` bytes already in
    /// `nextPacketBuffer`, or nothing (length 0: the gate or DTX held it back). Returns false
    /// when the simulated network dropped it.
    @discardableResult
    func commit(length: Int) -> Bool {
        let index = (head + count) % depth
        var delivered = true
        if length <= 0 {
            slots[index] = .silent
        } else if lossPercent > 0 && nextRandomPercent() < lossPercent {
            slots[index] = .lost
            delivered = false
        } else {
            slots[index] = .packet(length: length)
        }
        count += 1
        return delivered
    }

    /// True when the oldest frame has waited `delayFrames` frames and should be played.
    var hasDueFrame: Bool { count > delayFrames }

    /// The oldest frame and, for FEC, the one after it.
    func due() -> (slot: Slot, data: UnsafePointer<UInt8>, next: Slot, nextData: UnsafePointer<UInt8>) {
        let nextIndex = (head + 1) % depth
        return (slots[head], UnsafePointer(bytes + head * Self.maxPacket),
                count > 1 ? slots[nextIndex] : .silent, UnsafePointer(bytes + nextIndex * Self.maxPacket))
    }

    func popDue() {
        head = (head + 1) % depth
        count -= 1
    }

    private func nextRandomPercent() -> Int {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return Int(random % 100)
    }
}
