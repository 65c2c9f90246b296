// The audio thread's state: `AudioLoop`, its stored properties, the buffers and handles it
// allocates and opens before the thread starts, and their release. What the thread does with
// them is in the extensions: AudioEngineLoop.swift (the loop), AudioEngineCapture.swift (the
// capture chain and encoding), AudioEngineRendering.swift (mixing and playout) and
// AudioEngineRecovery.swift (starting the devices and recovering them).

import RoomALSA
import RoomBase
import RoomCaptureChain
import RoomDSP
import RoomMedia
import RoomOpus
import RoomSettings
import RoomSystem
import Synchronization

/// The state the audio thread owns. Unchecked Sendable: it is created on the starting thread,
/// then used only by the audio thread.
final class AudioLoop: @unchecked Sendable {
    let config: EngineConfiguration
    let stats: EngineStats
    let events: SPSCRing<EngineEvent>
    let processedAudio: SPSCRing<Int16>?
    let control: EngineControl
    let mixer: StreamMixer
    /// One ALSA period per mixer slot, and the table of pointers `StreamMixer.mix` reads.
    let slotAudio: UnsafeMutablePointer<Float>
    let slotPointers: UnsafeMutablePointer<UnsafePointer<Float>?>

    var capture: AlsaPCM? { didSet { captureEveryPeriod = capture.map { Unmanaged.passUnretained($0) } } }
    var playback: AlsaPCM? { didSet { playbackEveryPeriod = playback.map { Unmanaged.passUnretained($0) } } }
    /// The same devices for the per-period calls, used through `_withUnsafeGuaranteedRef`:
    /// loading a class reference from a `var` costs a retain/release pair per call (measured:
    /// 2 per period in release, one per device), and the loop should not touch reference
    /// counts. Safe because only this thread replaces the devices, never during a call.
    var captureEveryPeriod: Unmanaged<AlsaPCM>?
    var playbackEveryPeriod: Unmanaged<AlsaPCM>?
    let apm: AudioProcessor
    /// The talker's direction from every mic; nil without an array that can tell directions.
    private let locator: TalkerLocator?
    /// The same, called through an unretained reference: a retain per block is cache-line
    /// traffic the loop avoids (engine.retains_per_frame went 0 -> 0.5 with `if let locator`).
    let locatorEveryBlock: Unmanaged<TalkerLocator>?
    /// roomd's canceller's per-bin share of the mic power that is not echo (lives as long as `apm`),
    /// handed to the locator so the speaker's echo does not steer it during double talk.
    let nearShare: UnsafePointer<Float>?
    /// The locator's change count as of the last `talkerChanged` event posted.
    var announcedTalkerChanges: Int = 0
    let encoder: OpusEncoderBox
    let remotes: RemoteStreams
    let outgoing: SPSCRing<MediaPacket>
    let outgoingSignal: EventSignal?
    let streamGains: StreamGains
    let streamStatistics: StreamStatistics
    let selfTest: SelfTestCapture
    let incoming: SPSCRing<MediaPacket>
    let listening: SPSCRing<MediaPacket>
    let call: CallLeg
    /// `call.incoming`, held here: read through `call` each period it cost a retain/release pair
    /// (measured: `engine.retains_per_frame` 1.0), as a ring held by the loop does not.
    let callIncoming: SPSCRing<MediaPacket>
    let callUplink: CallUplink
    /// The block's raw mix of the room's streams and of the call's (before volumes): what the
    /// caller and, while bridged, the room are sent beside the mic (`CallLeg`).
    let roomMix: UnsafeMutablePointer<Float>
    /// The array's per-mic sensitivity corrections, read each block for the status (`micCorrectionsDB`).
    let micCorrections: UnsafeMutableBufferPointer<Float>
    let callMix: UnsafeMutablePointer<Float>
    /// The caller's mix-minus for the block, and the room's while the caller is bridged.
    let callSend: UnsafeMutablePointer<Float>
    let roomSend: UnsafeMutablePointer<Float>
    /// The call as the audio thread acts on it this block (`CallUplink.follow`).
    var callCodec: AudioCodec?
    var callBridged = false
    var ringTone: RingTone
    var ringing = false
    let releases: SPSCRing<UInt64>
    /// The frame being built for sending; its header fields advance frame by frame.
    var packet = MediaPacket()
    let rtpTicksPerFrame: UInt32
    var lossRandom = SplitMix64(seed: 0x524F_4F4D)
    var gate = VoiceActivityGate()
    /// What `applyStreamGains` last applied: the gains' generation and each remote slot's sender.
    var gainGeneration: UInt64 = .max
    let gainSSRCs: UnsafeMutablePointer<UInt64>   // MediaLeg.key of each remote slot's sender
    /// Index of the profile the encoder and APM are tuned for (-1: not yet) and its settings.
    var appliedProfile = -1
    /// A self-test runs with the gain control off and the array held (`holdForSelfTest`).
    var selfTestHeld = false
    var voiceGateOn = true
    let profiles: [AudioProfileSettings]
    let probe = AllocationProbe()
    let lossFeedback: LossFeedback
    var lossAdaptation: LossAdaptation
    /// Frames the encoder has waited for a pause to switch in (`switchEncoderUnheard`).
    var encoderSwitchWait = 0
    /// Longer than a sentence: a talker who has not paused by then gets the protection anyway.
    static let encoderSwitchMaxWaitMs = 3000
    /// Without the voice gate, a frame this quiet is a pause to switch encoders in: −60 dBFS
    /// (mean power of a full-scale sine 0.5).
    static let encoderSwitchSilencePower: Float = 0.5e-6
    var lossReportsSeen = 0

