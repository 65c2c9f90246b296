import RoomCaptureChain
import RoomOpus
import RoomSettings


/// What an audio profile means for the engine (docs/audio-engine.md, "Audio profiles" and
/// "Codec settings").
///
/// Speech codes what `scripts/bench quality` measured best for voice as a listener hears it:
/// the Opus settings as given (defaults: 96 kbps, wideband, in-band FEC for a few percent loss,
/// complexity 5), noise suppression and gain control on, DTX and the voice-activity gate so
/// silence costs nothing. Music widens the band to 20 kHz at 128 kbps (at least), and switches
/// off what hurts music: noise suppression (sustained tones read as noise), gain control (pumps
/// on dynamics), DTX and the voice gate (quiet passages are not silence). Echo cancellation
/// stays on in both: the speaker is still in the room.
public struct AudioProfileSettings: Sendable, Equatable {
    /// What the profile sets on the running encoder (`OpusEncoderBox.apply(_:)`): bitrate, band,
    /// signal type, DTX, FEC and its expected loss, complexity, VBR.
    public var encoder: OpusEncoderConfiguration
    /// The bitrate while no listener loses packets and the FEC copy is off (`LossAdaptation`);
    /// nil: the same as `encoder.bitrate`. Music keeps its rate.
    public var cleanNetworkBitrate: Int32?
    /// Code in Opus's transform layer (CELT) while the FEC copy is off; speech only (music is
    /// coded there anyway). `OpusSettings.cleanNetworkTransform`.
    public var cleanNetworkTransform: Bool
    /// The complexity while coding in the transform layer on a clean network.
    public var cleanNetworkComplexity: Int32
    /// Follow the listeners' loss reports (`LossAdaptation`); off: the expected loss stays fixed.
    public var adaptsToLoss: Bool
    public var fullBand: Bool { encoder.bandwidth == .full }
    public var noiseSuppression: Bool
    public var gainControl: Bool
    /// Send only while the APM hears voice (plus hangover); off (also when the board or the
    /// command line switched the VAD off): send every frame that DTX does not hold back.
    public var voiceGate: Bool

    /// The music profile's bitrate floor: full band music gets more than speech's 96 kbps.
    public static let musicMinimumBitrate: Int32 = 128000

    /// `processing` is what the board and command line allow: a feature switched off there
    /// stays off in every profile. `opus` gets `ROOMD_OPUS`'s overrides first (as the encoder
    /// does) unless `environment` is false.
    public init(_ profile: AudioProfile, processing: ProcessingSettings, opus requested: OpusSettings, environment: Bool = true) {
        let opus = environment ? ((try? requested.withEnvironmentOverrides()) ?? requested) : requested
        adaptsToLoss = opus.adaptToLoss && opus.inbandFEC
        switch profile {
        case .speech:
            encoder = OpusEncoderConfiguration(bitrate: opus.bitrate, bandwidth: opus.maxBandwidth, music: false, dtx: opus.dtx,
                                               inbandFEC: opus.inbandFEC, expectedLossPercent: opus.expectedLossPercent,
                                               complexity: opus.complexity, vbr: opus.vbr)
            cleanNetworkBitrate = opus.cleanNetworkBitrate
            cleanNetworkTransform = opus.cleanNetworkTransform
            cleanNetworkComplexity = opus.cleanNetworkComplexity
            noiseSuppression = processing.noiseSuppress
            gainControl = processing.gainControl
            // Without the VAD there is no voice to gate on: it would read "no voice" for ever and
            // the gate would hold back all but its refresh frames — a muted appliance. (Found
            // when `--disable vad` in the engine bench sent 3 of 100 frames a second.) Opus's
            // DTX still keeps silence off the wire.
            voiceGate = opus.voiceGate && processing.voiceDetect
        case .music:
            encoder = OpusEncoderConfiguration(bitrate: max(opus.bitrate, Self.musicMinimumBitrate), bandwidth: .full, music: true,
                                               dtx: false, inbandFEC: opus.inbandFEC, expectedLossPercent: opus.expectedLossPercent,
                                               complexity: opus.complexity, vbr: opus.vbr)
            cleanNetworkBitrate = nil
            cleanNetworkTransform = false
            cleanNetworkComplexity = opus.complexity
            noiseSuppression = false
            gainControl = false
            voiceGate = false
        }
    }
}
