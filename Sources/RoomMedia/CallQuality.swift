/// The call-quality warnings: what the voice SDKs roomd is compared with raise when a call goes
/// bad, for rooms and calls alike. Each is raised when its condition has held for a few
/// seconds and cleared when it has been gone for a few more (`QualityWatch`), so a person at
/// the table (status, an LED) or a script (`roomctl events`) sees a state, not a flicker.
public enum QualityWarning: String, CaseIterable, Sendable, Comparable {
    /// The media path's round trip is long enough for people to talk over each other.
    case highRTT = "high_rtt"
    /// Packets arrive unevenly enough that the jitter buffer has to hold audio back.
    case highJitter = "high_jitter"
    /// Packets are lost on the way in or (as the receivers report) on the way out.
    case highLoss = "high_loss"
    /// The listening quality estimated from delay and loss (E-model) is poor.
    case lowMOS = "low_mos"
    /// The microphones deliver the same sample value block after block: unplugged, or a dead
    /// capture path. A quiet room is never constant (its noise moves the low bits).
    case constantInputLevel = "constant_input_level"
    /// Packets arrive from the room but what they decode to is digital silence: the far end's
    /// microphone sends nothing (or this appliance's speaker volume is at 0, which plays the same).
    case constantOutputLevel = "constant_output_level"

    /// Judged on a yes/no (constant or not) rather than a figure: its changes carry no value.
    public var isFlag: Bool { self == .constantInputLevel || self == .constantOutputLevel }

    public static func < (a: QualityWarning, b: QualityWarning) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// One second of what the warnings are judged on. nil: not measurable this second (no media
/// path yet, nothing received, the microphone muted), which neither raises nor clears.
public struct QualitySample: Sendable, Equatable {
    /// The media path's round trip (binding datagrams or RTCP), milliseconds.
    public var rttMs: Double?
    /// The largest interarrival jitter (RFC 3550) among the streams received, milliseconds.
    public var jitterMs: Double?
    /// The worse of the packets lost on the way in (over the last few seconds) and the loss
    /// the receivers of this appliance's stream report, percent.
    public var lossPercent: Double?
    /// The estimated listening quality (`EModel.mos`), 1 … 4.5.
    public var mos: Double?
    /// Every block of the second came from the microphones with one value throughout.
    public var inputConstant: Bool?
    /// Audio was decoded from received packets during the second, and all of it was silence.
    public var outputConstant: Bool?

    public init(rttMs: Double? = nil, jitterMs: Double? = nil, lossPercent: Double? = nil, mos: Double? = nil,
                inputConstant: Bool? = nil, outputConstant: Bool? = nil) {
        self.rttMs = rttMs
        self.jitterMs = jitterMs
        self.lossPercent = lossPercent
        self.mos = mos
        self.inputConstant = inputConstant
        self.outputConstant = outputConstant
    }
}

/// A warning raised or cleared, with the value that decided it (nil for the constant levels).
public struct QualityChange: Sendable, Equatable {
    public var warning: QualityWarning
    public var raised: Bool
    public var value: Double?

    public init(warning: QualityWarning, raised: Bool, value: Double?) {
        self.warning = warning
        self.raised = raised
        self.value = value
    }
}

/// Raises and clears the warnings from one sample a second. Each warning has a raise and a
/// lower clear threshold (hysteresis: a value hovering at the line does not toggle it), a
/// number of consecutive seconds over the first to raise and under the second to clear.
///
/// Why these numbers: the requirement is a warning within 5 s of 8 % loss, 300 ms of round
/// trip or a dead microphone, gone after it ends; 2 s over the line raises it 2-3 s in (the
/// round trip: its first measurement over the line, which comes within 2 s), 5 s under clears
/// it without flicker. The lines themselves:
/// - RTT 250 ms: ITU-T G.114 puts the mouth-to-ear delay conversation tolerates well at
///   150 ms one way; half of a 250 ms round trip plus the appliance's own 30 ms and a jitter
///   buffer's 20-40 ms is past it. Cleared under 200 ms.
/// - jitter 30 ms: beyond it the jitter buffer holds 60 ms or more to play smoothly (its
///   target follows about twice the jitter, docs/jitter-buffer.md). Cleared under 20 ms.
/// - loss 3 %: Opus's in-band FEC and concealment hide 1-2 % of random loss well; over 3 %
///   words break up audibly. Cleared under 1 %.
/// - MOS 3.5: E-model "some users dissatisfied" (R ≈ 70). Cleared over 3.7.
/// - constant input or output for 3 s (cleared after 2 s of varying audio): a dead microphone is
///   constant every block, so 3 s is enough and no sound a room makes lasts that long flat.
public struct QualityWatch: Sendable {
    public struct Rule: Sendable, Equatable {
        public enum Direction: Sendable { case above, below }
        public let direction: Direction
        /// Past this the value is bad; back past `clearAt` (on the good side of it) it is good.
        public let raiseAt: Double
        public let clearAt: Double
        public let raiseAfterSeconds: Int
        public let clearAfterSeconds: Int

