import CCaptureChain

/// The direction of whoever talks, from the raw mic array (SRP-PHAT with noise and onset
/// weighting: Sources/CCaptureChain/talker_locator.h, docs/audio-engine.md "Finding the talker").
/// Confined to the audio thread; `process` allocates nothing.
public final class TalkerLocator {
    private let locator: OpaquePointer

    /// Why this geometry cannot tell directions around the whole circle (fewer than 3 mics, all
    /// on one line), or nil when it can. roomd says so once at start and runs without a direction.
    public static func problem(rate: Int, positions: [(Float, Float, Float)]) -> String? {
        guard rate >= 8000, rate % 100 == 0 else { return "sample rate must be a multiple of 100 Hz, at least 8000" }
        var err = [CChar](repeating: 0, count: 160)
        let xyz = positions.flatMap { [$0.0, $0.1, $0.2] }
        guard xyz.withUnsafeBufferPointer({ rloc_geometry_problem(Int32(positions.count), $0.baseAddress, &err, Int32(err.count)) }) != 0 else { return nil }
        return String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public init?(rate: Int, positions: [(Float, Float, Float)]) {
        let xyz = positions.flatMap { [$0.0, $0.1, $0.2] }
        guard let handle = xyz.withUnsafeBufferPointer({ rloc_create(Int32(rate), Int32(positions.count), $0.baseAddress, nil, 0) }) else { return nil }
        locator = handle
    }

    deinit { rloc_destroy(locator) }

    /// Bins a `nearShare` array must have (the locator's spectrum).
    public var bins: Int { Int(rloc_bins(locator)) }

    /// One 10 ms block of every mic. `listen`: the block may move the estimate. `echoAlone`: the
    /// far end plays and nobody in the room talks (the block shows where the echo comes from).
    /// `farEndActive`: no talker is taken from the echo's direction. `nearShare`: per bin
    /// (`bins`), the share of the mics' power that is not the speaker's echo (roomd's canceller's
    /// estimate), so the echo does not steer during double talk; nil: all of it.
    @inline(__always)
    public func process(_ mics: UnsafePointer<UnsafePointer<Float>?>, listen: Bool, echoAlone: Bool = false,
                 farEndActive: Bool = false, nearShare: UnsafePointer<Float>? = nil) {
        let mode = listen ? RLOC_LISTEN : echoAlone ? RLOC_ECHO_ALONE : RLOC_IDLE
        rloc_process(locator, mics, mode, farEndActive ? 1 : 0, nearShare)
    }

    /// Where the speaker's echo was found to come from (board-frame degrees), once known.
    public var echoAzimuthDegrees: Float? {
        var d: Float = 0
        return rloc_echo_direction(locator, &d) != 0 ? d : nil
    }

    /// Where the talker is now; a value copied out of the C state, nothing allocated.
    @inline(__always)
    public var state: TalkerLocatorState {
        var s = rloc_state_t()
        rloc_state(locator, &s)
        return TalkerLocatorState(azimuthDegrees: s.azimuth_deg, confidence: s.confidence, locked: s.locked != 0,
                                  hasDirection: s.has_direction != 0, changes: Int(s.changes))
    }
}

/// The locator's estimate (talker_locator.h's `rloc_state_t` in Swift terms).
public struct TalkerLocatorState: Sendable, Equatable {
    /// Board frame: 0 = the +x axis (mic0 on board/sim), counter-clockwise; -180..180.
    public var azimuthDegrees: Float
    /// The map's peak above its mean, in mic-pair coherence (0..1).
    public var confidence: Float
    /// A talker's direction is held (false: none yet, or 2 s without voice).
    public var locked: Bool
    /// `azimuthDegrees` holds a direction (the last one, while not locked).
    public var hasDirection: Bool
    /// Times the direction moved to a new talker (or was first found).
    public var changes: Int
}
