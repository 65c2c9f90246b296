import RoomBase
import RoomDSP
import RoomMedia
import RoomOpus
import RoomSystem
import RoomTelephony
import Synchronization

/// A call's audio in the engine (issue 29; docs/calls.md): the caller's frames in, the frames
/// for the caller out, and what the daemon says about the call (its codec, whether the caller
/// is bridged into the room). The speaker plays the caller with everyone else; what each side
/// is sent is a mix-minus, so nobody hears themselves:
///
///     to the caller: the appliance's mic (unless muted) + the room's streams
///     to the room:   the appliance's mic (unless muted) + the caller, while bridged
///
/// (the room listened to with `roomctl listen` goes to neither: it is the appliance's alone).
/// Everything the audio thread uses for a call (encoders of every codec, rate converters) is
/// allocated with the engine, so starting a call allocates nothing on the audio thread.
public final class CallLeg: @unchecked Sendable {
    /// Received frames of the call (network thread → audio thread), timestamps on the 48 kHz
    /// media clock like every received frame. Stream them with `leg: .call` releases.
    public let incoming = SPSCRing<MediaPacket>(capacity: 256)
    /// Frames to send to the caller (audio thread → network thread), 20 ms each, timestamps on
    /// the codec's RTP clock, numbered from 0 at each call's start.
    public let outgoing = SPSCRing<MediaPacket>(capacity: 64)
    /// Woken after each frame pushed to `outgoing`. Set before the engine starts.
    public var outgoingSignal: EventSignal?
    /// Digits to send in-band, as tones in the caller's audio (`sendInBand`; daemon → audio
    /// thread). 64: a conference PIN and its passcode with room to spare.
    private let inBandDigits = SPSCRing<UInt8>(capacity: 64)

    /// The call as the daemon last set it, one word so the audio thread never sees half a
    /// change: bits 0-7 the codec's raw value + 1 (0: no call), bit 8 bridged, bits 16-47 a
    /// count of calls started (a new call restarts the encoder even with the same codec).
    private let word = Atomic<UInt64>(0)
    /// The ring's peak amplitude (Float bits; 0: not ringing).
    private let ring = Atomic<UInt32>(0)

    public init() {}

    /// Rings the speaker (`RingTone`) at `dBFS` peak, or stops with nil. The ring is part of what
    /// the speaker plays, so the canceller takes it out of what the mic sends.
    public func setRinging(dBFS: Double?) {
        let amplitude = dBFS.map { linear(fromDB: Float(min(0, $0))) } ?? 0
        ring.store(amplitude.bitPattern, ordering: .relaxed)
    }

    @inline(__always)
    var ringAmplitude: Float { Float(bitPattern: ring.load(ordering: .relaxed)) }

    /// Queues `digits` ("0-9*#A-D") to be sent as DTMF tones in the call's audio, for a far end
    /// that agreed no telephone-event (RFC 4733); while a digit sounds the caller hears it alone.
    /// All or nothing: false, and nothing queued, for another byte or when they do not fit.
    public func sendInBand(_ digits: String) -> Bool {
        let bytes = Array(digits.utf8)
        guard !bytes.isEmpty, bytes.allSatisfy({ DTMFTone.frequencies(of: $0) != nil }),
              bytes.count <= inBandDigits.availableToWrite else { return false }
        for b in bytes { _ = inBandDigits.push(b) }
        return true
    }

    @inline(__always)
    func nextInBandDigit() -> UInt8? { inBandDigits.pop() }

    /// The frame duration sent to the caller: SIP's customary 20 ms (a G.711 gateway may not
    /// take anything else; RFC 3551's default `ptime`).
    public static let frameMilliseconds = 20

    /// A call with `codec` starts: frames for it are encoded from the next block on.
    public func start(codec: AudioCodec) {
        let calls = (word.load(ordering: .relaxed) >> 16) &+ 1
        word.store((calls & 0xFFFF_FFFF) << 16 | UInt64(codec.rawValue) + 1, ordering: .releasing)
    }

    /// The call ended: nothing more is encoded for it, and it is no longer bridged.
    public func end() {
        word.store(word.load(ordering: .relaxed) & ~0xFFFF, ordering: .releasing)
    }

    /// Puts the caller into the room the appliance is in (and takes them out): the room then
    /// hears the caller through the appliance. No effect without a call.
    public func setBridged(_ on: Bool) {
        let w = word.load(ordering: .relaxed)
        word.store(on ? w | 0x100 : w & ~0x100, ordering: .releasing)
    }

    /// The codec of the call in progress, nil without one.
    public var codec: AudioCodec? { Self.codec(of: word.load(ordering: .acquiring)) }
    public var isBridged: Bool { codec != nil && word.load(ordering: .acquiring) & 0x100 != 0 }

    @inline(__always)
    func snapshot() -> UInt64 { word.load(ordering: .acquiring) }

    @inline(__always)
    static func codec(of word: UInt64) -> AudioCodec? {
        let raw = word & 0xFF
        return raw == 0 ? nil : AudioCodec(rawValue: UInt8(raw - 1))
    }

    @inline(__always)
    static func bridged(_ word: UInt64) -> Bool { codec(of: word) != nil && word & 0x100 != 0 }
}

