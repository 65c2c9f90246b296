/// What the jitter buffer's sequence numbers say: the stream's numbering (sequence numbers
/// and timestamps unwrapped, relative to the first packet), which numbers arrived (a bitmap of
/// the last 1024 behind the highest, for duplicates), how many are missing (`lost`: expected
/// from first to highest, minus arrived in time or late; DTX skips no numbers, so it is not
/// loss), and whether a loss is recent (the target then keeps a packet of look-ahead for FEC).
///
/// A plain value: the bitmap is inline, nothing is allocated.
struct JitterLossTracker {
    private static let bitmapWords = 16                 // 1024 sequence numbers
    private static let bitmapSpan: Int64 = 1024

    private let lossMemory: Int64
    /// Whether a first packet has set the numbering (since init or `restart`).
    private(set) var anchored = false
    private var seqUnwrap = RTPSequenceUnwrapper()
    private var tsUnwrap = RTPTimestampUnwrapper()
    private var firstTimestamp: Int64 = 0
    private var baseSequence: Int64 = 0
    private(set) var highestSequence: Int64 = 0
    private var bitmapTop: Int64 = 0
    private var bitmap = InlineArray<16, UInt64>(repeating: 0)
    private var arrivedCount = 0                // unique packets in [base, highest], in time or late
    private var lostBefore = 0                  // lost count folded in at resets
    private var lossUntil: Int64 = JitterBufferTiming.none  // receiver time until which losses are recent

    init(lossMemory: Int64) {
        self.lossMemory = lossMemory
    }

    /// Packets missing so far (with those of the streams before the last `restart`).
    var lost: Int {
        guard anchored else { return lostBefore }
        let expected = Int(highestSequence - baseSequence + 1)
        return lostBefore + max(0, expected - arrivedCount)
    }

    /// Sets the numbering on the stream's first packet; returns its unwrapped sequence number
    /// (its relative timestamp is 0).
    mutating func anchor(sequence: UInt16, timestamp: UInt32) -> Int64 {
        anchored = true
        let s = seqUnwrap.unwrap(sequence)
        firstTimestamp = tsUnwrap.unwrap(timestamp)
        baseSequence = s
        highestSequence = s
        bitmapTop = s
        for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
        return s
    }

    /// A packet's unwrapped sequence number and relative timestamp, without taking it in.
    func peek(sequence: UInt16, timestamp: UInt32) -> (sequence: Int64, relative: Int64) {
        (seqUnwrap.peek(sequence), tsUnwrap.peek(timestamp) - firstTimestamp)
    }

    /// Older than the duplicate bitmap reaches: it cannot be judged.
    func isTooOld(_ seq: Int64) -> Bool { seq <= bitmapTop - Self.bitmapSpan }

    /// Marks a sequence number as arrived and advances the numbering. Returns whether it came
    /// after a higher sequence number (reordered).
    mutating func commit(sequence seq: Int64, timestamp: UInt32, newest: Bool) -> Bool {
        var reordered = false
        _ = seqUnwrap.unwrap(UInt16(truncatingIfNeeded: seq))
        if newest {
            highestSequence = seq
        } else if seq < highestSequence {
            reordered = true
        }
        mark(seq)
        if seq >= baseSequence { arrivedCount += 1 }
        _ = tsUnwrap.unwrap(timestamp)
        return reordered
    }

    /// Before playout starts, a packet older than the first one received still counts as
    /// expected.
    mutating func extendBase(to seq: Int64) {
        if seq < baseSequence { baseSequence = seq }
    }

    /// Sequence numbers prove a loss at receiver time `time`: losses are recent for
    /// `lossMemoryMs` from then.
    mutating func noteLoss(at time: Int64) { lossUntil = time + lossMemory }

    func isRecent(at time: Int64) -> Bool { lossUntil != JitterBufferTiming.none && time < lossUntil }

    /// Starts over on a new stream: the lost count so far is kept, the next packet sets the
    /// numbering.
    mutating func restart() {
        lostBefore = lost
        anchored = false
        seqUnwrap.reset()
        tsUnwrap.reset()
        arrivedCount = 0
        lossUntil = JitterBufferTiming.none
    }

    /// Counts from zero again, from the next sequence number on.
    mutating func restartCount() {
        lostBefore = 0
        baseSequence = highestSequence + 1
        arrivedCount = 0
    }

    func isDuplicate(_ seq: Int64) -> Bool {
        if seq > bitmapTop || seq <= bitmapTop - Self.bitmapSpan { return false }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        return bitmap[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    private mutating func mark(_ seq: Int64) {
        if seq > bitmapTop {
            if seq - bitmapTop >= Self.bitmapSpan {
                for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
            } else {
                var s = bitmapTop + 1
                while s <= seq {
                    let bit = Int(s & (Self.bitmapSpan - 1))
                    bitmap[bit >> 6] &= ~(1 << UInt64(bit & 63))
                    s += 1
                }
            }
            bitmapTop = seq
        }
        if seq <= bitmapTop - Self.bitmapSpan { return }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        bitmap[bit >> 6] |= 1 << UInt64(bit & 63)
    }
}