    /// Frames per ALSA period: what each wake-up reads from the mics and writes to the speaker.
    let period: Int
    /// Frames per processing block (10 ms), a whole number of periods: what the APM, the
    /// meters, the recorder and the self-test take.
    let block: Int
    /// Which period of the current block the next read fills (0 ..< block / period).
    var blockPhase = 0
    /// The self-test owns the speaker for this block (decided at the block's first period, so
    /// the test signal, the mics and the record stay on one block grid).
    var blockTesting = false
    /// Counts stream starts, so a period can tell that a device was reopened under it.
    var streamGeneration = 0
    let micCount: Int
    let frameSamples: Int
    // Buffers, allocated once.
    let captureInterleaved: UnsafeMutablePointer<Int16>
    /// One block per mic, filled a period at a time (mic m's plane at `mics + m * block`).
    let mics: UnsafeMutablePointer<Float>
    let micPointers: UnsafeMutablePointer<UnsafePointer<Float>?>
    let cleaned: UnsafeMutablePointer<Float>
    let cleanedPointers: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>
    /// The block's speaker samples, rendered and written a period at a time; the whole block is
    /// the canceller's far-end reference.
    let speaker: UnsafeMutablePointer<Float>
    /// The self-test's signal for the block, played a period at a time.
    let testBlock: UnsafeMutablePointer<Float>
    let speakerPointers: UnsafeMutablePointer<UnsafePointer<Float>?>
    let speakerInterleaved: UnsafeMutablePointer<Int16>
    let recordBlock: UnsafeMutablePointer<Int16>
    let encodeFrame: UnsafeMutablePointer<Float>
    var encodeFill = 0
    /// Frames were skipped while not transmitting: reset the encoder before the next one.
    var encoderIdle = false
    let farEnd: UnsafeMutableBufferPointer<Int16>
    var farEndPosition = 0
    private let farEndFeed: SPSCRing<Int16>?
    /// The same ring, unretained, for the per-period read: binding the optional reference in
    /// the period costs a retain/release pair (measured: `engine.retains_per_frame` 1.0).
    let farEndFeedRef: Unmanaged<SPSCRing<Int16>>?
    /// One period of the streamed far end, as read from the feed.
    let farEndPeriod: UnsafeMutableBufferPointer<Int16>

    var inputMeter: LevelMeter
    var outputMeter: LevelMeter
    var playbackMeter: LevelMeter
    var echoIn = 0.0
    var echoOut = 0.0

    /// Periods since start or since the last disruption; allocations count once it passes
    /// `warmupPeriods` (first-use allocations inside libraries are not steady state).
    var calmPeriods = 0
    let warmupPeriods = 100

