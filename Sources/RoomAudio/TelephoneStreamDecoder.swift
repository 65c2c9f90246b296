import RoomDSP
import RoomMedia
import RoomTelephony

/// One remote stream's decoder for the telephone codecs a call may carry (G.711, G.722): the
/// payload to 16-bit samples at the codec's rate, then to the engine rate. Allocated with the
/// stream slots; `decode` and `conceal` allocate nothing.
///
/// Neither codec has concealment of its own (Opus does). A lost frame repeats the last 10 ms
/// played: at full level the first time, then 20 % lower every 10 ms, silent after 60 ms (the
/// attenuation G.711 Appendix I uses). A single loss is a short smear rather than a hole — the
/// jitter buffer, which grows its delay after a loss, conceals one lost 20 ms frame for 40 ms
/// (`CallLegTests`) — and a long gap fades out instead of buzzing.
final class TelephoneStreamDecoder {
    private let g722 = G722Decoder()
    private let fromNarrow: RateConverter
    private let fromWide: RateConverter
    private let samples: UnsafeMutablePointer<Int16>
    private let floats: UnsafeMutablePointer<Float>
    /// The last 10 ms played at the engine rate, for concealment.
    private let lastPlayed: UnsafeMutablePointer<Float>
    private let lastCount: Int
    private var concealGain: Float = 0
    private var concealPosition = 0
    /// Whether the repetition has started since the last decoded frame.
    private var concealing = false

    init(rate: Int) {
        fromNarrow = RateConverter(from: 8000, to: rate)!
        fromWide = RateConverter(from: 16_000, to: rate)!
        let most = 2 * MediaPacket.maxPayload
        samples = .allocate(capacity: most)
        samples.initialize(repeating: 0, count: most)
        floats = .allocate(capacity: most)
        floats.initialize(repeating: 0, count: most)
        lastCount = rate / 100
        lastPlayed = .allocate(capacity: lastCount)
        lastPlayed.initialize(repeating: 0, count: lastCount)
    }

    deinit {
        samples.deallocate()
        floats.deallocate()
        lastPlayed.deallocate()
    }

    func reset() {
        g722.reset()
        fromNarrow.reset()
        fromWide.reset()
        lastPlayed.update(repeating: 0, count: lastCount)
        concealGain = 0
    }

    /// Decodes one payload of `codec` (not Opus) into `out` at the engine rate; returns the
    /// samples made, or -1 when they would not fit `capacity`.
    func decode(_ payload: UnsafeRawBufferPointer, codec: AudioCodec, into out: UnsafeMutablePointer<Float>, capacity: Int) -> Int {
        guard let bytes = payload.baseAddress?.assumingMemoryBound(to: UInt8.self), payload.count > 0 else { return -1 }
        let converter: RateConverter
        let count: Int
        switch codec {
        case .pcmu:
            for i in 0..<payload.count { samples[i] = G711.linear(fromMuLaw: bytes[i]) }
            count = payload.count
            converter = fromNarrow
        case .pcma:
            for i in 0..<payload.count { samples[i] = G711.linear(fromALaw: bytes[i]) }
            count = payload.count
            converter = fromNarrow
        case .g722:
            count = g722.decode(bytes, count: payload.count, into: samples)
            converter = fromWide
        case .opus:
            return -1
        }
        guard converter.outputCapacity(forInput: count) <= capacity else { return -1 }
        for i in 0..<count { floats[i] = SampleConversion.float(fromInt16: samples[i]) }
        let made = converter.process(floats, count: count, into: out)
        if made >= lastCount {
            (lastPlayed).update(from: out + made - lastCount, count: lastCount)
        }
        concealGain = 1
        concealPosition = 0
        concealing = false
        return made
    }

    /// Fills `frames` samples for a lost frame (see the type's note).
    func conceal(into out: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        for i in 0..<frames {
            if concealPosition == 0 {
                if concealing { concealGain = max(0, concealGain - 0.2) }
                concealing = true
            }
            out[i] = lastPlayed[concealPosition] * concealGain
            concealPosition += 1
            if concealPosition == lastCount { concealPosition = 0 }
        }
        return frames
    }
}
