/// Receive statistics of one stream. Counts are cumulative since init or
/// `resetStatistics()`; `reset()` keeps them.
public struct JitterBufferStatistics: Sendable, Equatable {
    /// Packets accepted into the buffer (each sequence number once).
    public var received = 0
    /// Copies of a packet already received.
    public var duplicates = 0
    /// Packets that arrived after their frame had been played (or concealed).
    public var late = 0
    /// Packets that never arrived: expected (from the sequence numbers) minus arrived
    /// (in time or late). Sequence numbers skipped by DTX do not exist, so are not lost.
    public var lost = 0
    /// Packets that arrived after a packet with a higher sequence number.
    public var reordered = 0
    /// Packets dropped as too far ahead or behind (see `JitterBufferInsertResult.outOfRange`).
    public var outOfRange = 0
    /// Packets dropped because the payload did not fit a slot.
    public var oversize = 0
    /// Times the buffer started over because the numbering jumped.
    public var resyncs = 0
    /// Times playout restarted after a silent pause because the sender's packets came
    /// back later than the old timing allowed (clock drift across a long DTX pause).
    public var playoutRestarts = 0

    /// Packets decoded.
    public var decoded = 0
    /// Missing stretches rebuilt from the next packet's in-band FEC.
    public var fecRecovered = 0
    /// Missing stretches concealed (PLC) at their playout time: one per lost or late packet
    /// between packets present, one per period (or packet, if shorter) with nothing buffered
    /// (a short pause, or the packets after a loss not here yet).
    public var concealed = 0
    /// Stretches of silence played after the first packet (DTX or the sender stopped).
    public var silence = 0
    /// Drops made to bring the delay down (target shrank, the sender's clock is faster than
    /// ours, a backlog after a stall): each packet with audio dropped counts one, and so does
    /// each stretch of silence or missing audio cut short.
    public var skipped = 0
    /// How much audio those drops removed, milliseconds.
    public var shedMs = 0.0
    /// Insertions (concealment or silence, playout not advanced) to bring the delay up
    /// (target grew, or the sender's clock is slower than ours).
    public var stretched = 0
    /// Packets that arrived as a backlog: later than the maximum delay (an outage), or in a
    /// burst draining behind a late packet (a stall of the network, the server or our own
    /// receive thread). Their delays do not move the target; they play if still in time.
    public var backlog = 0

    /// How long after its earliest possible arrival the current packet is played.
    public var currentDelayMs = 0.0
    /// The delay the buffer is steering towards.
    public var targetDelayMs = 0.0
    /// RFC 3550 interarrival jitter estimate.
    public var jitterMs = 0.0
    /// Packets waiting in the buffer.
    public var bufferedPackets = 0

    public init() {}

    /// Counts a drop made to bring the delay down: `drops` drops (packets, or stretches of
    /// silence or missing audio) removing `samples` of audio.
    mutating func countShed(_ samples: Int64, drops: Int = 1, samplesPerMs: Int64) {
        skipped += drops
        shedMs += Double(samples) / Double(samplesPerMs)
    }

    /// Brings the gauges up to date (the counters are counted as things happen).
    mutating func publish(lost: Int, targetDelayMs: Double, jitterMs: Double, bufferedPackets: Int) {
        self.lost = lost
        self.targetDelayMs = targetDelayMs
        self.jitterMs = jitterMs
        self.bufferedPackets = bufferedPackets
    }
}
