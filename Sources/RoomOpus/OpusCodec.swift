import COpus
import RoomSystem

public struct OpusError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ what: String, _ code: Int32) { description = "opus: \(what): \(String(cString: opus_strerror(code)))" }
    init(_ message: String) { description = message }
}

/// The audio band Opus codes (OPUS_SET_MAX_BANDWIDTH): narrowband 4 kHz, mediumband 6 kHz,
/// wideband 8 kHz, super-wideband 12 kHz, full band 20 kHz.
public enum OpusBandwidth: String, Sendable, CaseIterable {
    case narrow = "nb", medium = "mb", wide = "wb", superwide = "swb", full = "fb"

    var ctlValue: Int32 {
        switch self {
        case .narrow: copus_bandwidth_narrowband()
        case .medium: copus_bandwidth_mediumband()
        case .wide: copus_bandwidth_wideband()
        case .superwide: copus_bandwidth_superwideband()
        case .full: copus_bandwidth_fullband()
        }
    }

    init?(ctlValue: Int32) {
        guard let b = OpusBandwidth.allCases.first(where: { $0.ctlValue == ctlValue }) else { return nil }
        self = b
    }

    /// The highest audio frequency the band carries, Hz.
    public var topHz: Int {
        switch self {
        case .narrow: 4000
        case .medium: 6000
        case .wide: 8000
        case .superwide: 12000
        case .full: 20000
        }
    }
}

/// Opus settings for a voice room: VOIP mode, in-band FEC (the receiver rebuilds a lost packet
/// from the next one) and DTX (silence costs almost nothing on the wire).
///
/// The defaults are what `scripts/bench quality` measured best for speech as a listener hears it
/// (PESQ-WB end to end at 0-20 % loss; docs/audio-engine.md, "Codec settings"): wideband (8 kHz
/// audio band: the bits a 12 kHz band would spend above 8 kHz are taken from the speech band,
/// which costs more than the extra band gives at these rates), 96 kb/s so the SILK layer has room
/// for its in-band FEC copy, and FEC tuned for a few percent loss.
public struct OpusSettings: Sendable, Equatable {
    public var bitrate: Int32 = 96000
    public var maxBandwidth: OpusBandwidth = .wide
    public var complexity: Int32 = 5
    public var frameMilliseconds = 10
    public var inbandFEC = true
    /// What the FEC copy protects against until the listeners report (`LossAdaptation`).
    public var expectedLossPercent: Int32 = 5
    /// Follow the listeners' loss reports: FEC sized to the loss they see, none (and
    /// `cleanNetworkBitrate`) while they lose nothing. `ROOMD_OPUS` `adapt=0` fixes it.
    public var adaptToLoss = true
    /// Speech's bitrate while the FEC copy is off (`LossAdaptation`). 96 kb/s because that
    /// is where the transform layer (below) codes speech as well as SILK did at 64 kb/s
    /// (docs/audio-engine.md, "Clean network: the transform layer").
    public var cleanNetworkBitrate: Int32 = 96000
    /// While the FEC copy is off, let libopus code speech in its transform layer (CELT, chosen
    /// through the signal hint) instead of SILK: FEC is SILK's alone, and without it SILK is
    /// the expensive choice — measured 2.4x the encode time of CELT at complexity 5 for a lower
    /// PESQ-WB (docs/audio-engine.md). `ROOMD_OPUS` `clean_celt=0` keeps SILK.
    public var cleanNetworkTransform = true
    /// The complexity while coding in the transform layer on a clean network. 0: at 96 kb/s
    /// the transform layer's search tools (pitch pre-filter from 5, spreading and time-frequency
    /// decisions from 2-3, transient detection from 1) buy speech nothing a listener scores —
    /// `quality.pesq_0` 4.138 / 4.127 at 0 against 4.117 / 4.124 / 4.106 at 5, codec alone 4.58
    /// against 4.56 — and cost more than half the encode time (28.6 -> 13.2 µs per 10 ms frame;
    /// docs/audio-engine.md, "Clean network: the transform layer"). SILK keeps `complexity`.
    public var cleanNetworkComplexity: Int32 = 0
    public var dtx = true
    public var vbr = true
    /// Send only while the APM hears voice (plus hangover); off: send every frame the encoder
    /// does not mark as DTX. Speech profile only.
    public var voiceGate = true
    public var music = false
    public init() {}

