import CWebRTCAPM

/// The direction of whoever talks, from the raw mic array (SRP-PHAT with noise and onset
/// weighting: Sources/CWebRTCAPM/talker_locator.h, docs/audio-engine.md "Finding the talker").
/// Confined to the audio thread; `process` allocates nothing.
final class TalkerLocator {
    private let locator: OpaquePointer
    var lastChanges: UInt32 = 0   // the engine's: changes it has announced

    /// Why this geometry cannot tell directions around the whole circle (fewer than 3 mics, all
    /// on one line), or nil when it can. roomd says so once at start and runs without a direction.
    static func problem(rate: Int, positions: [(Float, Float, Float)]) -> String? {
        switch make(rate: rate, positions: positions) {
        case .success(let handle): rloc_destroy(handle); return nil
        case .failure(let error): return error.description
        }
    }

    init?(rate: Int, positions: [(Float, Float, Float)]) {
        guard case .success(let handle) = Self.make(rate: rate, positions: positions) else { return nil }
        locator = handle
    }

    deinit { rloc_destroy(locator) }

    private static func make(rate: Int, positions: [(Float, Float, Float)]) -> Result<OpaquePointer, AudioProcessorError> {
        var xyz: [Float] = []
        for p in positions { xyz += [p.0, p.1, p.2] }
        var err = [CChar](repeating: 0, count: 160)
        let handle = xyz.withUnsafeBufferPointer { rloc_create(Int32(rate), Int32(positions.count), $0.baseAddress, &err, Int32(err.count)) }
        guard let handle else {
            return .failure(AudioProcessorError(description: String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return .success(handle)
    }

    /// One 10 ms block of every mic. `listen`: the block may move the estimate.
    @inline(__always)
    func process(_ mics: UnsafePointer<UnsafePointer<Float>?>, listen: Bool) {
        rloc_process(locator, mics, listen ? 1 : 0)
    }

    var state: rloc_state_t {
        var s = rloc_state_t()
        rloc_state(locator, &s)
        return s
    }
}