    init(configuration c: EngineConfiguration, farEnd farEndSamples: [Int16], farEndFeed: SPSCRing<Int16>?,
         stats: EngineStats, events: SPSCRing<EngineEvent>,
         processedAudio: SPSCRing<Int16>?, control: EngineControl, mixer: StreamMixer,
         outgoing: SPSCRing<MediaPacket>, incoming: SPSCRing<MediaPacket>, listening: SPSCRing<MediaPacket>, call: CallLeg,
         releases: SPSCRing<UInt64>,
         outgoingSignal: EventSignal?,
         streamGains: StreamGains, streamStatistics: StreamStatistics, selfTest: SelfTestCapture,
         lossFeedback: LossFeedback) throws {
        config = c
        self.stats = stats
        self.events = events
        self.processedAudio = processedAudio
        self.control = control
        self.mixer = mixer
        period = c.periodFrames
        block = c.blockFrames
        micCount = c.micChannels
        // With roomd's array processing the mics make one beam, steered at the talker the locator
        // finds, and one canceller works on it (keeping an echo path per beam). Without it (a
        // one-mic board, `--disable array`, a geometry that cannot tell directions) the APM cleans
        // mic 0 alone, unless webrtc's fixed beamformer is asked for: processing all N mics would
        // cost N echo cancellers (measured on the sim board: 7.3 % of a core for all four, 2.7 %
        // for mic 0) for channels nobody uses, and averaging them would comb-filter off-axis talkers.
        let array = c.processing.array && c.micChannels >= 3 && c.micPositions.count == c.micChannels
            && AudioEngine.talkerDirectionProblem(rate: c.rate, micPositions: c.micPositions) == nil
        let beam = !array && c.processing.beamform && c.micChannels >= 2 && c.micPositions.count == c.micChannels
        var processing = c.processing
        Self.override(&processing.echoCanceller, from: EchoCanceller.environmentVariable, what: "a canceller")
        Self.override(&processing.noiseSuppressor, from: NoiseSuppressor.environmentVariable, what: "a noise suppressor")
        Self.override(&processing.webrtcBand, from: WebRTCBand.environmentVariable, what: "a band")
        Self.override(&processing.dereverberation, from: Dereverberation.environmentVariable, what: "a dereverberation")
        apm = try AudioProcessor(rate: c.rate, micChannels: beam || array ? c.micChannels : 1, renderChannels: 1,
                                 micPositions: beam || array ? c.micPositions : [], settings: processing,
                                 arrayProcessing: array)
        if let start = c.micCorrectionsStartDB, apm.startMicCorrections(db: start) {
            stats.micCorrectionsStarted.store(true, ordering: .relaxed)
        }
        locator = array ? TalkerLocator(rate: c.rate, positions: c.micPositions) : nil
        if let locator, let share = apm.nearShare, share.bins == locator.bins { nearShare = share.pointer } else { nearShare = nil }
        locatorEveryBlock = locator.map { Unmanaged.passUnretained($0) }
        encoder = try OpusEncoderBox(rate: c.rate, settings: c.opus, lowDelay: true)
        frameSamples = encoder.frameSamples
        remotes = try RemoteStreams(count: MixerSlot.remoteCount, rate: c.rate, periodFrames: c.periodFrames,
                                    frameMilliseconds: c.opus.frameMilliseconds, minimumDelayMs: c.jitterMinimumDelayMs,
                                    statistics: streamStatistics)
        self.outgoing = outgoing
        self.incoming = incoming
        self.listening = listening
        self.call = call
        callIncoming = call.incoming
        callUplink = try CallUplink(leg: call, rate: c.rate)
        ringTone = RingTone(rate: c.rate)
        self.releases = releases
        self.outgoingSignal = outgoingSignal
        self.streamGains = streamGains
        self.streamStatistics = streamStatistics
        self.selfTest = selfTest
        rtpTicksPerFrame = UInt32(48 * c.opus.frameMilliseconds)
        packet.ssrc = c.ssrc
        profiles = AudioProfile.allCases.map { AudioProfileSettings($0, processing: c.processing, opus: c.opus) }
        self.lossFeedback = lossFeedback
        lossAdaptation = LossAdaptation(initialPercent: encoder.settings.expectedLossPercent)

        captureInterleaved = .allocate(capacity: period * micCount)
        mics = .allocate(capacity: block * micCount)
        micPointers = .allocate(capacity: micCount)
        for m in 0..<micCount { micPointers[m] = UnsafePointer(mics + m * block) }
        cleaned = .allocate(capacity: block * micCount)
        cleanedPointers = .allocate(capacity: micCount)
        for m in 0..<micCount { cleanedPointers[m] = cleaned + m * block }
        speaker = .allocate(capacity: block)
        testBlock = .allocate(capacity: block)
        speakerPointers = .allocate(capacity: 1)
        speakerPointers[0] = UnsafePointer(speaker)
        speakerInterleaved = .allocate(capacity: period * c.playbackChannels)
        recordBlock = .allocate(capacity: block)
        encodeFrame = .allocate(capacity: frameSamples)
        gainSSRCs = .allocate(capacity: MixerSlot.remoteCount)
        gainSSRCs.initialize(repeating: 0, count: MixerSlot.remoteCount)
        slotAudio = .allocate(capacity: MixerSlot.count * period)
        slotAudio.initialize(repeating: 0, count: MixerSlot.count * period)
        slotPointers = .allocate(capacity: MixerSlot.count)
        slotPointers.initialize(repeating: nil, count: MixerSlot.count)
        farEnd = .allocate(capacity: farEndSamples.count)
        _ = farEnd.initialize(from: farEndSamples)
        self.farEndFeed = farEndFeed
        farEndFeedRef = farEndFeed.map { Unmanaged.passUnretained($0) }
        farEndPeriod = .allocate(capacity: c.periodFrames)
        farEndPeriod.initialize(repeating: 0)
        captureInterleaved.initialize(repeating: 0, count: period * micCount)
        mics.initialize(repeating: 0, count: block * micCount)
        cleaned.initialize(repeating: 0, count: block * micCount)
        speaker.initialize(repeating: 0, count: block)
        testBlock.initialize(repeating: 0, count: block)
        speakerInterleaved.initialize(repeating: 0, count: period * c.playbackChannels)
        recordBlock.initialize(repeating: 0, count: block)
        encodeFrame.initialize(repeating: 0, count: frameSamples)
        roomMix = .allocate(capacity: 4 * block)
        micCorrections = .allocate(capacity: EngineStats.maxCorrectedMics)
        micCorrections.initialize(repeating: 0)
        roomMix.initialize(repeating: 0, count: 4 * block)
        callMix = roomMix + block
        callSend = roomMix + 2 * block
        roomSend = roomMix + 3 * block

        let blockSeconds = Double(EngineConfiguration.blockMilliseconds) / 1000
        inputMeter = LevelMeter(periodSeconds: blockSeconds)
        outputMeter = LevelMeter(periodSeconds: blockSeconds)
        playbackMeter = LevelMeter(periodSeconds: blockSeconds)

        try openDevices()
    }

