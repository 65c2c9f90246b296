import RoomMedia
import Synchronization

/// Receive statistics of each remote stream, published by the audio thread for `roomctl stats`
/// and the status line: one row of relaxed atomics per jitter-buffer slot, so the reader never
/// waits and the writer never allocates. A reader may see one row mid-update (counters from
/// two consecutive periods); for statistics that is fine.
public final class StreamStatistics: @unchecked Sendable {
    public struct Row: Sendable, Equatable {
        public var ssrc: UInt32
        /// The conversation the stream belongs to: the room, or the room listened to.
        public var leg: MediaLeg = .room
        public var received, lost, late, fecRecovered, concealed: Int
        public var jitterMs, delayMs: Double
        /// The jitter buffer's target delay now.
        public var targetMs: Double
        /// Drops made to lower the delay (packets, or stretches of silence / missing audio)
        /// and how much audio they removed; frames inserted to raise it.
        public var skipped: Int
        public var shedMs: Double
        public var stretched: Int
        /// Packets recognised as a backlog burst (after an outage or stall): not jitter.
        public var backlog: Int
        /// When its last packet arrived, on the 48 kHz media clock (`mediaClockSamples`).
        public var lastArrivalSamples: Int64 = 0

        /// Milliseconds since its last packet, at `now` on the media clock (0 if in the future).
        public func idleMilliseconds(now: Int64) -> Int { Int(max(0, now - lastArrivalSamples) / 48) }

        /// Whether the stream is playing now: a packet within `activeWindowMs`. A stream that
        /// stopped (a silent speaker's voice gate, a sender that went away) keeps the delay it
        /// last had, which no listener hears.
        public func isActive(now: Int64) -> Bool { idleMilliseconds(now: now) <= StreamStatistics.activeWindowMs }
    }

    /// A stream with no packet for longer than this is idle: it does not count in the
    /// top-level `jitter_delay_ms` (docs/control-api.md). 2 s: longer than any gap inside
    /// speech (DTX sends a packet every 400 ms), and the time after which its slot may be
    /// taken by a new stream.
    public static let activeWindowMs = 2_000

    private static let fields = 15
    public let slots: Int
    private let cells: UnsafeMutablePointer<Atomic<UInt64>>

    /// What the streams that ended (released, or their slot taken by a new stream) had lost,
    /// received late, rebuilt from FEC and concealed: the top-level totals add these to the
    /// streams still listed, so they never go down when a participant leaves.
    public struct Retired: Sendable, Equatable {
        public var lost = 0, late = 0, fecRecovered = 0, concealed = 0
        public init() {}
    }
    private let retiredCells: UnsafeMutablePointer<Atomic<UInt64>>

    public init(slots: Int) {
        self.slots = slots
        cells = .allocate(capacity: slots * Self.fields)
        for i in 0..<(slots * Self.fields) { (cells + i).initialize(to: Atomic(0)) }
        retiredCells = .allocate(capacity: 4)
        for i in 0..<4 { (retiredCells + i).initialize(to: Atomic(0)) }
    }

    deinit {
        cells.deinitialize(count: slots * Self.fields)
        cells.deallocate()
        retiredCells.deinitialize(count: 4)
        retiredCells.deallocate()
    }

    /// Audio thread: a stream ended with these counters (added to the retired totals).
    @inline(__always)
    func retire(_ s: JitterBufferStatistics) {
        retiredCells[0].wrappingAdd(UInt64(max(0, s.lost)), ordering: .relaxed)
        retiredCells[1].wrappingAdd(UInt64(max(0, s.late)), ordering: .relaxed)
        retiredCells[2].wrappingAdd(UInt64(max(0, s.fecRecovered)), ordering: .relaxed)
        retiredCells[3].wrappingAdd(UInt64(max(0, s.concealed)), ordering: .relaxed)
    }

    /// The totals of the streams that ended.
    public var retired: Retired {
        var r = Retired()
        r.lost = Int(retiredCells[0].load(ordering: .relaxed))
        r.late = Int(retiredCells[1].load(ordering: .relaxed))
        r.fecRecovered = Int(retiredCells[2].load(ordering: .relaxed))
        r.concealed = Int(retiredCells[3].load(ordering: .relaxed))
        return r
    }

    /// Audio thread: the slot's stream and its jitter buffer's counters (ssrc 0: slot unused).
    @inline(__always)
    func publish(slot: Int, ssrc: UInt32, leg: MediaLeg = .room, _ s: JitterBufferStatistics, lastArrival: Int64) {
        let base = cells + slot * Self.fields
        base[0].store(UInt64(ssrc), ordering: .relaxed)
        base[1].store(UInt64(max(0, s.received)), ordering: .relaxed)
        base[2].store(UInt64(max(0, s.lost)), ordering: .relaxed)
        base[3].store(UInt64(max(0, s.late)), ordering: .relaxed)
        base[4].store(UInt64(max(0, s.fecRecovered)), ordering: .relaxed)
        base[5].store(UInt64(max(0, s.concealed)), ordering: .relaxed)
        base[6].store(s.jitterMs.bitPattern, ordering: .relaxed)
        base[7].store(s.currentDelayMs.bitPattern, ordering: .relaxed)
        base[8].store(s.targetDelayMs.bitPattern, ordering: .relaxed)
        base[9].store(UInt64(max(0, s.skipped)), ordering: .relaxed)
        base[10].store(s.shedMs.bitPattern, ordering: .relaxed)
        base[11].store(UInt64(max(0, s.stretched)), ordering: .relaxed)
        base[12].store(UInt64(max(0, s.backlog)), ordering: .relaxed)
        base[13].store(UInt64(bitPattern: lastArrival), ordering: .relaxed)
        base[14].store(UInt64(leg.rawValue), ordering: .relaxed)
    }

    /// The streams in use now.
    public func rows() -> [Row] {
        (0..<slots).compactMap { slot in
            let base = cells + slot * Self.fields
            let ssrc = UInt32(truncatingIfNeeded: base[0].load(ordering: .relaxed))
            guard ssrc != 0 else { return nil }
            func n(_ i: Int) -> Int { Int(base[i].load(ordering: .relaxed)) }
            func d(_ i: Int) -> Double { Double(bitPattern: base[i].load(ordering: .relaxed)) }
            return Row(ssrc: ssrc, leg: MediaLeg(rawValue: UInt8(truncatingIfNeeded: base[14].load(ordering: .relaxed))) ?? .room,
                       received: n(1), lost: n(2), late: n(3), fecRecovered: n(4), concealed: n(5),
                       jitterMs: d(6), delayMs: d(7), targetMs: d(8), skipped: n(9), shedMs: d(10), stretched: n(11),
                       backlog: n(12), lastArrivalSamples: Int64(bitPattern: base[13].load(ordering: .relaxed)))
        }
    }
}
