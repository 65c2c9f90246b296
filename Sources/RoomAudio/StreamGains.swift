import Synchronization

/// The conversations the speaker plays at once, each with its own streams: the room the
/// appliance is in, a second room it listens to (`roomctl listen`, audience only), and a call
/// (`CallLeg`). Streams are told apart by leg and SSRC, since each hands out its own SSRCs.
public enum MediaLeg: UInt8, Sendable, CaseIterable {
    case room = 0
    case listen = 1
    case call = 2

    /// One number for a (leg, SSRC) pair, for tables keyed by both.
    @inline(__always)
    static func key(_ leg: MediaLeg, _ ssrc: UInt32) -> UInt64 { UInt64(leg.rawValue) << 32 | UInt64(ssrc) }

    /// The leg and SSRC of a `key`.
    @inline(__always)
    static func split(_ key: UInt64) -> (leg: MediaLeg, ssrc: UInt32) {
        (MediaLeg(rawValue: UInt8(truncatingIfNeeded: key >> 32)) ?? .room, UInt32(truncatingIfNeeded: key))
    }
}

/// Per-sender playback volume, set from the event loop (roomctl volume PARTICIPANT dB) and read
/// by the audio thread each period. Each entry is one 64-bit atomic — SSRC in the high half,
/// the linear gain's bit pattern in the low half — so a reader never sees a gain paired with
/// the wrong sender, and nobody waits.
///
/// `@unchecked Sendable`: the storage pointer never changes after init and every access to what
/// it points at is atomic.
public final class StreamGains: @unchecked Sendable {
    public static let capacity = 32
    private let entries: UnsafeMutablePointer<Atomic<UInt64>>
    private let changes = Atomic<UInt64>(0)

    /// Bumped by every `set`: the audio thread looks gains up again only when this or a slot's
    /// sender changed, not every period.
    public var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Each leg's gain (linear, Float bit pattern), applied on top of the per-sender gains: the
    /// room listened to plays at the gain `roomctl listen --gain` set.
    private let legGains: UnsafeMutablePointer<Atomic<UInt32>>

    public init() {
        entries = .allocate(capacity: Self.capacity)
        for i in 0..<Self.capacity { (entries + i).initialize(to: Atomic(0)) }
        legGains = .allocate(capacity: MediaLeg.allCases.count)
        for i in 0..<MediaLeg.allCases.count { (legGains + i).initialize(to: Atomic(Float(1).bitPattern)) }
    }

    deinit {
        entries.deinitialize(count: Self.capacity)
        entries.deallocate()
        legGains.deinitialize(count: MediaLeg.allCases.count)
        legGains.deallocate()
    }

    /// Sets the gain of every stream of `leg`. False for a gain that is not finite and ≥ 0.
    @discardableResult
    public func set(leg: MediaLeg, linear gain: Float) -> Bool {
        guard gain.isFinite, gain >= 0 else { return false }
        legGains[Int(leg.rawValue)].store(gain.bitPattern, ordering: .relaxed)
        changes.add(1, ordering: .releasing)
        return true
    }

    /// The gain of a stream of `leg` from `ssrc`: the leg's times the sender's (per-sender
    /// volumes are the room's participants'; a listened room's streams have only the leg's).
    @inline(__always)
    public func gain(leg: MediaLeg, ssrc: UInt32) -> Float {
        let legGain = Float(bitPattern: legGains[Int(leg.rawValue)].load(ordering: .relaxed))
        return leg == .room ? legGain * gain(ssrc: ssrc) : legGain
    }

    /// Sets the gain for `ssrc` (SSRC 0 is never used by senders). Returns false when the
    /// table is full or the gain is not a finite, non-negative number.
    @discardableResult
    public func set(ssrc: UInt32, linear gain: Float) -> Bool {
        guard ssrc != 0, gain.isFinite, gain >= 0 else { return false }
        let packed = UInt64(ssrc) << 32 | UInt64(gain.bitPattern)
        var free: Int?
        for i in 0..<Self.capacity {
            let e = entries[i].load(ordering: .relaxed)
            if UInt32(e >> 32) == ssrc {
                entries[i].store(packed, ordering: .relaxed)
                changes.add(1, ordering: .releasing)
                return true
            }
            if e == 0 && free == nil { free = i }
        }
        guard let free else { return false }
        entries[free].store(packed, ordering: .relaxed)
        changes.add(1, ordering: .releasing)
        return true
    }

    /// The gain for `ssrc`, 1 when none was set. Audio thread: a scan of 32 atomics, no
    /// allocation, no lock.
    @inline(__always)
    public func gain(ssrc: UInt32) -> Float {
        for i in 0..<Self.capacity {
            let e = entries[i].load(ordering: .relaxed)
            if e != 0 && UInt32(e >> 32) == ssrc { return Float(bitPattern: UInt32(truncatingIfNeeded: e)) }
        }
        return 1
    }
}
