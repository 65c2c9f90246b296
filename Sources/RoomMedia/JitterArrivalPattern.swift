/// How the jitter buffer's newest packets arrive: the packet duration the stream's timestamps
/// show (for packets whose duration the caller did not give), and the bursts in which a
/// backlog drains — packets arriving at more than 4× real time behind a late or backlog
/// packet are the tail of a stall (of the network, the server or our receive thread), not
/// jitter (docs/jitter-buffer.md, "A backlog is not jitter").
///
/// A plain value: the recent timestamp steps are inline, nothing is allocated.
struct JitterArrivalPattern {
    private static let gapSlots = 8

    private let granule: Int64
    private let longestPacket: Int64
    private let frameSamples: Int64
    /// Receiver time the newest packet (highest sequence number) arrived at.
    private(set) var newestArrival: Int64 = JitterBufferTiming.none
    /// Its relative timestamp.
    private(set) var newestRelative: Int64 = 0
    private var chainOpen = false               // the newest packet was late or backlog
    private var gaps = InlineArray<8, Int64>(repeating: 0)  // recent timestamp steps of consecutive packets
    private var gapCount = 0
    private var gapNext = 0
    /// The smallest of the recent timestamp steps (`frameSamples` until there is one).
    private(set) var inferredDuration: Int64

    init(timing: JitterBufferTiming) {
        granule = timing.granule
        longestPacket = timing.longestPacket
        frameSamples = timing.frameSamples
        inferredDuration = timing.frameSamples
    }

    /// Starts over on a new stream.
    mutating func restart() {
        forgetNewest()
        gapCount = 0
        gapNext = 0
        inferredDuration = frameSamples
    }

    /// No newest packet yet (the numbering starts over).
    mutating func forgetNewest() {
        newestArrival = JitterBufferTiming.none
        chainOpen = false
    }

    /// An older packet draining in the same burst as the newest (the queue was not quite in
    /// order): it arrives less than a quarter of `lastDuration` after the newest.
    func drainsInSameBurst(arrival: Int64, lastDuration: Int64) -> Bool {
        chainOpen && newestArrival != JitterBufferTiming.none && (arrival - newestArrival) * 4 < lastDuration
    }

    /// A new newest packet draining right behind a late or backlog one: it arrives less than a
    /// quarter of its timestamp step after it.
    func drainsBehindNewest(relative: Int64, arrival: Int64) -> Bool {
        guard newestArrival != JitterBufferTiming.none else { return false }
        let advance = relative - newestRelative
        return chainOpen && advance > 0 && (arrival - newestArrival) * 4 < advance
    }

    /// Takes in a new newest packet: learns the packet duration from its timestamp step when
    /// it follows the previous newest (`consecutive` sequence numbers); `late`: it was late or
    /// backlog, so the packets that drain right behind it are backlog.
    mutating func noteNewest(relative: Int64, arrival: Int64, consecutive: Bool, late: Bool) {
        if newestArrival != JitterBufferTiming.none {
            let advance = relative - newestRelative
            if consecutive, advance >= granule, advance <= longestPacket {
                gaps[gapNext] = advance
                gapNext = (gapNext + 1) % Self.gapSlots
                gapCount = min(gapCount + 1, Self.gapSlots)
                var smallest = Int64.max
                for i in 0 ..< gapCount where gaps[i] < smallest { smallest = gaps[i] }
                inferredDuration = smallest
            }
        }
        newestArrival = arrival
        newestRelative = relative
        chainOpen = late
    }
}
