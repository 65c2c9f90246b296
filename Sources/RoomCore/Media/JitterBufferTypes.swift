/// Settings of one `JitterBuffer`. Times are in milliseconds; the buffer converts them to
/// RTP clock ticks (samples at `clockRate`) once, at init.
public struct JitterBufferConfiguration: Sendable, Equatable {
    /// RTP clock rate; 48 kHz for Opus (RFC 7587).
    public var clockRate: Int = 48_000
    /// Duration of one packet and of one `nextFrame()` step: 10, 20, 40 or 60 ms.
    public var frameDurationMs: Int = 10
    /// Target delay never goes below this.
    public var minimumDelayMs: Int = 20
    /// Target delay never goes above this.
    public var maximumDelayMs: Int = 200
    /// Largest payload a slot holds; longer packets are dropped and counted.
    /// (One Opus frame is at most 1275 bytes.)
    public var maxPayloadBytes: Int = 1500
    /// Length of the sliding window of packet delays the target is computed from.
    public var delayWindowMs: Int = 2000
    /// Fraction of the window's packets that should be on time with no margin (0.5...1).
    public var delayPercentile: Double = 0.95
    /// How fast the target may fall when jitter calms down (it rises at once).
    public var shrinkRateMsPerSecond: Double = 20
    /// How long the playout delay must stay at least one frame above target before a
    /// frame that holds audio is dropped (frames with nothing to play are dropped at once).
    public var skipHoldMs: Int = 100
    /// Playout more than this far behind the target (the audio thread stalled, or a burst
    /// of packets arrived at once) jumps back to the target at once, dropping the frames
    /// in between, instead of dropping one frame per `skipHoldMs`.
    public var jumpThresholdMs: Int = 60
    /// With nothing buffered, conceal this long, then play silence (the sender has most
    /// likely stopped: DTX, mute, or gone).
    public var concealBeforeSilenceMs: Int = 100
    /// This many packets in a row outside the acceptable range mean the sender jumped
    /// (restarted with the same SSRC): the buffer starts over on the new numbering.
    public var resyncAfterOutOfRange: Int = 4

    public init() {}

    public init(frameDurationMs: Int, minimumDelayMs: Int = 20, maximumDelayMs: Int = 200) {
        self.frameDurationMs = frameDurationMs
        self.minimumDelayMs = minimumDelayMs
        self.maximumDelayMs = maximumDelayMs
    }

    /// Slots: the maximum delay plus room for packets arriving early, at least 16.
    public var capacityFrames: Int {
        max(16, 2 * (maximumDelayMs + frameDurationMs - 1) / frameDurationMs + 8)
    }
}

/// What happened to an inserted packet.
public enum JitterBufferInsertResult: Equatable, Sendable {
    /// Stored; will be played (or skipped) when its turn comes.
    case accepted
    /// Stored after the buffer started over because the stream's numbering jumped.
    case acceptedAfterResync
    /// Already in the buffer or already played.
    case duplicate
    /// Its frame was already played (concealed or recovered); counted, dropped.
    case late
    /// Too far ahead of or behind the playout point to be the same stream; dropped.
    case outOfRange
    /// Longer than `maxPayloadBytes`; dropped.
    case payloadTooLarge
}

/// What the audio thread should do for the next frame.
///
/// `Packet.payload` points into a copy the buffer keeps for the caller; it stays valid until
/// the next call to `nextFrame` or `reset` (inserting does not touch it).
public enum PlayoutDecision {
    /// Decode this packet normally.
    case decode(JitterBuffer.Packet)
    /// This frame's packet is missing and the next packet is here: decode the *next*
    /// packet with in-band FEC (opus_decode with decode_fec = 1) to rebuild this frame.
    /// The next packet itself is returned by the following call as `.decode`.
    case decodeFEC(JitterBuffer.Packet)
    /// Run packet-loss concealment (opus_decode with no data).
    case conceal
    /// Nothing to play: before the first packet, or the sender stopped (DTX). Play zeros,
    /// or run the decoder with no data to continue its comfort noise.
    case silence
}

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

    /// Frames decoded from their own packet.
    public var decoded = 0
    /// Missing frames rebuilt from the next packet's in-band FEC.
    public var fecRecovered = 0
    /// Missing frames concealed (PLC) at their playout time: lost or late packets, or a
    /// short pause with nothing buffered.
    public var concealed = 0
    /// Frames of silence played after the first packet (DTX or the sender stopped).
    public var silence = 0
    /// Frames dropped to bring the delay down (target shrank, or the sender's clock is
    /// faster than ours). A dropped frame with audio and a dropped empty frame both count.
    public var skipped = 0
    /// Frames inserted (concealment or silence, playout not advanced) to bring the delay
    /// up (target grew, or the sender's clock is slower than ours).
    public var stretched = 0

    /// How long after its earliest possible arrival the current frame is played.
    public var currentDelayMs = 0.0
    /// The delay the buffer is steering towards.
    public var targetDelayMs = 0.0
    /// RFC 3550 interarrival jitter estimate.
    public var jitterMs = 0.0
    /// Packets waiting in the buffer.
    public var bufferedPackets = 0

    public init() {}
}
