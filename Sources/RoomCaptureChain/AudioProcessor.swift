import CCaptureChain

/// Which echo canceller runs when `echoCancel` is on.
public enum EchoCanceller: String, Sendable, Equatable, CaseIterable {
    /// roomd's own (Sources/CCaptureChain/kalman_aec.h), the default: a frequency-domain adaptive
    /// filter whose step size comes from a Kalman model of the echo path, then a residual echo
    /// suppressor driven by that model's error covariance; it runs in front of webrtc's HPF, NS,
    /// AGC and VAD (webrtc's AEC off). Keeps the room's talker while the far end speaks
    /// (PESQ-WB 3.50 in double talk against webrtc's 1.08; docs/echo-canceller.md). It learns
    /// from broadband sound only, which is why `roomctl selftest` measures echo with a noise
    /// burst rather than a sweep.
    case kalman
    /// webrtc-audio-processing 0.3's AEC (extended filter, delay-agnostic), the default before
    /// issue 9 and kept as the way back. Its non-linear processor mutes the near-end talker
    /// during double talk (PESQ-WB 1.06-1.12 in `scripts/bench doubletalk`); `roomctl selftest`
    /// fails it on double talk (17-26 dB of the test talker lost on the sim board).
    case webrtc

    /// `ROOMD_ECHO_CANCELLER=kalman|webrtc` picks the canceller for one run of roomd (a
    /// measurement override, like ROOMD_OPUS; `webrtc` for comparisons).
    public static let environmentVariable = "ROOMD_ECHO_CANCELLER"
}

/// Where noise suppression runs when roomd's own canceller (`EchoCanceller.kalman`) is on.
public enum NoiseSuppressor: String, Sendable, Equatable, CaseIterable {
    /// Inside the canceller's residual echo suppressor (Sources/CCaptureChain/spectral_ns.h): a
    /// noise gain per bin multiplied into the echo gains, in the same 2 ms overlap-add — no
    /// delay of its own. webrtc's NS adds 7 ms to the capture path (`scripts/bench apm`).
    case canceller
    /// webrtc-audio-processing's NS after the canceller (the only choice with webrtc's AEC).
    case webrtc

    /// `ROOMD_NOISE_SUPPRESSOR=canceller|webrtc`: a measurement override for one run of roomd,
    /// like ROOMD_ECHO_CANCELLER (`scripts/bench noise` compares the two).
    public static let environmentVariable = "ROOMD_NOISE_SUPPRESSOR"
}

/// Where webrtc's HPF, AGC and VAD (and its NS, when chosen) run behind roomd's canceller.
public enum WebRTCBand: String, Sendable, Equatable, CaseIterable {
    /// On the band below 8 kHz at 16 kHz, the canceller's output decimated and the changes
    /// merged back (Sources/CCaptureChain/band_split.h): at 48 kHz, webrtc's three-band split
    /// costs more than the stages it feeds. Needs roomd's canceller, no beamformer, 48 kHz.
    case low
    /// At the card's rate, as webrtc-audio-processing does it (the way back; with webrtc's AEC
    /// or the beamformer it is the only choice).
    case full

    /// `ROOMD_WEBRTC_BAND=low|full`: a measurement override, like ROOMD_ECHO_CANCELLER.
    public static let environmentVariable = "ROOMD_WEBRTC_BAND"
}

/// Which stages of the dereverberation run with the array (dereverb.h).
public enum Dereverberation: String, Sendable, Equatable, CaseIterable {
    /// WPE below 4 kHz, then late-reverberation suppression (the default).
    case both
    /// Each stage alone, or neither: for measurement.
    case wpe, late, off

    var mask: Int32 { self == .both ? 3 : self == .wpe ? 1 : self == .late ? 2 : 0 }

    /// `ROOMD_DEREVERB=both|wpe|late|off`: a measurement override, like ROOMD_ECHO_CANCELLER.
    public static let environmentVariable = "ROOMD_DEREVERB"
}