    /// `ROOMD_OPUS`: measurement overrides, e.g. `ROOMD_OPUS="bitrate=32000,bandwidth=swb,fec=0"`
    /// (docs/audio-engine.md, "Codec settings"). Keys: bitrate (6000-510000), bandwidth
    /// (nb, mb, wb, swb, fb), complexity (0-10), fec (0/1), loss (0-100), adapt (0/1: follow the
    /// listeners' loss reports), clean_bitrate (6000-510000), clean_celt (0/1), clean_complexity (0-10),
    /// dtx (0/1), vbr (0/1), gate (0/1). The frame size is not among them: the receive side must agree
    /// (`--opus-frame`).
    public static let environmentVariable = "ROOMD_OPUS"

    /// These settings with `spec`'s overrides applied; throws naming the key on bad input.
    public func overridden(by spec: String) throws(OpusError) -> OpusSettings {
        var s = self
        for item in spec.split(separator: ",") {
            let kv = item.split(separator: "=", maxSplits: 1).map { String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()) }
            guard kv.count == 2, !kv[0].isEmpty else { throw OpusError("\(Self.environmentVariable): \"\(item)\" is not key=value") }
            let key = kv[0], value = kv[1]
            func number(_ range: ClosedRange<Int32>) throws(OpusError) -> Int32 {
                guard let n = Int32(value), range.contains(n) else {
                    throw OpusError("\(Self.environmentVariable): \(key)=\(value) is not in \(range.lowerBound)...\(range.upperBound)")
                }
                return n
            }
            switch key {
            case "bitrate": s.bitrate = try number(6000...510_000)
            case "bandwidth":
                guard let b = OpusBandwidth(rawValue: value) else { throw OpusError("\(Self.environmentVariable): bandwidth=\(value) (nb, mb, wb, swb or fb)") }
                s.maxBandwidth = b
            case "complexity": s.complexity = try number(0...10)
            case "fec": s.inbandFEC = try number(0...1) == 1
            case "loss": s.expectedLossPercent = try number(0...100)
            case "adapt": s.adaptToLoss = try number(0...1) == 1
            case "clean_bitrate": s.cleanNetworkBitrate = try number(6000...510_000)
            case "clean_celt": s.cleanNetworkTransform = try number(0...1) == 1
            case "clean_complexity": s.cleanNetworkComplexity = try number(0...10)
            case "dtx": s.dtx = try number(0...1) == 1
            case "vbr": s.vbr = try number(0...1) == 1
            case "gate": s.voiceGate = try number(0...1) == 1
            default: throw OpusError("\(Self.environmentVariable): unknown key \(key) (bitrate, bandwidth, complexity, fec, loss, adapt, clean_bitrate, clean_celt, clean_complexity, dtx, vbr, gate)")
            }
        }
        return s
    }

    /// The expected-loss setting (OPUS_SET_PACKET_LOSS_PERC) for the loss the receivers report,
    /// for the day they report it (docs/audio-engine.md, "Loss-driven FEC"): 0 — no FEC copy
    /// at all, libopus sends none at 0 % — while the network is clean (below 1 %, or below 0.5 %
    /// once FEC is on, so it does not flap), otherwise the reported loss clamped to 3...10 %
    /// (measured: below 3 % the copy is too coarse to help at 5-10 % loss, above 10 % it takes
    /// bits from the primary frames without rebuilding more). `current` is what is set now.
    public static func expectedLoss(forReportedLoss percent: Double, current: Int32) -> Int32 {
        let off = current > 0 ? percent < 0.5 : percent < 1
        if off || !percent.isFinite { return 0 }
        return Int32(max(3, min(10, percent.rounded())))
    }

    /// These settings with `ROOMD_OPUS` applied when it is set.
    public func withEnvironmentOverrides() throws(OpusError) -> OpusSettings {
        guard let spec = Environment.get(Self.environmentVariable), !spec.isEmpty else { return self }
        return try overridden(by: spec)
    }
}

/// The coding layer of an Opus packet, from its TOC byte (RFC 6716 §3.1: configurations 0-11
/// SILK, 12-15 hybrid, 16-31 CELT). What the encoder chose, which the signal hint only steers.
public enum OpusLayer: Int, Sendable {
    case silk = 0, hybrid = 1, celt = 2

    @inline(__always)
    public init(toc: UInt8) {
        let config = toc >> 3
        self = config < 12 ? .silk : config < 16 ? .hybrid : .celt
    }

