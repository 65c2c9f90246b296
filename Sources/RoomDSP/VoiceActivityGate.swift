/// Decides, frame by frame, whether an encoded frame is worth sending, from the voice activity
/// the echo canceller's VAD reports. Opus's own DTX only sees the signal it encodes; the APM's
/// VAD also knows about echo and noise, so it drives the gate, and Opus DTX is the second line.
///
/// Rules: frames with voice are sent; after the last voiced frame a hangover keeps sending so
/// word endings are not clipped; after that only one frame per `refreshFrames` goes out, which
/// keeps the receiver's comfort noise and the NAT binding alive.
public struct VoiceActivityGate: Sendable {
    public let hangoverFrames: Int
    public let refreshFrames: Int
    private var framesSinceVoice: Int
    private var framesSinceSent = 0

    public init(hangoverFrames: Int = 20, refreshFrames: Int = 40) {
        precondition(hangoverFrames >= 0 && refreshFrames >= 1)
        self.hangoverFrames = hangoverFrames
        self.refreshFrames = refreshFrames
        framesSinceVoice = hangoverFrames + 1
    }

    /// Call once per encoded frame; returns true when the frame should be sent.
    public mutating func shouldSend(voice: Bool) -> Bool {
        if voice { framesSinceVoice = 0 } else if framesSinceVoice <= hangoverFrames { framesSinceVoice += 1 }
        let send = framesSinceVoice <= hangoverFrames || framesSinceSent + 1 >= refreshFrames
        framesSinceSent = send ? 0 : framesSinceSent + 1
        return send
    }

    /// True while the gate is passing everything (speech or its hangover).
    public var isTalking: Bool { framesSinceVoice <= hangoverFrames }
}