        func isBad(_ v: Double) -> Bool { direction == .above ? v > raiseAt : v < raiseAt }
        func isGood(_ v: Double) -> Bool { direction == .above ? v < clearAt : v > clearAt }

        public static func above(_ raise: Double, clearBelow clear: Double, raiseAfter: Int = 2, clearAfter: Int = 5) -> Rule {
            Rule(direction: .above, raiseAt: raise, clearAt: clear, raiseAfterSeconds: raiseAfter, clearAfterSeconds: clearAfter)
        }

        public static func below(_ raise: Double, clearAbove clear: Double, raiseAfter: Int = 2, clearAfter: Int = 5) -> Rule {
            Rule(direction: .below, raiseAt: raise, clearAt: clear, raiseAfterSeconds: raiseAfter, clearAfterSeconds: clearAfter)
        }

        /// For the constant levels (a sample of 1 means constant, 0 varying).
        public static func flag(raiseAfter: Int = 3, clearAfter: Int = 2) -> Rule {
            .above(0.5, clearBelow: 0.5, raiseAfter: raiseAfter, clearAfter: clearAfter)
        }
    }

    public static let defaultRules: [QualityWarning: Rule] = [
        // One second over the line is enough here: a round trip is measured every 2 s and held
        // between measurements, so a second second would be the same measurement again.
        .highRTT: .above(250, clearBelow: 200, raiseAfter: 1),
        .highJitter: .above(30, clearBelow: 20),
        .highLoss: .above(3, clearBelow: 1),
        .lowMOS: .below(3.5, clearAbove: 3.7),
        .constantInputLevel: .flag(),
        .constantOutputLevel: .flag(),
    ]

    private let rules: [QualityWarning: Rule]
    /// Per warning: consecutive seconds on the far side of the line that would change it.
    private var streak: [QualityWarning: Int] = [:]
    /// The warnings raised now.
    public private(set) var active: Set<QualityWarning> = []

    public init(rules: [QualityWarning: Rule] = QualityWatch.defaultRules) {
        self.rules = rules
    }

    /// Takes one second's sample; answers what was raised or cleared by it, in a fixed order.
    public mutating func add(_ sample: QualitySample) -> [QualityChange] {
        var changes: [QualityChange] = []
        for warning in QualityWarning.allCases {
            guard let rule = rules[warning] else { continue }
            guard let value = Self.value(of: warning, in: sample) else {
                streak[warning] = 0   // unmeasurable: a run of seconds must be unbroken
                continue
            }
            let raised = active.contains(warning)
            let towardChange = raised ? rule.isGood(value) : rule.isBad(value)
            let run = towardChange ? (streak[warning] ?? 0) + 1 : 0
            streak[warning] = run
            if run >= (raised ? rule.clearAfterSeconds : rule.raiseAfterSeconds) {
                streak[warning] = 0
                if raised { active.remove(warning) } else { active.insert(warning) }
                changes.append(QualityChange(warning: warning, raised: !raised, value: warning.isFlag ? nil : value))
            }
        }
        return changes
    }

    /// Clears every warning without an event (the call or room ended: nothing is measured).
    public mutating func reset() {
        active = []
        streak = [:]
    }

    private static func value(of warning: QualityWarning, in s: QualitySample) -> Double? {
        switch warning {
        case .highRTT: s.rttMs
        case .highJitter: s.jitterMs
        case .highLoss: s.lossPercent
        case .lowMOS: s.mos
        case .constantInputLevel: s.inputConstant.map { $0 ? 1 : 0 }
        case .constantOutputLevel: s.outputConstant.map { $0 ? 1 : 0 }
        }
    }
}

/// The ITU-T G.107 E-model in its simplified form for VoIP (Cole and Rosenbluth, 2001): a
/// rating R from the one-way mouth-to-ear delay and the packet loss, and the MOS it maps to.
/// An estimate to rank calls and warn on, not a listening test (docs/calls.md).
public enum EModel {
    /// The equipment impairment of the codec and how robust its concealment is to random loss
    /// (G.113 Appendix I gives G.711 with packet-loss concealment Ie 0, Bpl 25.1). G.113 has no
    /// Opus entry; roomd uses G.711+PLC's, which understates Opus (wideband, FEC), so a warning
    /// errs toward early.
    public struct Codec: Sendable, Equatable {
        public var ie: Double
        public var bpl: Double
        public static let concealing = Codec(ie: 0, bpl: 25.1)
    }

    /// R = 93.2 − Id(delay) − Ie,eff(loss), for random loss (BurstR 1).
    public static func rating(oneWayDelayMs d: Double, lossPercent ppl: Double, codec: Codec = .concealing) -> Double {
        let delay = 0.024 * d + (d > 177.3 ? 0.11 * (d - 177.3) : 0)
        let loss = codec.ie + (95 - codec.ie) * ppl / (ppl + codec.bpl)
        return 93.2 - delay - loss
    }

    /// MOS (1 … 4.5) from R (G.107 Annex B).
    public static func mos(rating r: Double) -> Double {
        if r <= 0 { return 1 }
        if r >= 100 { return 4.5 }
        return 1 + 0.035 * r + 7e-6 * r * (r - 60) * (100 - r)
    }
}