    public var name: String {
        switch self {
        case .silk: "silk"
        case .hybrid: "hybrid"
        case .celt: "celt"
        }
    }
}

/// What an encoder is configured with, read back through libopus's getters (tests, diagnostics).
public struct OpusEncoderReadback: Sendable, Equatable {
    public var bitrate: Int32
    public var maxBandwidth: OpusBandwidth?
    public var complexity: Int32
    public var inbandFEC: Bool
    public var expectedLossPercent: Int32
    public var dtx: Bool
    public var vbr: Bool
    public var music: Bool

    public init(bitrate: Int32, maxBandwidth: OpusBandwidth?, complexity: Int32, inbandFEC: Bool,
                expectedLossPercent: Int32, dtx: Bool, vbr: Bool, music: Bool) {
        self.bitrate = bitrate
        self.maxBandwidth = maxBandwidth
        self.complexity = complexity
        self.inbandFEC = inbandFEC
        self.expectedLossPercent = expectedLossPercent
        self.dtx = dtx
        self.vbr = vbr
        self.music = music
    }
}

/// Rates Opus encodes natively; the board rate must be one of them (no resampler in the loop).
public let opusRates: Set<Int> = [8000, 12000, 16000, 24000, 48000]

/// Everything a profile sets on a running encoder (`OpusEncoderBox.apply(_:)`). The engine's
/// audio profile (speech or music, RoomAudio's `AudioProfileSettings`) decides the values; the
/// adapter only knows which ctl each one is.
public struct OpusEncoderConfiguration: Sendable, Equatable {
    public var bitrate: Int32
    public var bandwidth: OpusBandwidth
    /// OPUS_SIGNAL_MUSIC rather than OPUS_SIGNAL_VOICE.
    public var music: Bool
    public var dtx: Bool
    public var inbandFEC: Bool
    public var expectedLossPercent: Int32
    public var complexity: Int32
    public var vbr: Bool

    public init(bitrate: Int32, bandwidth: OpusBandwidth, music: Bool, dtx: Bool, inbandFEC: Bool,
                expectedLossPercent: Int32, complexity: Int32, vbr: Bool) {
        self.bitrate = bitrate
        self.bandwidth = bandwidth
        self.music = music
        self.dtx = dtx
        self.inbandFEC = inbandFEC
        self.expectedLossPercent = expectedLossPercent
        self.complexity = complexity
        self.vbr = vbr
    }
}

/// What RoomAudio's `LossAdaptation` sets on the encoder (`OpusEncoderBox.apply(_:)`).
public struct EncoderCoding: Sendable, Equatable {
    public var bitrate: Int32
    public var expectedLossPercent: Int32
    /// OPUS_SIGNAL_MUSIC (transform layer) rather than OPUS_SIGNAL_VOICE (SILK).
    public var musicSignal: Bool
    public var complexity: Int32

    public init(bitrate: Int32, expectedLossPercent: Int32, musicSignal: Bool, complexity: Int32) {
        self.bitrate = bitrate
        self.expectedLossPercent = expectedLossPercent
        self.musicSignal = musicSignal
        self.complexity = complexity
    }
}

/// The duration of an Opus packet in samples at `sampleRate`, from its TOC byte and frame
/// count (`opus_packet_get_nb_samples`); negative for a malformed packet. Reads the packet,
/// allocates nothing: the receive path sizes jitter-buffer slots with it.
public func opusPacketSamples(_ payload: UnsafeRawBufferPointer, sampleRate: Int) -> Int {
    guard let base = payload.baseAddress, payload.count > 0 else { return 0 }
    return Int(opus_packet_get_nb_samples(base.assumingMemoryBound(to: UInt8.self), Int32(payload.count), Int32(sampleRate)))
}

public final class OpusEncoderBox {
    /// The application the settings ask for (VOIP; AUDIO for a music encoder): SILK and its
    /// in-band FEC copy, and the transform layer behind 4 ms of look-ahead that lets libopus
    /// switch between the two without a seam (6.5 ms in all).
    private let encoder: OpaquePointer
    /// RESTRICTED_LOWDELAY: the transform layer alone, 2.5 ms of look-ahead. Codes what the
    /// main encoder codes while the network is clean (`EncoderCoding`: the transform layer, no
    /// FEC copy), 4 ms sooner; nil unless asked for (`lowDelay`; the engine asks unless
    /// `ROOMD_OPUS_LOW_DELAY=off`). docs/audio-engine.md, "4 ms of look-ahead less on a clean network".
    private let lowDelay: OpaquePointer?
    /// The encoder that codes the next frame: `encoder` or `lowDelay`.
    private var active: OpaquePointer
    /// The encoder the last coding applied asks for; `switchEncoder()` makes it `active`.
    private var wanted: OpaquePointer
    public let rate: Int
    public let frameSamples: Int
    /// What the encoder was created with (after `ROOMD_OPUS`).
    public let settings: OpusSettings

