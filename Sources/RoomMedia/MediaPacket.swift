/// One encoded audio frame crossing the single-producer/single-consumer rings between the audio
/// thread and the network thread. Fixed size and trivially copyable, so a ring of them is
/// allocated once and moving a packet is a memcpy — the audio loop never allocates for media.
public struct MediaPacket: BitwiseCopyable, Sendable {
    /// Largest payload carried. Opus at speech bitrates makes 30–160 bytes per 10–20 ms frame;
    /// the encoder is told this limit, so it never produces more.
    public static let maxPayload = 400

    /// Sender's synchronization source (RTP SSRC).
    public var ssrc: UInt32 = 0
    public var sequenceNumber: UInt16 = 0
    /// RTP timestamp, 48 kHz clock (RFC 7587), whatever the board rate; a call's frames to
    /// send carry their codec's RTP clock (`CallLeg`).
    public var timestamp: UInt32 = 0
    /// Receive side: arrival time on the 48 kHz clock the jitter buffer runs on.
    public var arrivalSamples: Int64 = 0
    /// RFC 6464 audio level: 0 is the loudest (0 dBov), 127 the quietest.
    public var audioLevel: UInt8 = 127
    public var voiceActivity = false
    /// What the payload is: Opus in rooms, any of `AudioCodec` in a call.
    public var codec = AudioCodec.opus
    public var length: UInt16 = 0
    public var payload = InlineArray<400, UInt8>(repeating: 0)

    public init() {}

    /// Runs `body` over the payload bytes actually used.
    @inline(__always)
    public func withPayload<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var copy = payload
        return try withUnsafeBytes(of: &copy) { (raw) throws(E) -> R in
            try body(UnsafeRawBufferPointer(rebasing: raw[0..<Int(length)]))
        }
    }

    /// Copies `bytes` in (at most `maxPayload`); returns false, changing nothing, when too long.
    @inline(__always)
    public mutating func setPayload(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= Self.maxPayload else { return false }
        withUnsafeMutableBytes(of: &payload) { raw in
            if let base = bytes.baseAddress, bytes.count > 0 { raw.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
        }
        length = UInt16(bytes.count)
        return true
    }
}

/// The 48 kHz media clock from CLOCK_MONOTONIC: packet arrival times and playout share it.
@inline(__always)
public func mediaClockSamples(nanoseconds: UInt64) -> Int64 { Int64(nanoseconds / 1_000_000) * 48 + Int64(nanoseconds % 1_000_000) * 48 / 1_000_000 }