/// What the echo canceller and friends should do. Every switch is explicit so that a
/// configuration file or a test can see — and a reader can check — that AEC is really on.
public struct ProcessingSettings: Sendable, Equatable {
    public var highPass = true
    public var echoCancel = true
    public var echoCanceller: EchoCanceller = .kalman
    /// The echo path roomd's canceller covers (system delay + room reverberation), ms.
    public var echoTailMilliseconds: Int32 = 300
    /// webrtc's AEC only.
    public var extendedFilter = true
    /// webrtc's AEC only.
    public var delayAgnostic = true
    /// Residual echo suppression: 0 low, 1 moderate, 2 high (either canceller).
    public var echoSuppression: Int32 = 1
    public var noiseSuppress = true
    /// 0 low … 3 very high.
    public var noiseLevel: Int32 = 2
    /// Where noise is suppressed when roomd's canceller runs (with webrtc's AEC, webrtc's NS).
    public var noiseSuppressor: NoiseSuppressor = .canceller
    public var gainControl = true
    /// Target peak level, dB below full scale.
    public var agcTargetDBFS: Int32 = 3
    /// 3 dB, not webrtc's 9: below its limiter the compressor lifts every level alike, so more
    /// only drives a close talker into the limiter (docs/audio-engine.md, "The AGC's compression gain").
    public var agcCompressionDB: Int32 = 3
    public var voiceDetect = true
    /// 0 very low … 3 high likelihood of speech needed.
    public var vadLikelihood: Int32 = 2
    public var beamform = true
    /// roomd's own array processing, when the board's geometry allows it (3 or more mics not on
    /// one line): the talker's direction (TalkerLocator), a beam steered at them and, with
    /// roomd's canceller, dereverberation of the beam (docs/audio-engine.md, "The beam").
    /// `--disable array` (the chain is then mic 0's alone, as on a one-mic board).
    public var array = true
    public var webrtcBand: WebRTCBand = .low
    /// With the array: the dereverberation's stages (ROOMD_DEREVERB).
    public var dereverberation: Dereverberation = .both

    public init() {}
}

public struct AudioProcessorError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// webrtc-audio-processing for one capture/render pair: N microphones in, one cleaned channel
/// out (with the beamformer) or N out without it. Confined to the audio thread.
public final class AudioProcessor {
    private let apm: OpaquePointer
    public let rate: Int
    public let micChannels: Int
    public let outputChannels: Int
    public let framesPerBlock: Int
    public let beamforming: Bool
    /// roomd's array processing runs: all mics in, one beam on (`steer`).
    public let arrayProcessing: Bool