    /// `settings` with `ROOMD_OPUS`'s overrides applied (`environment: false` ignores it and
    /// `ROOMD_OPUS_LOW_DELAY`). `lowDelay`: also make the clean network's low-delay encoder (an
    /// encoder whose coding never changes, such as a call leg's, has no use for it).
    public init(rate: Int, settings requested: OpusSettings, environment: Bool = true, lowDelay asked: Bool = false) throws(OpusError) {
        guard opusRates.contains(rate) else { throw OpusError("rate \(rate)", OPUS_BAD_ARG) }
        guard requested.frameMilliseconds == 10 || requested.frameMilliseconds == 20 else {
            throw OpusError("frame of \(requested.frameMilliseconds) ms (10 or 20)", OPUS_BAD_ARG)
        }
        let settings = environment ? try requested.withEnvironmentOverrides() : requested
        var makeLowDelay = asked
        if asked, environment, let v = Environment.get(Self.lowDelayEnvironmentVariable) {
            guard v == "on" || v == "off" else { throw OpusError("\(Self.lowDelayEnvironmentVariable)=\(v): on or off") }
            makeLowDelay = v == "on"
        }
        var rc: Int32 = 0
        let app = settings.music ? copus_application_audio() : copus_application_voip()
        guard let e = opus_encoder_create(Int32(rate), 1, app, &rc), rc == OPUS_OK else { throw OpusError("encoder_create", rc) }
        var low: OpaquePointer?
        if makeLowDelay {
            guard let l = opus_encoder_create(Int32(rate), 1, copus_application_restricted_lowdelay(), &rc), rc == OPUS_OK else {
                opus_encoder_destroy(e)
                throw OpusError("encoder_create (low delay)", rc)
            }
            low = l
        }
        encoder = e
        lowDelay = low
        active = e
        wanted = e
        self.rate = rate
        self.settings = settings
        frameSamples = rate * settings.frameMilliseconds / 1000
        // Every stored property is set: a throw from here on runs deinit, which destroys both.
        for (x, label) in [(e, ""), (low, " (low delay)")] {
            guard let x else { continue }
            func check(_ r: Int32, _ what: String) throws(OpusError) {
                if r != OPUS_OK { throw OpusError(what + label, r) }
            }
            try check(copus_set_bitrate(x, settings.bitrate), "bitrate \(settings.bitrate)")
            try check(copus_set_max_bandwidth(x, settings.maxBandwidth.ctlValue), "max bandwidth \(settings.maxBandwidth.rawValue)")
            try check(copus_set_complexity(x, settings.complexity), "complexity \(settings.complexity)")
            try check(copus_set_inband_fec(x, settings.inbandFEC ? 1 : 0), "in-band FEC")
            try check(copus_set_packet_loss_perc(x, settings.expectedLossPercent), "expected loss")
            try check(copus_set_dtx(x, settings.dtx ? 1 : 0), "DTX")
            try check(copus_set_vbr(x, settings.vbr ? 1 : 0), "VBR")
            try check(settings.music ? copus_set_signal_music(x) : copus_set_signal_voice(x), "signal type")
        }
    }

    deinit {
        opus_encoder_destroy(encoder)
        if let lowDelay { opus_encoder_destroy(lowDelay) }
    }

    /// `ROOMD_OPUS_LOW_DELAY=off`: the main encoder codes the clean network too (6.5 ms of
    /// look-ahead instead of 2.5), a measurement override like ROOMD_OPUS.
    public static let lowDelayEnvironmentVariable = "ROOMD_OPUS_LOW_DELAY"

    /// The encoder the last coding asks for is not the one coding: the caller switches
    /// (`switchEncoder`) where the 4 ms between the two encoders' look-aheads cannot be heard —
    /// a frame the voice gate holds back, a stream's restart.
    public var switchPending: Bool { wanted != active }

