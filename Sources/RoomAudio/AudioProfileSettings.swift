import RoomCore

/// What an audio profile means for the engine (docs/audio-engine.md, "Audio profiles").
///
/// Speech is what the room was tuned and measured with: 24 kbps, audio band up to 12 kHz
/// (super-wideband, plenty for voice), noise suppression and gain control on, DTX and the
/// voice-activity gate so silence costs nothing. Music widens the band to 20 kHz at 64 kbps,
/// and switches off what hurts music: noise suppression (sustained tones read as noise), gain
/// control (pumps on dynamics), DTX and the voice gate (quiet passages are not silence). Echo
/// cancellation stays on in both: the speaker is still in the room.
public struct AudioProfileSettings: Sendable, Equatable {
    public var bitrate: Int32
    public var fullBand: Bool
    public var music: Bool
    public var dtx: Bool
    public var noiseSuppression: Bool
    public var gainControl: Bool
    /// Send only while the APM hears voice (plus hangover); off: send every frame.
    public var voiceGate: Bool

    /// `processing` is what the board and command line allow: a feature switched off there
    /// stays off in every profile.
    public init(_ profile: AudioProfile, processing: ProcessingSettings, opus: OpusSettings) {
        switch profile {
        case .speech:
            bitrate = opus.bitrate
            fullBand = false
            music = false
            dtx = opus.dtx
            noiseSuppression = processing.noiseSuppress
            gainControl = processing.gainControl
            voiceGate = true
        case .music:
            bitrate = max(opus.bitrate, 64000)
            fullBand = true
            music = true
            dtx = false
            noiseSuppression = false
            gainControl = false
            voiceGate = false
        }
    }
}
