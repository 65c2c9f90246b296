import Synchronization

/// Sums the streams the speaker plays (remote participants, notification sounds, the
/// loopback) into one period, applies per-stream and master gain, and limits the result.
///
/// Threading: gains and active flags are atomics, so the event loop (volume commands,
/// participants joining and leaving) sets them while the audio thread mixes — no lock, no
/// message. `mix` itself must only ever be called from one thread (the audio thread): it
/// owns the limiter and the gain ramps. That split is the contract behind
/// `@unchecked Sendable`.
///
/// Allocation: all storage is allocated in `init`; `mix` allocates nothing. Callers pass
/// their own per-stream buffers through a pointer table they also allocated up front.
///
/// Gain changes (including activating or deactivating a slot) are ramped linearly over one
/// period so a volume change or a participant leaving does not click.
public final class StreamMixer: @unchecked Sendable {
    /// Number of stream slots, fixed at init.
    public let slotCount: Int
    private let targetGains: UnsafeMutablePointer<Atomic<UInt32>>   // Float bit patterns
    private let activeFlags: UnsafeMutablePointer<Atomic<Bool>>
    private let master = Atomic<UInt32>(Float(1).bitPattern)
    // Audio-thread state: the gains applied at the end of the previous period.
    private let appliedGains: UnsafeMutablePointer<Float>
    private var appliedMaster: Float = 1
    private var limiter: Limiter
    private let rampsGainChanges: Bool

    /// `slots` streams at most; new slots start inactive with gain 1.
    /// `rampGainChanges: false` applies new gains from the next sample (tests, offline use).
    public init(slots: Int, sampleRate: Int, limiterThresholdDBFS: Float = -1, rampGainChanges: Bool = true) {
        precondition(slots > 0 && slots <= 1024)
        slotCount = slots
        targetGains = .allocate(capacity: slots)
        activeFlags = .allocate(capacity: slots)
        appliedGains = .allocate(capacity: slots)
        for i in 0..<slots {
            (targetGains + i).initialize(to: Atomic(Float(1).bitPattern))
            (activeFlags + i).initialize(to: Atomic(false))
        }
        appliedGains.initialize(repeating: 0, count: slots)
        limiter = Limiter(sampleRate: sampleRate, thresholdDBFS: limiterThresholdDBFS)
        rampsGainChanges = rampGainChanges
    }

    deinit {
        targetGains.deinitialize(count: slotCount)
        activeFlags.deinitialize(count: slotCount)
        targetGains.deallocate()
        activeFlags.deallocate()
        appliedGains.deallocate()
    }

    // MARK: Control (any thread)

    /// Sets a slot's linear gain; returns false for a slot out of range or a gain that is
    /// negative or not finite (both come from outside input and must not crash the daemon).
    @discardableResult
    public func setGain(_ gain: Float, slot: Int) -> Bool {
        guard slot >= 0 && slot < slotCount, gain.isFinite, gain >= 0 else { return false }
        targetGains[slot].store(gain.bitPattern, ordering: .relaxed)
        return true
    }

    @discardableResult
    public func setGain(dB: Float, slot: Int) -> Bool { setGain(linear(fromDB: dB), slot: slot) }

    public func gain(slot: Int) -> Float? {
        guard slot >= 0 && slot < slotCount else { return nil }
        return Float(bitPattern: targetGains[slot].load(ordering: .relaxed))
    }

    @discardableResult
    public func setActive(_ active: Bool, slot: Int) -> Bool {
        guard slot >= 0 && slot < slotCount else { return false }
        activeFlags[slot].store(active, ordering: .relaxed)
        return true
    }

    public func isActive(slot: Int) -> Bool {
        guard slot >= 0 && slot < slotCount else { return false }
        return activeFlags[slot].load(ordering: .relaxed)
    }

    /// Linear gain applied to the sum before the limiter (the speaker volume).
    public var masterGain: Float {
        get { Float(bitPattern: master.load(ordering: .relaxed)) }
        set { if newValue.isFinite && newValue >= 0 { master.store(newValue.bitPattern, ordering: .relaxed) } }
    }

    // MARK: Mixing (audio thread only)

    /// The limiter's current gain (1 = not limiting), for statistics.
    public var limiterGain: Float { limiter.gain }

    /// Mixes one period into `output` (overwritten).
    ///
    /// `streams[i]` is slot i's audio for this period — at least `output.count` samples — or
    /// nil when the slot has nothing this period (treated as silence). Entries beyond
    /// `slotCount` are ignored; slots beyond `streams.count` count as nil.
    public func mix(streams: UnsafeBufferPointer<UnsafePointer<Float>?>, into output: UnsafeMutableBufferPointer<Float>) {
        let n = output.count
        guard n > 0, let out = output.baseAddress else { return }
        out.update(repeating: 0, count: n)
        let step = rampsGainChanges ? 1 / Float(n) : 0
        for slot in 0..<slotCount {
            let active = activeFlags[slot].load(ordering: .relaxed)
            let target = active ? Float(bitPattern: targetGains[slot].load(ordering: .relaxed)) : 0
            let start = rampsGainChanges ? appliedGains[slot] : target
            appliedGains[slot] = target
            guard slot < streams.count, let source = streams[slot], start != 0 || target != 0 else { continue }
            if start == target {
                for i in 0..<n { out[i] += source[i] * target }
            } else {
                let delta = (target - start) * step
                for i in 0..<n { out[i] += source[i] * (start + delta * Float(i + 1)) }
            }
        }
        let m = masterGain
        let m0 = rampsGainChanges ? appliedMaster : m
        appliedMaster = m
        if m0 == m {
            if m != 1 { for i in 0..<n { out[i] *= m } }
        } else {
            let delta = (m - m0) * step
            for i in 0..<n { out[i] *= m0 + delta * Float(i + 1) }
        }
        limiter.process(output)
    }

    /// Forgets ramps and limiter state (after the audio device restarts).
    public func reset() {
        for slot in 0..<slotCount {
            appliedGains[slot] = activeFlags[slot].load(ordering: .relaxed)
                ? Float(bitPattern: targetGains[slot].load(ordering: .relaxed)) : 0
        }
        appliedMaster = masterGain
        limiter.reset()
    }
}