    /// The low-delay encoder codes the frames (the network is clean).
    public var codingWithLowDelay: Bool { active == lowDelay }

    /// Makes the encoder the last coding asks for the one that codes, starting it as a stream's
    /// first frame (OPUS_RESET_STATE: nothing predicted from audio it never coded). Allocates nothing.
    public func switchEncoder() {
        guard switchPending else { return }
        active = wanted
        _ = copus_encoder_reset(active)
    }

    /// The coding encoder's look-ahead, samples at `rate` (OPUS_GET_LOOKAHEAD).
    public var lookaheadSamples: Int {
        var v: Int32 = 0
        return copus_get_lookahead(active, &v) == OPUS_OK ? Int(v) : -1
    }

    /// Retunes the running encoder for an audio profile: bitrate, audio band, signal type, DTX,
    /// FEC and its expected loss, complexity, VBR. The application mode (VOIP) cannot change
    /// after the first frame in libopus, so the signal-type hint carries the speech/music
    /// choice. On the audio thread, between frames: ctl calls only, nothing allocated.
    public func apply(_ p: OpusEncoderConfiguration) -> Int32 {
        want(lowDelay: p.music && p.expectedLossPercent == 0)
        return onBoth { apply(p, to: $0) }
    }

    /// The transform layer without a FEC copy is the low-delay encoder's (when there is one).
    private func want(lowDelay transformOnly: Bool) {
        wanted = transformOnly ? lowDelay ?? encoder : encoder
    }

    /// `body` on each encoder (they are configured alike); the first error, the main one's first.
    /// A non-escaping closure: nothing allocated.
    private func onBoth(_ body: (OpaquePointer) -> Int32) -> Int32 {
        let low = lowDelay.map(body) ?? OPUS_OK
        let main = body(encoder)
        return main != OPUS_OK ? main : low
    }

    private func apply(_ p: OpusEncoderConfiguration, to encoder: OpaquePointer) -> Int32 {
        // One call after another, no array of results: this runs on the audio thread, where
        // even a four-element array literal is a heap allocation in a debug build.
        var rc = copus_set_bitrate(encoder, p.bitrate)
        if rc == OPUS_OK { rc = copus_set_max_bandwidth(encoder, p.bandwidth.ctlValue) }
        if rc == OPUS_OK { rc = p.music ? copus_set_signal_music(encoder) : copus_set_signal_voice(encoder) }
        if rc == OPUS_OK { rc = copus_set_dtx(encoder, p.dtx ? 1 : 0) }
        if rc == OPUS_OK { rc = copus_set_inband_fec(encoder, p.inbandFEC ? 1 : 0) }
        if rc == OPUS_OK { rc = copus_set_packet_loss_perc(encoder, p.expectedLossPercent) }
        if rc == OPUS_OK { rc = copus_set_complexity(encoder, p.complexity) }
        if rc == OPUS_OK { rc = copus_set_vbr(encoder, p.vbr ? 1 : 0) }
        return rc
    }

    /// Tells the encoder how much loss to protect against (OPUS_SET_PACKET_LOSS_PERC): the
    /// hook for loss the receivers report. 0 switches the FEC copy off (libopus sends none
    /// at 0 %), so a clean network pays no FEC tax. On the audio thread, between frames.
    @inline(__always)
    public func setExpectedLoss(percent: Int32) -> Int32 {
        if percent > 0 { want(lowDelay: false) }   // protection is the main encoder's
        return onBoth { copus_set_packet_loss_perc($0, max(0, min(100, percent))) }
    }

    /// The clean-network or protected coding (`LossAdaptation.coding(for:)`): target bitrate,
    /// expected loss, the signal hint that picks the transform layer or SILK, and complexity.
    /// On the audio thread, between frames: ctl calls only, nothing allocated.
    /// The transform layer without a FEC copy is what the low-delay encoder codes: the coding
    /// asks for it then (made active by `switchEncoder`).
    public func apply(_ c: EncoderCoding) -> Int32 {
        want(lowDelay: c.musicSignal && c.expectedLossPercent == 0)
        return onBoth { apply(c, to: $0) }
    }

    private func apply(_ c: EncoderCoding, to encoder: OpaquePointer) -> Int32 {
        var rc = copus_set_packet_loss_perc(encoder, max(0, min(100, c.expectedLossPercent)))
        if rc == OPUS_OK { rc = copus_set_bitrate(encoder, c.bitrate) }
        if rc == OPUS_OK { rc = c.musicSignal ? copus_set_signal_music(encoder) : copus_set_signal_voice(encoder) }
        if rc == OPUS_OK { rc = copus_set_complexity(encoder, c.complexity) }
        return rc
    }

