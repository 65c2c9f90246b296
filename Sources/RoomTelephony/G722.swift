/// G.722 (ITU-T G.722, 64 kbit/s mode): 16 kHz speech in 8 kHz-rate bytes, two sub-band ADPCM
/// coders behind a quadrature mirror filter. RTP payload type 9, whose RTP clock is 8000
/// although the audio is sampled at 16 kHz (RFC 3551 §4.5.2). What SIP phones call "HD voice"
/// when Opus is not offered.
///
/// NOT YET IMPLEMENTED: the encoder and decoder below are placeholders that produce silence;
/// the implementation is under way (issue 29). Calls negotiate G.722 only once it is.
public final class G722Encoder {
    public init() {}

    /// Forgets the coder's state (a new stream).
    public func reset() {}

    /// Encodes `count` 16 kHz samples (an even number) into `count / 2` bytes; returns the
    /// number of bytes written.
    public func encode(_ samples: UnsafePointer<Int16>, count: Int, into bytes: UnsafeMutablePointer<UInt8>) -> Int {
        let n = count / 2
        bytes.update(repeating: 0, count: n)
        return n
    }
}

public final class G722Decoder {
    public init() {}

    public func reset() {}

    /// Decodes `count` bytes into `2 * count` 16 kHz samples; returns the number of samples.
    public func decode(_ bytes: UnsafePointer<UInt8>, count: Int, into samples: UnsafeMutablePointer<Int16>) -> Int {
        samples.update(repeating: 0, count: 2 * count)
        return 2 * count
    }
}
