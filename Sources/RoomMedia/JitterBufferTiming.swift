/// The settings of one `JitterBuffer` that its playout decisions use, converted once (at init)
/// from milliseconds to RTP clock ticks (samples at `clockRate`).
struct JitterBufferTiming {
    /// "Not yet" for a time or position in samples (no packet, no deadline).
    static let none = Int64.min

    let samplesPerMs: Int64
    /// 2.5 ms, the smallest Opus frame; 120 ms, the largest packet.
    let granule: Int64
    let longestPacket: Int64
    let tolerance: Int64
    /// Samples assumed for a packet whose duration is not known yet (480 at 10 ms).
    let frameSamples: Int64
    let step: Int64
    let skipHold: Int64
    let silenceWait: Int64
    let concealLimit: Int64
    let jumpThreshold: Double
    let horizon: Int64

    init(_ c: JitterBufferConfiguration) {
        samplesPerMs = Int64(c.clockRate / 1000)
        granule = Int64(c.clockRate / 400)
        longestPacket = 120 * samplesPerMs
        tolerance = granule / 2
        frameSamples = Int64(c.frameDurationMs) * samplesPerMs
        step = Int64(c.playoutStepMs) * samplesPerMs
        skipHold = Int64(c.skipHoldMs) * samplesPerMs
        silenceWait = Int64(max(c.silenceWaitMs, c.skipHoldMs)) * samplesPerMs
        concealLimit = Int64(c.concealBeforeSilenceMs) * samplesPerMs
        jumpThreshold = Double(Int64(c.jumpThresholdMs) * samplesPerMs)
        horizon = Int64(2 * c.maximumDelayMs + 100) * samplesPerMs
    }
}