    deinit {
        captureInterleaved.deallocate(); mics.deallocate(); micPointers.deallocate()
        cleaned.deallocate(); cleanedPointers.deallocate(); speaker.deallocate(); testBlock.deallocate()
        speakerPointers.deallocate(); speakerInterleaved.deallocate(); recordBlock.deallocate()
        encodeFrame.deallocate(); farEnd.deallocate(); farEndPeriod.deallocate()
        slotAudio.deallocate(); slotPointers.deallocate(); gainSSRCs.deallocate()
        roomMix.deallocate()   // with callMix, callSend and roomSend
        micCorrections.deallocate()
    }

    /// A measurement override from the environment (ROOMD_ECHO_CANCELLER, ROOMD_NOISE_SUPPRESSOR):
    /// set and valid → it wins; set and not a choice → a warning naming the choices, setting kept.
    private static func override<Choice: RawRepresentable & CaseIterable>(_ setting: inout Choice, from variable: String, what: String)
    where Choice.RawValue == String {
        guard let name = Environment.get(variable), !name.isEmpty else { return }
        if let chosen = Choice(rawValue: name) {
            setting = chosen
        } else {
            let choices = Choice.allCases.map(\.rawValue).joined(separator: ", ")
            Log.warning("\(variable)=\(name): not \(what) (\(choices)); using \(setting.rawValue)")
        }
    }
}