    /// The encoder's configuration, read back through libopus's getters (`lowDelay`: the clean
    /// network's encoder's, when there is one).
    public func readBack(lowDelay readLowDelay: Bool = false) -> OpusEncoderReadback {
        let encoder = readLowDelay ? lowDelay ?? self.encoder : self.encoder
        var bitrate: Int32 = 0, band: Int32 = 0, complexity: Int32 = 0, fec: Int32 = 0, loss: Int32 = 0
        var dtx: Int32 = 0, vbr: Int32 = 0, signal: Int32 = 0
        _ = copus_get_bitrate(encoder, &bitrate)
        _ = copus_get_max_bandwidth(encoder, &band)
        _ = copus_get_complexity(encoder, &complexity)
        _ = copus_get_inband_fec(encoder, &fec)
        _ = copus_get_packet_loss_perc(encoder, &loss)
        _ = copus_get_dtx(encoder, &dtx)
        _ = copus_get_vbr(encoder, &vbr)
        _ = copus_get_signal(encoder, &signal)
        return OpusEncoderReadback(bitrate: bitrate, maxBandwidth: OpusBandwidth(ctlValue: band), complexity: complexity,
                                   inbandFEC: fec != 0, expectedLossPercent: loss, dtx: dtx != 0, vbr: vbr != 0,
                                   music: signal == copus_signal_music())
    }

    /// The audio band of the last frame encoded (the encoder may choose less than the maximum).
    public var lastBandwidth: OpusBandwidth? {
        var v: Int32 = 0
        return copus_get_bandwidth(active, &v) == OPUS_OK ? OpusBandwidth(ctlValue: v) : nil
    }

    /// Encodes one frame; returns the packet length (> 0), or a negative Opus error code.
    @inline(__always)
    public func encode(_ pcm: UnsafePointer<Float>, into packet: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int {
        Int(opus_encode_float(active, pcm, Int32(frameSamples), packet, Int32(capacity)))
    }

    /// Forgets the signal so far (OPUS_RESET_STATE; allocates nothing): the next frame is coded
    /// as the first of a stream, not predicted from audio that was never sent.
    @discardableResult
    public func reset() -> Int32 { copus_encoder_reset(active) }

    /// True when the encoder decided the last frame was silence it need not send (DTX).
    @inline(__always)
    public var inDTX: Bool {
        var v: Int32 = 0
        return copus_get_in_dtx(active, &v) == OPUS_OK && v != 0
    }
}

public final class OpusDecoderBox {
    private let decoder: OpaquePointer
    var decoderHandle: OpaquePointer { decoder }
    public let rate: Int

    public init(rate: Int) throws(OpusError) {
        var rc: Int32 = 0
        guard opusRates.contains(rate) else { throw OpusError("rate \(rate)", OPUS_BAD_ARG) }
        guard let d = opus_decoder_create(Int32(rate), 1, &rc), rc == OPUS_OK else { throw OpusError("decoder_create", rc) }
        decoder = d
        self.rate = rate
    }

    deinit { opus_decoder_destroy(decoder) }

    /// Decodes a packet into `frames` samples; returns samples decoded or a negative error.
    @inline(__always)
    public func decode(_ packet: UnsafePointer<UInt8>, length: Int, into pcm: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        Int(opus_decode_float(decoder, packet, Int32(length), pcm, Int32(frames), 0))
    }

    /// Rebuilds a lost frame from the in-band FEC data carried by the packet that followed it.
    @inline(__always)
    public func decodeFEC(from nextPacket: UnsafePointer<UInt8>, length: Int, into pcm: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        Int(opus_decode_float(decoder, nextPacket, Int32(length), pcm, Int32(frames), 1))
    }

    /// Packet-loss concealment: synthesizes `frames` samples continuing the last decoded audio.
    @inline(__always)
    public func conceal(into pcm: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        Int(opus_decode_float(decoder, nil, 0, pcm, Int32(frames), 0))
    }
}

extension OpusDecoderBox {
    /// Forgets the previous stream's state when a slot is given to a new sender.
    public func reset() -> Int32 { copus_decoder_reset(decoderHandle) }
}
