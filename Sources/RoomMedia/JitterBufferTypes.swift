/// Settings of one `JitterBuffer`. Times are in milliseconds; the buffer converts them to
/// RTP clock ticks (samples at `clockRate`) once, at init.
///
/// The buffer follows the packets: each packet lasts what the packet says (the caller passes
/// the Opus packet's duration, `opus_packet_get_nb_samples`, or the buffer infers it from the
/// RTP timestamps), so a sender may use any Opus frame size (2.5 … 120 ms) and change it
/// mid-stream, whatever the receiver's own frame setting.
public struct JitterBufferConfiguration: Sendable, Equatable {
    /// RTP clock rate; 48 kHz for Opus (RFC 7587).
    public var clockRate: Int = 48_000
    /// Duration assumed for a packet whose duration the caller did not give, until the
    /// stream's timestamps show the real one (1 … 120 ms).
    public var frameDurationMs: Int = 10
    /// The caller's playout step (the audio period): the longest stretch of concealment or
    /// silence inserted at once to raise the delay, and the unit of the timing corrections.
    public var playoutStepMs: Int = 10
    /// Target delay never goes below this.
    public var minimumDelayMs: Int = 20
    /// Target delay never goes above this. A packet later than this (relative to the fastest
    /// packet) could never be waited for: it is an outage, not jitter, and does not move the
    /// target.
    public var maximumDelayMs: Int = 200
    /// Added to the measured spread of the delays (the 95th percentile, upper edge of its
    /// 1 ms bin): half a playout step, the most by which playout may run ahead of the schedule.
    public var targetMarginMs: Double = 5
    /// After a loss (sequence numbers show a packet missing at its turn, or one arrived late),
    /// the target keeps one packet of look-ahead for this long, so that the next missing packet
    /// can be rebuilt from the following packet's in-band FEC. On a clean path it goes.
    public var lossMemoryMs: Int = 10_000
    /// Largest payload a slot holds; longer packets are dropped and counted.
    /// (One Opus frame is at most 1275 bytes.)
    public var maxPayloadBytes: Int = 1500
    /// Packet slots (indexed by sequence number). 128 hold 320 ms of 2.5 ms packets and more
    /// than a second of 10 ms packets.
    public var capacityPackets: Int = 128
    /// Length of the sliding window of packet delays the target is computed from.
    public var delayWindowMs: Int = 2000
    /// Fraction of the window's packets that should be on time with no margin (0.5...1).
    public var delayPercentile: Double = 0.95
    /// How fast the target may fall when jitter calms down (it rises at once).
    public var shrinkRateMsPerSecond: Double = 20
    /// How long the playout delay must stay at least one packet above target before a
    /// packet that holds audio is dropped (silence and missing audio are dropped at once).
    public var skipHoldMs: Int = 100
    /// An excess under two packets waits this long for a pause in the talk (where silence is
    /// dropped at no cost) before a packet with audio is dropped.
    public var silenceWaitMs: Int = 400
    /// Playout more than this far behind the target (the audio thread stalled, or a burst
    /// of packets arrived at once) jumps back to the target at once, dropping the packets
    /// in between, instead of dropping one packet per `skipHoldMs`.
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

/// What the audio thread should do next, and for how long: every decision covers a number of
/// samples of the RTP clock (48 kHz for Opus), and the caller asks again once it has played
/// them. A packet plays for its own duration, whatever the receiver's frame setting.
///
/// `Packet.payload` points into a copy the buffer keeps for the caller; it stays valid until
/// the next call to `nextFrame` or `reset` (inserting does not touch it).
public enum PlayoutDecision {
    /// Decode this packet normally; it lasts `packet.durationSamples`.
    case decode(JitterBuffer.Packet)
    /// Audio is missing just before this packet, which is here: decode *this* packet with
    /// in-band FEC (opus_decode with decode_fec = 1 and a frame size of `samples`) to
    /// rebuild the missing `samples`. The packet itself is returned by the following call as
    /// `.decode`.
    case decodeFEC(JitterBuffer.Packet, samples: Int)
    /// Run packet-loss concealment (opus_decode with no data) for `samples`.
    case conceal(samples: Int)
    /// Nothing to play for `samples`: before the first packet, or the sender stopped (DTX).
    /// Play zeros, or run the decoder with no data to continue its comfort noise.
    case silence(samples: Int)

    /// How many samples (RTP clock) this decision covers.
    public var samples: Int {
        switch self {
        case .decode(let p): return p.durationSamples
        case .decodeFEC(_, let n), .conceal(let n), .silence(let n): return n
        }
    }
}
