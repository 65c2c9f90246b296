/// Decoded audio as the daemon uses it: interleaved 16-bit samples.
///
/// 16-bit is what the ALSA devices are opened with and what the recorder writes, so keeping
/// files in that form means no conversion on the way in or out; `floatSamples` is there for
/// analysis and for feeding the float DSP chain.
public struct WAVAudio: Sendable, Equatable {
    public var sampleRate: Int
    public var channels: Int
    /// Interleaved: frame 0 channel 0, frame 0 channel 1, …
    public var samples: [Int16]

    public init(sampleRate: Int, channels: Int, samples: [Int16]) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.samples = samples
    }

    /// Whole frames (a trailing partial frame, which only a hand-built value can have, is not counted).
    public var frames: Int { channels > 0 ? samples.count / channels : 0 }

    /// Duration in seconds, for messages and reports.
    public var duration: Double { sampleRate > 0 ? Double(frames) / Double(sampleRate) : 0 }

    /// The samples as floats in [-1, 1), same scale as `SampleConversion`.
    public var floatSamples: [Float] { samples.map(SampleConversion.float(fromInt16:)) }
}