/// The audio thread's side of the call's uplink: accumulates the caller's mix-minus a block at
/// a time into 20 ms frames and encodes them with the call's codec. Every encoder and converter
/// exists from the engine's start; a call only chooses among them.
final class CallUplink {
    private let leg: CallLeg
    private let frameSamples: Int
    private let opus: OpusEncoderBox
    private let g722 = G722Encoder()
    /// The engine rate to G.711's 8 kHz and G.722's 16 kHz.
    private let toNarrow: RateConverter
    private let toWide: RateConverter
    private let frame: UnsafeMutablePointer<Float>
    private var fill = 0
    private let rate: Int
    private var dtmf: DTMFTone
    private let converted: UnsafeMutablePointer<Float>
    private let samples: UnsafeMutablePointer<Int16>
    private var packet = MediaPacket()
    /// The leg's word this uplink last acted on.
    private var applied: UInt64 = 0

    init(leg: CallLeg, rate: Int) throws(OpusError) {
        self.leg = leg
        frameSamples = rate * CallLeg.frameMilliseconds / 1000
        // 64 kb/s with in-band FEC for 5 % loss (no RTCP from the far end yet, so nothing to
        // adapt to), the full band allowed: PESQ-WB of the appliance's talker at a baresip caller
        // 3.83 (espeak-ng's voice) and 3.86 (a recorded voice); capped at wideband it was 3.94
        // and 3.06 — SILK alone on the recorded voice — and at 32 kb/s 3.27 (`scripts/bench
        // call`, CALL_VOICES=natural; docs/benchmarks.md "call").
        var settings = OpusSettings()
        settings.bitrate = 64_000
        settings.maxBandwidth = .full
        settings.frameMilliseconds = CallLeg.frameMilliseconds
        settings.dtx = false
        settings.voiceGate = false
        settings.adaptToLoss = false
        opus = try OpusEncoderBox(rate: rate, settings: settings, environment: false)
        // Every engine rate (8, 16, 48 kHz) is a whole multiple or divisor of both.
        toNarrow = RateConverter(from: rate, to: 8000)!
        toWide = RateConverter(from: rate, to: 16_000)!
        self.rate = rate
        dtmf = DTMFTone(rate: rate)
        frame = .allocate(capacity: frameSamples)
        frame.initialize(repeating: 0, count: frameSamples)
        let most = max(toNarrow.outputCapacity(forInput: frameSamples), toWide.outputCapacity(forInput: frameSamples))
        converted = .allocate(capacity: most)
        converted.initialize(repeating: 0, count: most)
        samples = .allocate(capacity: most)
        samples.initialize(repeating: 0, count: most)
    }

    deinit {
        frame.deallocate()
        converted.deallocate()
        samples.deallocate()
    }

    /// The codec of the call now, having restarted the encoders if a new call began.
    @inline(__always)
    func follow() -> (codec: AudioCodec?, bridged: Bool) {
        let word = leg.snapshot()
        if word >> 16 != applied >> 16 || CallLeg.codec(of: word) != CallLeg.codec(of: applied) {
            _ = opus.reset()
            g722.reset()
            toNarrow.reset()
            toWide.reset()
            fill = 0
            while leg.nextInBandDigit() != nil {}   // the last call's digits are not this one's
            dtmf = DTMFTone(rate: rate)
            packet = MediaPacket()
            if let codec = CallLeg.codec(of: word) { packet.codec = codec }
        }
        applied = word
        return (CallLeg.codec(of: word), CallLeg.bridged(word))
    }

    /// Adds one block of the caller's mix to the frame; each full frame is encoded and queued.
    /// While an in-band digit sounds, the frame holds its tone instead of the mix.
    func take(_ block: UnsafePointer<Float>, count: Int, codec: AudioCodec) {
        var offset = 0
        while offset < count {
            var n = min(count - offset, frameSamples - fill)
            if !dtmf.isSending, let digit = leg.nextInBandDigit() { _ = dtmf.start(digit) }
            if dtmf.isSending {
                n = dtmf.write(into: frame + fill, count: n)
            } else {
                (frame + fill).update(from: block + offset, count: n)
            }
            fill += n
            offset += n
            guard fill == frameSamples else { continue }
            fill = 0
            encode(codec)
        }
    }

    private func encode(_ codec: AudioCodec) {
        let length: Int = withUnsafeMutableBytes(of: &packet.payload) { raw in
            let out = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            switch codec {
            case .opus:
                return opus.encode(frame, into: out, capacity: MediaPacket.maxPayload)
            case .pcmu, .pcma:
                let n = narrowSamples(toNarrow)
                for i in 0..<n { out[i] = codec == .pcmu ? G711.muLaw(fromLinear: samples[i]) : G711.aLaw(fromLinear: samples[i]) }
                return n
            case .g722:
                let n = narrowSamples(toWide)
                return g722.encode(samples, count: n, into: out)
            }
        }
        let ticks = UInt32(codec.rtpClockRate * CallLeg.frameMilliseconds / 1000)
        if length > 0 {
            packet.length = UInt16(length)
            // A full ring (the network thread stalled) drops the frame: the caller conceals it.
            if leg.outgoing.push(packet) { leg.outgoingSignal?.signal() }
            packet.sequenceNumber &+= 1
        }
        packet.timestamp &+= ticks
    }

    /// The frame at a telephone codec's rate, as 16-bit samples in `samples`; returns the count.
    private func narrowSamples(_ converter: RateConverter) -> Int {
        let n = converter.process(frame, count: frameSamples, into: converted)
        for i in 0..<n { samples[i] = SampleConversion.int16(fromFloat: converted[i], scale: SampleConversion.outputScale) }
        return n
    }
}
