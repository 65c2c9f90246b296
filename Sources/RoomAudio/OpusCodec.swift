import COpus

public struct OpusError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ what: String, _ code: Int32) { description = "opus: \(what): \(String(cString: opus_strerror(code)))" }
}

/// Opus settings for a voice room: VOIP mode, in-band FEC (the receiver rebuilds a lost packet
/// from the next one) and DTX (silence costs almost nothing on the wire).
public struct OpusSettings: Sendable, Equatable {
    public var bitrate: Int32 = 24000
    public var complexity: Int32 = 5
    public var frameMilliseconds = 10
    public var inbandFEC = true
    public var expectedLossPercent: Int32 = 10
    public var dtx = true
    public var music = false
    public init() {}
}

/// Rates Opus encodes natively; the board rate must be one of them (no resampler in the loop).
public let opusRates: Set<Int> = [8000, 12000, 16000, 24000, 48000]

public final class OpusEncoderBox {
    private let encoder: OpaquePointer
    public let rate: Int
    public let frameSamples: Int

    public init(rate: Int, settings: OpusSettings) throws(OpusError) {
        guard opusRates.contains(rate) else { throw OpusError("rate \(rate)", OPUS_BAD_ARG) }
        guard settings.frameMilliseconds == 10 || settings.frameMilliseconds == 20 else {
            throw OpusError("frame of \(settings.frameMilliseconds) ms (10 or 20)", OPUS_BAD_ARG)
        }
        var rc: Int32 = 0
        let app = settings.music ? copus_application_audio() : copus_application_voip()
        guard let e = opus_encoder_create(Int32(rate), 1, app, &rc), rc == OPUS_OK else { throw OpusError("encoder_create", rc) }
        encoder = e
        self.rate = rate
        frameSamples = rate * settings.frameMilliseconds / 1000
        func check(_ r: Int32, _ what: String) throws(OpusError) { if r != OPUS_OK { opus_encoder_destroy(e); throw OpusError(what, r) } }
        try check(copus_set_bitrate(e, settings.bitrate), "bitrate \(settings.bitrate)")
        try check(copus_set_complexity(e, settings.complexity), "complexity \(settings.complexity)")
        try check(copus_set_inband_fec(e, settings.inbandFEC ? 1 : 0), "in-band FEC")
        try check(copus_set_packet_loss_perc(e, settings.expectedLossPercent), "expected loss")
        try check(copus_set_dtx(e, settings.dtx ? 1 : 0), "DTX")
        try check(settings.music ? copus_set_signal_music(e) : copus_set_signal_voice(e), "signal type")
    }

    deinit { opus_encoder_destroy(encoder) }

    /// Retunes the running encoder for an audio profile: bitrate, audio band, signal type and
    /// DTX. The application mode (VOIP) cannot change after the first frame in libopus, so the
    /// signal-type hint carries the speech/music choice. On the audio thread, between frames.
    public func apply(_ p: AudioProfileSettings) -> Int32 {
        // One call after another, no array of results: this runs on the audio thread, where
        // even a four-element array literal is a heap allocation in a debug build.
        var rc = copus_set_bitrate(encoder, p.bitrate)
        if rc == OPUS_OK { rc = copus_set_max_bandwidth(encoder, p.fullBand ? copus_bandwidth_fullband() : copus_bandwidth_superwideband()) }
        if rc == OPUS_OK { rc = p.music ? copus_set_signal_music(encoder) : copus_set_signal_voice(encoder) }
        if rc == OPUS_OK { rc = copus_set_dtx(encoder, p.dtx ? 1 : 0) }
        return rc
    }

    /// Encodes one frame; returns the packet length (> 0), or a negative Opus error code.
    @inline(__always)
    public func encode(_ pcm: UnsafePointer<Float>, into packet: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int {
        Int(opus_encode_float(encoder, pcm, Int32(frameSamples), packet, Int32(capacity)))
    }

    /// True when the encoder decided the last frame was silence it need not send (DTX).
    @inline(__always)
    public var inDTX: Bool {
        var v: Int32 = 0
        return copus_get_in_dtx(encoder, &v) == OPUS_OK && v != 0
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
