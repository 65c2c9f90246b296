import RoomOpus
import Synchronization

/// The loss this appliance's listeners report, handed from the event loop (which hears the
/// server's `receiver_loss`, or in loopback mode measures its own stream) to the audio thread,
/// which turns it into Opus protection (`LossAdaptation`). Also what the loop applied, for
/// `roomctl stats`. Relaxed atomics only: neither side ever waits.
public final class LossFeedback: Sendable {
    private let lastPermille = Atomic<Int>(-1)
    private let reports = Atomic<Int>(0)
    private let appliedLoss = Atomic<Int>(-1)
    private let appliedBitrate = Atomic<Int>(0)

    public init() {}

    /// Event loop: the worst loss the listeners saw lately, permille of the packets sent.
    public func report(lostPermille: Int) {
        lastPermille.store(max(0, min(1000, lostPermille)), ordering: .relaxed)
        reports.add(1, ordering: .releasing)
    }

    /// How many reports arrived so far (the audio thread acts once per new one).
    @inline(__always) var reportCount: Int { reports.load(ordering: .acquiring) }
    @inline(__always) var latestPermille: Int { lastPermille.load(ordering: .relaxed) }

    @inline(__always) func publish(expectedLoss: Int32, bitrate: Int32) {
        appliedLoss.store(Int(expectedLoss), ordering: .relaxed)
        appliedBitrate.store(Int(bitrate), ordering: .relaxed)
    }

    /// The encoder's expected loss (OPUS_SET_PACKET_LOSS_PERC) and bitrate as the audio thread
    /// last set them; nil before the engine applied its first profile.
    public var applied: (expectedLossPercent: Int, bitrate: Int)? {
        let loss = appliedLoss.load(ordering: .relaxed)
        return loss < 0 ? nil : (loss, appliedBitrate.load(ordering: .relaxed))
    }

    /// Reports received so far (tests, stats).
    public var reportsReceived: Int { reports.load(ordering: .relaxed) }
}

/// What the encoder protects against, following the listeners' reports: in-band FEC sized
/// to the loss they see, and none at all — with a lower bitrate, which sounds as good without
/// the FEC copy — while the network is clean (docs/audio-engine.md, "Loss-driven FEC").
///
/// Turning protection on takes one report at 1 % or more (a deteriorating network should be
/// covered at once); turning it off takes `cleanReportsToRelax` reports in a row below 0.5 %.
/// At 1 % loss a one-second window of 100 packets is empty a third of the time, so a single
/// clean report says little; three in a row happen about one time in twenty.
///
/// Except before any report showed loss: the protection a call starts with is a guess (the
/// network is unknown), not a response to loss seen, so the first clean report ends it. A
/// clean call then leaves SILK with its FEC copy — more bytes, more than twice the encoder's
/// time of the transform layer — after the first report instead of the third (in a loopback
/// run: two seconds after start instead of four). On a network that does lose, the first
/// report shows it and the protection stays, as before; on one that loses ~1 %, a clean first
/// report costs one switch off and on again.
public struct LossAdaptation: Sendable, Equatable {
    public static let cleanReportsToRelax = 3

    /// The expected-loss setting now (percent; 0: no FEC copy).
    public private(set) var expectedLossPercent: Int32
    private var cleanReports = 0
    /// A report has asked for protection: from then on relaxing takes `cleanReportsToRelax`.
    private var lossSeen = false

    /// `initialPercent`: what to protect against before anyone reported (the profile's
    /// setting: a call may start on a lossy network).
    public init(initialPercent: Int32) {
        expectedLossPercent = initialPercent
    }

    /// One report (percent lost). True when the setting changed.
    public mutating func update(reportedPercent: Double) -> Bool {
        let wanted = OpusSettings.expectedLoss(forReportedLoss: reportedPercent, current: expectedLossPercent)
        if wanted > 0 { lossSeen = true }
        if wanted == 0 && expectedLossPercent > 0 {
            cleanReports += 1
            guard cleanReports >= (lossSeen ? Self.cleanReportsToRelax : 1) else { return false }
        }
        cleanReports = 0
        guard wanted != expectedLossPercent else { return false }
        expectedLossPercent = wanted
        return true
    }

    /// The bitrate for `profile` at the current setting: the profile's own while protecting,
    /// its clean-network rate (when it has one) while not.
    public func bitrate(for profile: AudioProfileSettings) -> Int32 {
        guard expectedLossPercent == 0, let clean = profile.cleanNetworkBitrate else { return profile.encoder.bitrate }
        return min(clean, profile.encoder.bitrate)
    }

    /// How `profile` is coded at the current setting. While protecting: SILK (the only layer
    /// with an in-band FEC copy; the voice hint makes libopus pick it) at the profile's
    /// complexity. While the network is clean and the profile allows it: the transform layer,
    /// through the music hint — the hint is the public lever libopus gives for its layer choice;
    /// at complexity < 7 with DTX on it otherwise keeps speech in SILK.
    public func coding(for profile: AudioProfileSettings) -> EncoderCoding {
        let clean = expectedLossPercent == 0 && profile.cleanNetworkTransform && !profile.encoder.music
        return EncoderCoding(bitrate: bitrate(for: profile), expectedLossPercent: expectedLossPercent,
                             musicSignal: profile.encoder.music || clean, complexity: clean ? profile.cleanNetworkComplexity : profile.encoder.complexity)
    }
}

/// A receiver's side: the share of each sender's packets lost since the previous call, from
/// the jitter buffers' running counters (`StreamStatistics`). On the event loop, once per
/// report interval.
public struct ReceiveLossWindow: Sendable {
    /// Fewer packets than this in a window say nothing about loss (a talker pausing): no report
    /// for that stream.
    public static let minimumPackets = 20

    private var previous: [UInt32: (arrived: Int, lost: Int)] = [:]

    public init() {}

    /// Per SSRC with enough packets in the window, the permille lost.
    public mutating func next(_ rows: [StreamStatistics.Row]) -> [(ssrc: UInt32, permille: Int)] {
        var out: [(ssrc: UInt32, permille: Int)] = []
        var now: [UInt32: (arrived: Int, lost: Int)] = [:]
        for row in rows {
            // Late packets did cross the network: the jitter buffer's business, not the sender's.
            now[row.ssrc] = (row.received + row.late, row.lost)
            guard let before = previous[row.ssrc] else { continue }
            let arrived = row.received + row.late - before.arrived, lost = row.lost - before.lost
            // Counters restart when a slot is given to the stream again: skip that window.
            guard arrived >= 0, lost >= 0, arrived + lost >= Self.minimumPackets else { continue }
            out.append((row.ssrc, (lost * 1000 + (arrived + lost) / 2) / (arrived + lost)))
        }
        previous = now
        return out
    }
}
