import CWebRTCAPM

/// The direction of whoever talks, from the raw mic array (SRP-PHAT with noise and onset
/// weighting: Sources/CWebRTCAPM/talker_locator.h, docs/audio-engine.md "Finding the talker").
/// Confined to the audio thread; `process` allocates nothing.
final class TalkerLocator {
    private let locator: OpaquePointer

    /// Why this geometry cannot tell directions around the whole circle (fewer than 3 mics, all
    /// on one line), or nil when it can. roomd says so once at start and runs without a direction.
    static func problem(rate: Int, positions: [(Float, Float, Float)]) -> String? {
        guard rate >= 8000, rate % 100 == 0 else { return "sample rate must be a multiple of 100 Hz, at least 8000" }
        var err = [CChar](repeating: 0, count: 160)
        let xyz = positions.flatMap { [$0.0, $0.1, $0.2] }
        guard xyz.withUnsafeBufferPointer({ rloc_geometry_problem(Int32(positions.count), $0.baseAddress, &err, Int32(err.count)) }) != 0 else { return nil }
        return String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    init?(rate: Int, positions: [(Float, Float, Float)]) {
        let xyz = positions.flatMap { [$0.0, $0.1, $0.2] }
        guard let handle = xyz.withUnsafeBufferPointer({ rloc_create(Int32(rate), Int32(positions.count), $0.baseAddress, nil, 0) }) else { return nil }
        locator = handle
    }

    deinit { rloc_destroy(locator) }

    /// Bins a `nearShare` array must have (the locator's spectrum).
    var bins: Int { Int(rloc_bins(locator)) }

    /// One 10 ms block of every mic. `listen`: the block may move the estimate. `echoAlone`: the
    /// far end plays and nobody in the room talks (the block shows where the echo comes from).
    /// `farEndActive`: no talker is taken from the echo's direction. `nearShare`: per bin
    /// (`bins`), the share of the mics' power that is not the speaker's echo (roomd's canceller's
    /// estimate), so the echo does not steer during double talk; nil: all of it.
    @inline(__always)
    func process(_ mics: UnsafePointer<UnsafePointer<Float>?>, listen: Bool, echoAlone: Bool = false,
                 farEndActive: Bool = false, nearShare: UnsafePointer<Float>? = nil) {
        let mode = listen ? RLOC_LISTEN : echoAlone ? RLOC_ECHO_ALONE : RLOC_IDLE
        rloc_process(locator, mics, mode, farEndActive ? 1 : 0, nearShare)
    }

    /// Where the speaker's echo was found to come from (board-frame degrees), once known.
    var echoAzimuthDegrees: Float? {
        var d: Float = 0
        return rloc_echo_direction(locator, &d) != 0 ? d : nil
    }

    var state: rloc_state_t {
        var s = rloc_state_t()
        rloc_state(locator, &s)
        return s
    }
}
