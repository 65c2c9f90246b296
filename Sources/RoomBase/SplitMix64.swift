/// SplitMix64: small, fast, and the same sequence for the same seed on every machine. Used
/// wherever a simulation must be reproducible: simulated packet loss (roomd --loopback-loss),
/// roomproxy's impairments (--seed), and the randomized tests. A value type: no allocation,
/// usable on the audio thread.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0) }
}