    public init(rate: Int, micChannels: Int, renderChannels: Int = 1,
                micPositions: [(Float, Float, Float)], settings: ProcessingSettings,
                arrayProcessing: Bool = false) throws(AudioProcessorError) {
        var c = rapm_config_t()
        let useArray = arrayProcessing && micChannels >= 2 && micPositions.count == micChannels
        c.sample_rate = Int32(rate)
        c.capture_channels = Int32(micChannels)
        c.render_channels = Int32(renderChannels)
        c.high_pass = settings.highPass ? 1 : 0
        c.echo_cancel = settings.echoCancel ? 1 : 0
        c.echo_canceller = settings.echoCanceller == .kalman ? 1 : 0
        c.aec_tail_ms = settings.echoTailMilliseconds
        c.aec_extended_filter = settings.extendedFilter ? 1 : 0
        c.aec_delay_agnostic = settings.delayAgnostic ? 1 : 0
        c.aec_suppression = settings.echoSuppression
        c.noise_suppress = settings.noiseSuppress ? 1 : 0
        // With the array the suppressor's floor also follows the room's measured reverberance
        // (spectral_ns.h; docs/audio-engine.md, "Noise suppression").
        c.ns_level = settings.noiseLevel
        c.ns_in_canceller = settings.noiseSuppressor == .canceller ? 1 : 0
        c.gain_control = settings.gainControl ? 1 : 0
        c.agc_target_dbfs = settings.agcTargetDBFS
        c.agc_compression_db = settings.agcCompressionDB
        c.agc_limiter = 1
        c.voice_detect = settings.voiceDetect ? 1 : 0
        c.vad_likelihood = settings.vadLikelihood

        let useBeamformer = !useArray && settings.beamform && micChannels >= 2 && micPositions.count == micChannels
        c.beamform = useBeamformer ? 1 : 0
        c.array = useArray ? 1 : 0
        c.dereverb = useArray ? settings.dereverberation.mask : 0
        c.low_band = settings.webrtcBand == .low ? 1 : 0
        var xyz: [Float] = []
        for p in micPositions { xyz += [p.0, p.1, p.2] }
        var err = [CChar](repeating: 0, count: 256)
        let handle: OpaquePointer? = xyz.withUnsafeBufferPointer { buf in
            c.mic_xyz = buf.baseAddress
            return rapm_create(&c, &err, Int32(err.count))
        }
        guard let handle else {
            throw AudioProcessorError(description: "audio processing: " + String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        apm = handle
        self.rate = rate
        self.micChannels = micChannels
        self.beamforming = useBeamformer
        self.arrayProcessing = useArray
        framesPerBlock = Int(rapm_frames_per_block(handle))
        outputChannels = Int(rapm_output_channels(handle))
    }

    deinit { rapm_destroy(apm) }

    /// Feeds the far-end reference: exactly the samples about to be played.
    @inline(__always)
    public func analyzeRender(_ channels: UnsafePointer<UnsafePointer<Float>?>) -> Int32 {
        rapm_process_render(apm, channels)
    }

    @inline(__always)
    public func processCapture(_ mics: UnsafePointer<UnsafePointer<Float>?>,
                               into out: UnsafePointer<UnsafeMutablePointer<Float>?>, delayMilliseconds: Int) -> Int32 {
        rapm_process_capture(apm, mics, out, Int32(delayMilliseconds))
    }

    /// Noise suppression and gain control on or off while running (the audio profile). On the
    /// audio thread, between blocks; the library only flips flags (no allocation counted).
    public func setSpeechProcessing(noiseSuppression: Bool, gainControl: Bool) -> Int32 {
        let a = rapm_set_noise_suppression(apm, noiseSuppression ? 1 : 0)
        let b = rapm_set_gain_control(apm, gainControl ? 1 : 0)
        return a != 0 ? a : b
    }

    /// roomd's canceller skips its filter update while the far end has been digital silence
    /// for its whole tail (nothing would adapt; the covariance's drift is applied in one step
    /// when the far end returns). On by default; off computes every block in full (tests
    /// compare the two).
    public func setCancellerIdleSkip(_ on: Bool) { rapm_set_canceller_idle_skip(apm, on ? 1 : 0) }

    /// The band the encoder sends (the profile's Opus bandwidth), 0 for all of it: above it
    /// roomd's canceller neither adapts nor estimates — wideband speech leaves a third of its
    /// linear band's work undone — and its suppressor sends silence, since the codec would cut
    /// that band anyway (docs/audio-engine.md, "The output band follows the codec's"). A no-op with webrtc's canceller.
    public func setOutputBand(topHz: Int) { rapm_set_output_band(apm, Int32(clamping: topHz)) }

    /// Blocks roomd's canceller skipped that way so far (mic 0).
    public var cancellerIdleBlocks: Int { Int(rapm_canceller_idle_blocks(apm)) }

    /// roomd's canceller's last block: per bin, the share of the mic's power that is not its
    /// echo estimate (`bins` values; the pointer lives as long as the processor), or nil
    /// without roomd's canceller.
    public var nearShare: (pointer: UnsafePointer<Float>, bins: Int)? {
        var bins: Int32 = 0
        guard let p = rapm_near_share(apm, &bins) else { return nil }
        return (p, Int(bins))
    }

    /// Points the beam at a talker (board-frame degrees), or at mic 0 alone without a direction.
    /// `echoAlone`: the far end plays and nobody in the room talks (the array learns how each mic
    /// hears the echo). `farEndActive`: the beam stays where it is until the far end pauses.
    /// On the audio thread between blocks; allocates nothing.
    @inline(__always)
    public func steer(azimuthDegrees: Float, hasDirection: Bool, echoAlone: Bool = false, farEndActive: Bool = false) {
        rapm_steer(apm, azimuthDegrees, hasDirection ? 1 : 0, echoAlone ? 1 : 0, farEndActive ? 1 : 0)
    }

    /// A self-test starts or ends: meanwhile the chain hears mic 0, steering waits and the
    /// dereverberation is held off (rapm_self_test). Between blocks on the audio thread; nothing
    /// allocated.
    public func holdForSelfTest(_ on: Bool) { rapm_self_test(apm, on ? 1 : 0) }

    /// Capture and playback started again: the echo may land a few samples from where it did
    /// (rapm_streams_restarted). On the audio thread, between blocks; nothing allocated.
    public func streamsRestarted() { rapm_streams_restarted(apm) }

    /// How reverberant the dereverberation measures the room (0 dry … 1 reverberant), nil when
    /// it does not run.
    public var reverberance: Float? {
        let r = rapm_reverberance(apm)
        return r >= 0 ? r : nil
    }

    /// How much of the dereverberation's prediction is taken off since the beam last turned
    /// (0 … 1 over 1 s: the prediction was learnt through the old beam), nil when it does not run.
    public var dereverberationSettled: Float? {
        let r = rapm_dereverb_settled(apm)
        return r >= 0 ? r : nil
    }

    /// The gain in dB the array puts on each mic to bring it to mic 0's sensitivity (0 until
    /// measured; real mics differ by up to ±1 dB), written into `db`: how many mics, 0 without an
    /// array. Allocates nothing.
    public func micCorrectionsDB(into db: UnsafeMutableBufferPointer<Float>) -> Int {
        Int(rapm_mic_corrections_db(apm, db.baseAddress, Int32(db.count)))
    }

    /// Starts the mics' calibration from corrections an earlier run measured (`micCorrectionsDB`,
    /// mic 0 first): a board's mics do not change, and a room whose far end never pauses gives
    /// the array no quiet block to measure them in. Before the first block. False, with nothing
    /// changed, without an array, with the calibration off, or for another count of mics.
    public func startMicCorrections(db: [Float]) -> Bool {
        db.withUnsafeBufferPointer { rapm_start_mic_corrections_db(apm, $0.baseAddress, Int32($0.count)) == 0 }
    }

    /// Blocks this run has measured the mics' sensitivities in: 0 while the corrections are only
    /// the start they were given (or none).
    public var micCalibrationBlocks: Int { rapm_mic_calibration_blocks(apm) }

    /// The beam's centre in board-frame degrees, nil while it is mic 0 alone.
    public var beamAzimuthDegrees: Float? {
        var d: Float = 0
        return rapm_beam(apm, &d) != 0 ? d : nil
    }

    public var voiceDetected: Bool { rapm_voice_detected(apm) != 0 }
    public var echoPresent: Bool { rapm_echo_present(apm) != 0 }
    /// roomd's canceller's double-talk factor (0...1, low: the room talks over the far end).
    public var doubleTalkFactor: Float { rapm_double_talk_factor(apm) }

    /// The AEC's own view (its ERLE estimate and the delay it found). Cheap, no allocation.
    public func echoStatistics() -> rapm_aec_stats_t {
        var s = rapm_aec_stats_t()
        _ = rapm_aec_stats(apm, &s)
        return s
    }
}
