/// The codecs a received or sent frame may carry. Rooms speak Opus only; a SIP call speaks
/// whichever the far end accepted (docs/calls.md): G.722 and G.711 are what phone gateways and
/// conference bridges offer when they do not offer Opus.
public enum AudioCodec: UInt8, Sendable, CaseIterable, BitwiseCopyable {
    case opus = 0
    /// G.711 μ-law (RTP payload type 0).
    case pcmu = 1
    /// G.711 A-law (RTP payload type 8).
    case pcma = 2
    /// G.722 at 64 kbit/s (RTP payload type 9).
    case g722 = 3

    /// The rate the codec's encoder takes and its decoder makes.
    public var sampleRate: Int {
        switch self {
        case .opus: 48_000
        case .pcmu, .pcma: 8000
        case .g722: 16_000
        }
    }

    /// The RTP timestamp clock. G.722's is 8000 although it samples at 16 kHz: an error in
    /// RFC 1890 kept by RFC 3551 §4.5.2 for compatibility.
    public var rtpClockRate: Int { self == .opus ? 48_000 : 8000 }

    /// Ticks of the 48 kHz media clock (jitter buffers, `MediaPacket.timestamp` on the
    /// receive side) per RTP tick.
    public var mediaTicksPerRTPTick: Int { 48_000 / rtpClockRate }

    /// A payload's duration on the 48 kHz media clock, for the fixed-rate codecs: G.711 is one
    /// byte per 8 kHz sample, G.722 one byte per two 16 kHz samples, both six media ticks per
    /// byte. Nil for Opus, whose packets say their own duration.
    public func mediaTicks(payloadBytes: Int) -> Int? {
        self == .opus ? nil : payloadBytes * 6
    }

    /// The name SDP's `a=rtpmap` gives it (and roomctl shows).
    public var name: String {
        switch self {
        case .opus: "opus"
        case .pcmu: "PCMU"
        case .pcma: "PCMA"
        case .g722: "G722"
        }
    }
}
