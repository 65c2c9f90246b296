import RoomALSA
import RoomBase
import RoomCaptureChain
import RoomDSP
import RoomMedia
import RoomOpus
import RoomSettings
import RoomSystem
import Synchronization

/// The real-time audio engine: one thread runs capture and playback in lock-step, one ALSA
/// period (5 or 10 ms) at a time, because the echo canceller needs the far-end reference and
/// the microphones aligned block by block. Each period:
///
///     read mics → mix what the speaker will play → write speaker
///
/// and each 10 ms processing block (every period at 10 ms, every second one at 5 ms):
///
///     APM render (the block's speaker samples, the far-end reference)
///     → APM capture (AEC, NS, AGC, VAD, beamformer) → meters → Opus encode → send gate
///
/// The speaker is written before the block is processed: what the speaker needs is ready
/// first, so the block's processing time does not eat into the playback headroom.
///
/// Everything the loop touches is allocated before it starts; it talks to the rest of the
/// daemon only through atomics (`stats`) and single-producer/single-consumer rings (`events`,
/// `processedAudio`). xruns are recovered in place and counted; a lost device is closed and
/// reopened with back-off, and both are reported as events.
public final class AudioEngine: @unchecked Sendable {
    /// Why mics at these positions cannot give the talker's direction (`TalkerLocator`: fewer
    /// than 3 mics, all on one line, no positions), or nil when they can.
    public static func talkerDirectionProblem(rate: Int, micPositions: [(Float, Float, Float)]) -> String? {
        micPositions.isEmpty ? "no microphone positions (mic0..)" : TalkerLocator.problem(rate: rate, positions: micPositions)
    }

    public let configuration: EngineConfiguration
    public let stats: EngineStats
    /// Audio thread → daemon. Drained by the event loop.
    public let events = SPSCRing<EngineEvent>(capacity: 256)
    /// Encoded frames to send (audio thread → network thread), unless in loopback mode.
    public let outgoingMedia = SPSCRing<MediaPacket>(capacity: 64)
    /// Woken after each frame pushed to `outgoingMedia` (the network thread's eventfd). Set it
    /// before `start`; a write to an eventfd neither blocks nor allocates.
    public var outgoingSignal: EventSignal?
    /// Received frames (network thread → audio thread), drained every period.
    public let incomingMedia = SPSCRing<MediaPacket>(capacity: 256)
    /// SSRCs whose senders left the room (event loop → audio thread), drained every period
    /// after `incomingMedia`: their jitter-buffer slots are freed and their statistics rows go.
    /// Push with `releaseStream(ssrc:)` from the thread that feeds `incomingMedia`.
    public let streamReleases = SPSCRing<UInt32>(capacity: 64)
    /// Cleaned capture as 16-bit samples, for a recorder (only when `recordProcessed`).
    public let processedAudio: SPSCRing<Int16>?
    /// Flags the daemon flips while the loop runs.
    public let control = EngineControl()
    /// What the speaker plays: per-stream gains and on/off are set from any thread (volume
    /// commands), mixing happens on the audio thread. Slots: `MixerSlot`.
    public let mixer: StreamMixer
    /// Per-sender playback volume (by SSRC), applied through the mixer's slot gains.
    public let streamGains = StreamGains()
    /// The listeners' loss reports in, the encoder's protection out (`LossAdaptation`).
    public let lossFeedback = LossFeedback()
    /// Per-stream receive statistics (loss, late, FEC, PLC, jitter, buffer delay).
    public var streamStatistics: StreamStatistics { stats.streams }
    /// `roomctl selftest`: the speaker plays a test signal while the mics are recorded.
    public let selfTest: SelfTestCapture
    private var thread: NativeThread?
    // Confined to the audio thread once `start` has handed them over.
    private var loop: AudioLoop?

    /// The far-end samples until `start` hands them to the loop (which keeps the only copy).
    private var farEndPending: [Int16]
    /// The streamed far end (`EngineConfiguration.farEndStreamed`): the caller writes, the
    /// audio thread reads a period at a time. 1.4 s at 48 kHz (128 KiB), so a feeder on a
    /// 100 ms timer has over a second of slack.
    public let farEndFeed: SPSCRing<Int16>?

    public init(configuration: EngineConfiguration) throws(EngineError) {
        try configuration.validate()
        // The loop takes the far-end samples; `configuration` does not keep a second copy.
        var kept = configuration
        farEndPending = kept.farEnd
        kept.farEnd = []
        self.configuration = kept
        stats = EngineStats(periodFrames: configuration.blockFrames)
        processedAudio = configuration.recordProcessed ? SPSCRing<Int16>(capacity: 1 << 17) : nil
        farEndFeed = configuration.farEndStreamed ? SPSCRing<Int16>(capacity: 1 << 16) : nil
        selfTest = SelfTestCapture(micCount: configuration.micChannels, periodFrames: configuration.blockFrames,
                                   rate: configuration.rate)
        control.setProfile(configuration.profile)
        mixer = StreamMixer(slots: MixerSlot.count, sampleRate: configuration.rate)
        mixer.setActive(!farEndPending.isEmpty || farEndFeed != nil, slot: MixerSlot.farEnd)
        for i in 0..<MixerSlot.remoteCount { mixer.setActive(true, slot: MixerSlot.firstRemote + i) }
    }

    /// Opens the devices and the processing chain on the calling thread, so that a missing
    /// device or a bad setting is reported to the caller at once, then starts the audio thread.
    public func start() throws(EngineError) {
        guard thread == nil else { return }
        let loop: AudioLoop
        do {
            loop = try AudioLoop(configuration: configuration, farEnd: farEndPending, farEndFeed: farEndFeed, stats: stats, events: events,
                                 processedAudio: processedAudio, control: control, mixer: mixer,
                                 outgoing: outgoingMedia, incoming: incomingMedia, releases: streamReleases,
                                 outgoingSignal: outgoingSignal,
                                 streamGains: streamGains, streamStatistics: streamStatistics, selfTest: selfTest,
                                 lossFeedback: lossFeedback)
        } catch let error as AudioDeviceError {
            throw EngineError(error.description)
        } catch let error as AudioProcessorError {
            throw EngineError(error.description)
        } catch let error as OpusError {
            throw EngineError(error.description)
        } catch {
            throw EngineError("\(error)")
        }
        self.loop = loop
        farEndPending = []
        control.running.store(true, ordering: .releasing)
        do {
            thread = try NativeThread(name: "roomd-audio") { [loop] in loop.run() }
        } catch {
            control.running.store(false, ordering: .releasing)
            throw EngineError(error.description)
        }
    }

    /// Stops the loop after its current period and waits for the thread, at most `timeout`:
    /// a thread blocked for good in the driver (a card whose clock stopped: the read never
    /// returns) is left behind rather than hanging the daemon's exit. Returns false then; the
    /// thread keeps its own reference to the loop's state, so nothing it uses is freed.
    @discardableResult
    public func stop(timeout: Duration = .seconds(2)) -> Bool {
        guard let thread else { return true }
        control.running.store(false, ordering: .releasing)
        let joined = thread.join(timeout: timeout)
        self.thread = nil
        loop = nil
        return joined
    }

    public var isRunning: Bool { control.running.load(ordering: .acquiring) }

    /// Asks the audio thread to free the stream of `ssrc` (its participant left, or it is no
    /// longer in the room): the slot is reused by the next new stream at once instead of after
    /// its 2 s idle time, and `stats.streams` stops listing it. Non-blocking (a push on an
    /// SPSC ring; the single producer is the event-loop thread); false if the ring is full
    /// (the stream is then dropped from the top-level figures by idleness alone).
    @discardableResult
    public func releaseStream(ssrc: UInt32) -> Bool {
        guard ssrc != 0 else { return false }
        return streamReleases.push(ssrc)
    }
}

/// Flags shared between the daemon and the audio thread.
public final class EngineControl: Sendable {
    /// Cleared to stop the loop after its current period.
    public let running = Atomic<Bool>(false)
    /// The audio profile asked for (`AudioProfile.allCases` index); the loop retunes the
    /// encoder and the APM at the next period boundary when it differs from what it applied.
    let profileIndex = Atomic<Int>(0)

    public func setProfile(_ profile: AudioProfile) {
        profileIndex.store(AudioProfile.allCases.firstIndex(of: profile) ?? 0, ordering: .releasing)
    }

    public var profile: AudioProfile { AudioProfile.allCases[profileIndex.load(ordering: .acquiring)] }

    /// Whether the room takes this appliance's audio (joined, on stage, not muted). While it
    /// does not, the loop still runs the processing chain (the canceller keeps learning the
    /// room, the meters and voice detection keep working) but encodes nothing: the encoder was
    /// a third of the engine's CPU, spent on frames the session then dropped. True until told
    /// otherwise (loopback mode never is).
    let transmitting = Atomic<Bool>(true)

    public func setTransmitting(_ on: Bool) { transmitting.store(on, ordering: .relaxed) }

    public var isTransmitting: Bool { transmitting.load(ordering: .relaxed) }
}

/// The speaker mixer's stream slots.
public enum MixerSlot {
    /// A far-end talker played from a file (demo, benches, the rig).
    public static let farEnd = 0
    /// Remote streams (and, in loopback mode, our own stream) take the slots from here on.
    public static let firstRemote = 1
    /// The server forwards the loudest three speakers; one spare slot covers a change of speaker.
    public static let remoteCount = 4
    public static let count = firstRemote + remoteCount
}

/// The state the audio thread owns. Unchecked Sendable: it is created on the starting thread,
/// then used only by the audio thread.
final class AudioLoop: @unchecked Sendable {
    private let config: EngineConfiguration
    private let stats: EngineStats
    private let events: SPSCRing<EngineEvent>
    private let processedAudio: SPSCRing<Int16>?
    private let control: EngineControl
    private let mixer: StreamMixer
    /// One ALSA period per mixer slot, and the table of pointers `StreamMixer.mix` reads.
    private let slotAudio: UnsafeMutablePointer<Float>
    private let slotPointers: UnsafeMutablePointer<UnsafePointer<Float>?>

    private var capture: AlsaPCM? { didSet { captureEveryPeriod = capture.map { Unmanaged.passUnretained($0) } } }
    private var playback: AlsaPCM? { didSet { playbackEveryPeriod = playback.map { Unmanaged.passUnretained($0) } } }
    /// The same devices for the per-period calls, used through `_withUnsafeGuaranteedRef`:
    /// loading a class reference from a `var` costs a retain/release pair per call (measured:
    /// 2 per period in release, one per device), and the loop should not touch reference
    /// counts. Safe because only this thread replaces the devices, never during a call.
    private var captureEveryPeriod: Unmanaged<AlsaPCM>?
    private var playbackEveryPeriod: Unmanaged<AlsaPCM>?
    private let apm: AudioProcessor
    /// The talker's direction from every mic; nil without an array that can tell directions.
    private let locator: TalkerLocator?
    /// The same, called through an unretained reference: a retain per block is cache-line
    /// traffic the loop avoids (engine.retains_per_frame went 0 -> 0.5 with `if let locator`).
    private let locatorEveryBlock: Unmanaged<TalkerLocator>?
    /// roomd's canceller's per-bin share of the mic power that is not echo (lives as long as `apm`),
    /// handed to the locator so the speaker's echo does not steer it during double talk.
    private let nearShare: UnsafePointer<Float>?
    /// The locator's change count as of the last `talkerChanged` event posted.
    private var announcedTalkerChanges: Int = 0
    private let encoder: OpusEncoderBox
    private let remotes: RemoteStreams
    private let outgoing: SPSCRing<MediaPacket>
    private let outgoingSignal: EventSignal?
    private let streamGains: StreamGains
    private let streamStatistics: StreamStatistics
    private let selfTest: SelfTestCapture
    private let incoming: SPSCRing<MediaPacket>
    private let releases: SPSCRing<UInt32>
    /// The frame being built for sending; its header fields advance frame by frame.
    private var packet = MediaPacket()
    private let rtpTicksPerFrame: UInt32
    private var lossRandom = SplitMix64(seed: 0x524F_4F4D)
    private var gate = VoiceActivityGate()
    /// What `applyStreamGains` last applied: the gains' generation and each remote slot's sender.
    private var gainGeneration: UInt64 = .max
    private let gainSSRCs: UnsafeMutablePointer<UInt32>
    /// Index of the profile the encoder and APM are tuned for (-1: not yet) and its settings.
    private var appliedProfile = -1
    /// A self-test runs with the gain control off and the array held (`holdForSelfTest`).
    private var selfTestHeld = false
    private var voiceGateOn = true
    private let profiles: [AudioProfileSettings]
    private let probe = AllocationProbe()
    private let lossFeedback: LossFeedback
    private var lossAdaptation: LossAdaptation
    private var lossReportsSeen = 0

    /// Frames per ALSA period: what each wake-up reads from the mics and writes to the speaker.
    private let period: Int
    /// Frames per processing block (10 ms), a whole number of periods: what the APM, the
    /// meters, the recorder and the self-test take.
    private let block: Int
    /// Which period of the current block the next read fills (0 ..< block / period).
    private var blockPhase = 0
    /// The self-test owns the speaker for this block (decided at the block's first period, so
    /// the test signal, the mics and the record stay on one block grid).
    private var blockTesting = false
    /// Counts stream starts, so a period can tell that a device was reopened under it.
    private var streamGeneration = 0
    private let micCount: Int
    private let frameSamples: Int
    // Buffers, allocated once.
    private let captureInterleaved: UnsafeMutablePointer<Int16>
    /// One block per mic, filled a period at a time (mic m's plane at `mics + m * block`).
    private let mics: UnsafeMutablePointer<Float>
    private let micPointers: UnsafeMutablePointer<UnsafePointer<Float>?>
    private let cleaned: UnsafeMutablePointer<Float>
    private let cleanedPointers: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>
    /// The block's speaker samples, rendered and written a period at a time; the whole block is
    /// the canceller's far-end reference.
    private let speaker: UnsafeMutablePointer<Float>
    /// The self-test's signal for the block, played a period at a time.
    private let testBlock: UnsafeMutablePointer<Float>
    private let speakerPointers: UnsafeMutablePointer<UnsafePointer<Float>?>
    private let speakerInterleaved: UnsafeMutablePointer<Int16>
    private let recordBlock: UnsafeMutablePointer<Int16>
    private let encodeFrame: UnsafeMutablePointer<Float>
    private var encodeFill = 0
    /// Frames were skipped while not transmitting: reset the encoder before the next one.
    private var encoderIdle = false
    private let farEnd: UnsafeMutableBufferPointer<Int16>
    private var farEndPosition = 0
    private let farEndFeed: SPSCRing<Int16>?
    /// The same ring, unretained, for the per-period read: binding the optional reference in
    /// the period costs a retain/release pair (measured: `engine.retains_per_frame` 1.0).
    private let farEndFeedRef: Unmanaged<SPSCRing<Int16>>?
    /// One period of the streamed far end, as read from the feed.
    private let farEndPeriod: UnsafeMutableBufferPointer<Int16>

    private var inputMeter: LevelMeter
    private var outputMeter: LevelMeter
    private var playbackMeter: LevelMeter
    private var echoIn = 0.0
    private var echoOut = 0.0

    /// Periods since start or since the last disruption; allocations count once it passes
    /// `warmupPeriods` (first-use allocations inside libraries are not steady state).
    private var calmPeriods = 0
    private let warmupPeriods = 100

    init(configuration c: EngineConfiguration, farEnd farEndSamples: [Int16], farEndFeed: SPSCRing<Int16>?,
         stats: EngineStats, events: SPSCRing<EngineEvent>,
         processedAudio: SPSCRing<Int16>?, control: EngineControl, mixer: StreamMixer,
         outgoing: SPSCRing<MediaPacket>, incoming: SPSCRing<MediaPacket>, releases: SPSCRing<UInt32>,
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
        locator = array ? TalkerLocator(rate: c.rate, positions: c.micPositions) : nil
        if let locator, let share = apm.nearShare, share.bins == locator.bins { nearShare = share.pointer } else { nearShare = nil }
        locatorEveryBlock = locator.map { Unmanaged.passUnretained($0) }
        encoder = try OpusEncoderBox(rate: c.rate, settings: c.opus)
        frameSamples = encoder.frameSamples
        remotes = try RemoteStreams(count: MixerSlot.remoteCount, rate: c.rate, periodFrames: c.periodFrames,
                                    frameMilliseconds: c.opus.frameMilliseconds, minimumDelayMs: c.jitterMinimumDelayMs,
                                    statistics: streamStatistics)
        self.outgoing = outgoing
        self.incoming = incoming
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
    }

    private func openDevices() throws(AudioDeviceError) {
        capture = nil
        playback = nil
        capture = try AlsaPCM(device: config.captureDevice, direction: .capture, rate: config.rate,
                              channels: micCount, periodFrames: period, periods: config.periodsInBuffer)
        playback = try AlsaPCM(device: config.playbackDevice, direction: .playback, rate: config.rate,
                               channels: config.playbackChannels, periodFrames: period, periods: config.periodsInBuffer)
    }

    // MARK: the audio thread

    func run() {
        switch Realtime.promoteCurrentThread(priority: config.realtimePriority) {
        case .fifo(let p): post(.realtimeGranted(priority: p))
        case .denied(let code, _): post(.realtimeDenied(code: code))
        }
        stats.allocationProbeActive.store(probe.isAvailable, ordering: .relaxed)
        stats.allocationProbeVerified.store(probe.verify(), ordering: .relaxed)
        stats.retainProbeVerified.store(probe.verifyRetains(), ordering: .relaxed)
        post(.started(rate: config.rate, micChannels: micCount, beamforming: apm.beamforming, array: apm.arrayProcessing))
        if !startStreams() { recoverLostDevice(capture: false, code: AlsaCode.ioError) }
        prepareNextBlock()
        var lastAllocations = probe.threadAllocations()
        var lastRetains = probe.threadRetains()
        stats.audioThreadStarted()

        while control.running.load(ordering: .relaxed) {
            let got = captureEveryPeriod?._withUnsafeGuaranteedRef { $0.read(captureInterleaved, frames: period) } ?? Int(AlsaCode.notOpen)
            if got < 0 {
                handleCaptureError(Int32(got))
                lastAllocations = probe.threadAllocations()
                lastRetains = probe.threadRetains()
                continue
            }
            let periodStart = monotonicNanoseconds()
            let blockDone = runPeriod()
            let periodWork = Int(truncatingIfNeeded: monotonicNanoseconds() &- periodStart)
            if periodWork > stats.longestPeriodNanoseconds.load(ordering: .relaxed) {
                stats.longestPeriodNanoseconds.store(periodWork, ordering: .relaxed)
            }

            calmPeriods += 1
            let now = probe.threadAllocations()
            let retainsNow = probe.threadRetains()
            if calmPeriods > warmupPeriods {
                stats.steadyAllocations.wrappingAdd(Int(now &- lastAllocations), ordering: .relaxed)
                stats.steadyRetains.wrappingAdd(Int(retainsNow &- lastRetains), ordering: .relaxed)
                stats.steadyPeriodsMeasured.wrappingAdd(1, ordering: .relaxed)
            } else {
                stats.unsteadyAllocations.wrappingAdd(Int(now &- lastAllocations), ordering: .relaxed)
            }
            lastAllocations = now
            lastRetains = retainsNow
            guard blockDone else { continue }
            // Once per block: the counter the status reports (10 ms blocks whatever the period).
            // The thread's CPU time is read by whoever asks (`EngineStats.threadCPUNanoseconds`).
            stats.periods.wrappingAdd(1, ordering: .relaxed)
        }
        stats.audioThreadEnding()
        capture?.drop()
        playback?.drop()
        post(.stopped)
    }

    @inline(__always)
    private func post(_ event: EngineEvent) { _ = events.push(event) }

    /// Pre-fills playback with silence and starts both directions back to back, so the
    /// speaker-to-mic delay the AEC sees starts small and constant.
    private func startStreams() -> Bool {
        guard let capture, let playback else { return false }
        guard prefill(playback) else { return false }
        do {
            try playback.start()
            try capture.start()
        } catch {
            return false
        }
        mixer.reset()
        calmPeriods = 0
        blockPhase = 0
        // Not at the first start: the canceller has learnt nothing then.
        if streamGeneration != 0 { apm.streamsRestarted() }
        streamGeneration &+= 1
        return true
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

    /// Writes the playback pre-fill: one period of silence plus the headroom.
    private func prefill(_ playback: AlsaPCM) -> Bool {
        speakerInterleaved.update(repeating: 0, count: period * config.playbackChannels)
        var left = config.playbackPrefillFrames
        while left > 0 {
            let n = min(left, period)
            if playback.write(speakerInterleaved, frames: n) < 0 { return false }
            left -= n
        }
        return true
    }

    /// Retunes encoder and APM when the daemon asked for another profile. A relaxed load per
    /// period; the work (a few ctl calls) happens only on a change.
    @inline(__always)
    private func followProfile() {
        let wanted = control.profileIndex.load(ordering: .relaxed)
        guard wanted != appliedProfile, wanted >= 0, wanted < profiles.count else { return }
        let p = profiles[wanted]
        _ = encoder.apply(p.encoderConfiguration)
        _ = apm.setSpeechProcessing(noiseSuppression: p.noiseSuppression, gainControl: p.gainControl && !selfTestHeld)
        apm.setOutputBand(topHz: p.bandwidth.topHz)
        voiceGateOn = p.voiceGate
        appliedProfile = wanted
        stats.profileIndex.store(wanted, ordering: .relaxed)
        applyLossProtection()   // the profile's own bitrate and loss just replaced it
    }

    /// Follows the listeners' loss reports (`LossAdaptation`): an acquiring load per period,
    /// a few ctl calls when a new report changes the protection.
    @inline(__always)
    private func followLossReports() {
        let reports = lossFeedback.reportCount
        guard reports != lossReportsSeen else { return }
        lossReportsSeen = reports
        if lossAdaptation.update(reportedPercent: Double(lossFeedback.latestPermille) / 10) { applyLossProtection() }
    }

    private func applyLossProtection() {
        guard appliedProfile >= 0, appliedProfile < profiles.count else { return }
        let p = profiles[appliedProfile]
        guard p.adaptsToLoss else {
            lossFeedback.publish(expectedLoss: p.expectedLossPercent, bitrate: p.bitrate)
            return
        }
        let coding = lossAdaptation.coding(for: p)
        _ = encoder.apply(coding)
        lossFeedback.publish(expectedLoss: coding.expectedLossPercent, bitrate: coding.bitrate)
    }

    /// The self-test measures the canceller with the gain control off, and the gain control
    /// comes back (re-initialised, as after a profile switch) when the test ends. In a quiet room
    /// the AGC raises its gain by ~4 dB a second while the test talker speaks: that drift, not
    /// the canceller, read as 6 dB of talker "lost" in double talk, and as 20 dB less echo
    /// reduction on a second run (docs/audio-engine.md, "Self-test capture"). Two flag flips, nothing
    /// allocated (the handles exist).
    /// The array is held too (rapm_self_test): the test talker is added to every mic alike, a
    /// source straight above the array that no beam passes at its level (a second self-test in
    /// a row lost 13 dB of it), so the chain hears mic 0; and the dereverberation, which would
    /// measure the sweep's reverberant echo, is off.
    private func holdForSelfTest(_ hold: Bool) {
        selfTestHeld = hold
        apm.holdForSelfTest(hold)
        guard appliedProfile >= 0, appliedProfile < profiles.count else { return }
        let p = profiles[appliedProfile]
        _ = apm.setSpeechProcessing(noiseSuppression: p.noiseSuppression, gainControl: p.gainControl && !hold)
    }

    /// One ALSA period, after its capture was read: the mics go into the block, the speaker's
    /// period is rendered and written, and when the block is full it is processed. Returns
    /// whether a block was processed.
    ///
    /// Rendering every period rather than every block is what a short period buys: the
    /// received packets are drained and the jitter buffers asked every period, so a packet
    /// that arrives just after a wake-up waits for the next period, not the next block.
    private func runPeriod() -> Bool {
        let offset = blockPhase * period
        // Mics: interleaved 16-bit → this period's part of one float plane per mic.
        for f in 0..<period {
            let frame = captureInterleaved + f * micCount
            for m in 0..<micCount { mics[m * block + offset + f] = SampleConversion.float(fromInt16: frame[m]) }
        }
        renderSpeakerPeriod(into: speaker + offset)
        if blockTesting { (speaker + offset).update(from: testBlock + offset, count: period) }
        let written = writeSpeaker(speaker + offset)
        if written < 0 {
            let generation = streamGeneration
            handlePlaybackError(Int32(written))
            // Reopened devices start a new block; this period's capture belongs to the old stream.
            if streamGeneration != generation { return false }
        }
        blockPhase += 1
        guard blockPhase * period >= block else { return false }
        blockPhase = 0
        processBlock()
        prepareNextBlock()
        return true
    }

    /// Between blocks, after this block's speaker write and processing, so that none of it
    /// delays the next write: a profile switch (encoder and APM retuned), the listeners' loss
    /// reports (the encoder's FEC and bitrate), and whether the next
    /// block belongs to a self-test. A self-test owns the speaker: the test signal replaces the
    /// room (and is the AEC's reference, so the echo figure is the canceller's real work).
    private func prepareNextBlock() {
        followProfile()
        followLossReports()
        blockTesting = selfTest.active()
        if blockTesting != selfTestHeld { holdForSelfTest(blockTesting) }
        if blockTesting { selfTest.fillSpeaker(testBlock) }
    }

    /// The 10 ms block: the speaker samples written during it are the far-end reference, then
    /// the mics go through the chain, the meters and the encoder.
    private func processBlock() {
        let testing = blockTesting
        _ = apm.analyzeRender(speakerPointers)
        // The raw mics are recorded, then the test talker is added for the chain (double talk).
        if testing { selfTest.takeMics(mics) }
        // For webrtc's AEC (delay-agnostic, so a hint): what is queued ahead of the speaker
        // after this period's write, less that period, plus the block's length on the capture side.
        let queued = playbackEveryPeriod?._withUnsafeGuaranteedRef { $0.delayFrames() } ?? 0
        let delayFrames = max(0, queued - period) + block
        _ = apm.processCapture(micPointers, into: cleanedPointers, delayMilliseconds: delayFrames * 1000 / config.rate)

        let micZero = UnsafeBufferPointer(start: mics, count: block)
        let out = UnsafeBufferPointer(start: UnsafePointer(cleaned), count: block)
        playbackMeter.process(UnsafeBufferPointer(start: UnsafePointer(speaker), count: block))
        inputMeter.process(micZero)
        outputMeter.process(out)
        let voice = apm.voiceDetected
        // (During a self-test the array is held at mic 0: `holdForSelfTest`.)
        if !testing { locatorEveryBlock?._withUnsafeGuaranteedRef { locate($0, voice: voice) } }
        stats.inputLevelBits.store(inputMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.outputLevelBits.store(outputMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.playbackLevelBits.store(playbackMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.voiceActive.store(voice, ordering: .relaxed)
        if voice { stats.voicePeriods.wrappingAdd(1, ordering: .relaxed) }

        if playbackMeter.lastRMSDBFS > config.farEndActiveThresholdDBFS {
            var e0 = 0.0, e1 = 0.0
            for i in 0..<block {
                e0 += Double(mics[i] * mics[i])
                e1 += Double(cleaned[i] * cleaned[i])
            }
            echoIn += e0
            echoOut += e1
            stats.echoInEnergyBits.store(echoIn.bitPattern, ordering: .relaxed)
            stats.echoOutEnergyBits.store(echoOut.bitPattern, ordering: .relaxed)
            stats.farEndActivePeriods.wrappingAdd(1, ordering: .relaxed)
        }
        if stats.periods.load(ordering: .relaxed) % 100 == 0 {
            stats.aecDelayMilliseconds.store(Int(apm.echoStatistics().delay_median_ms), ordering: .relaxed)
        }

        if let ring = processedAudio {
            for i in 0..<block { recordBlock[i] = SampleConversion.int16(fromFloat: cleaned[i], scale: SampleConversion.outputScale) }
            _ = ring.write(from: UnsafeBufferPointer(start: recordBlock, count: block))
        }
        if testing { selfTest.record(cleanedPeriod: cleaned) }
        // During a self-test nothing is sent: the room must not hear the sweep's residue.
        encodeCleaned(voice: voice, send: !testing)
    }

    /// Below this double-talk factor roomd's canceller says someone in the room talks over the
    /// far end: the locator listens then too (farfield double-talk room: lock-on 585 -> 85 ms;
    /// 0.2 and 0.4 added false directions before the talker spoke, 0.1 none).
    static let locatorDoubleTalkFactor: Float = 0.1
    /// Above this factor the canceller's error is what its own uncertainty explains: the far end
    /// plays alone, and the locator learns where its echo comes from (to mask it in double talk).
    static let locatorEchoAloneFactor: Float = 0.5

    /// The talker's direction from this block's raw mics: only a block with voice moves it, and
    /// while the far end plays only when the canceller sees the room talking over it (the
    /// speaker's echo alone would pull the direction around).
    private func locate(_ locator: TalkerLocator, voice: Bool) {
        let farEndQuiet = playbackMeter.lastRMSDBFS <= config.farEndActiveThresholdDBFS
        let doubleTalkFactor = apm.doubleTalkFactor
        let nearEndOverFarEnd = doubleTalkFactor < Self.locatorDoubleTalkFactor
        let echoAlone = !farEndQuiet && doubleTalkFactor > Self.locatorEchoAloneFactor
        locator.process(micPointers, listen: voice && (farEndQuiet || nearEndOverFarEnd),
                        echoAlone: echoAlone, farEndActive: !farEndQuiet, nearShare: nearShare)
        let state = locator.state
        apm.steer(azimuthDegrees: state.azimuthDegrees, hasDirection: state.hasDirection,
                  echoAlone: echoAlone, farEndActive: !farEndQuiet)
        stats.beamAzimuthTenths.store(apm.beamAzimuthDegrees.map { Int(($0 * 10).rounded()) } ?? Int.min, ordering: .relaxed)
        stats.reverberancePermille.store(apm.reverberance.map { Int(($0 * 1000).rounded()) } ?? -1, ordering: .relaxed)
        guard state.hasDirection else { return }
        let tenths = Int((state.azimuthDegrees * 10).rounded())
        stats.talkerAzimuthTenths.store(tenths, ordering: .relaxed)
        stats.talkerLocked.store(state.locked, ordering: .relaxed)
        if state.changes != announcedTalkerChanges {
            announcedTalkerChanges = state.changes
            stats.talkerChanges.store(state.changes, ordering: .relaxed)
            post(.talkerChanged(azimuthTenths: tenths))
        }
    }

    /// Accumulates the cleaned channel into Opus frames; each finished frame goes through the
    /// voice-activity gate and Opus DTX, then to the network ring (or, in loopback mode, through
    /// a simulated lossy network straight back to our own receive side).
    private func encodeCleaned(voice: Bool, send allowed: Bool) {
        var offset = 0
        while offset < block {
            let n = min(block - offset, frameSamples - encodeFill)
            (encodeFrame + encodeFill).update(from: cleaned + offset, count: n)
            encodeFill += n
            offset += n
            guard encodeFill == frameSamples else { continue }
            encodeFill = 0
            guard control.isTransmitting else {
                encoderIdle = true
                packet.timestamp &+= rtpTicksPerFrame
                continue
            }
            if encoderIdle {
                // Back on the air: code this frame as a stream's first, not from stale state.
                encoderIdle = false
                encoder.reset()
            }
            let length = withUnsafeMutableBytes(of: &packet.payload) { raw in
                encoder.encode(encodeFrame, into: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), capacity: MediaPacket.maxPayload)
            }
            let send = allowed && (!voiceGateOn || gate.shouldSend(voice: voice)) && length > 2 && !encoder.inDTX
            if length > 0 { stats.packetsEncoded.wrappingAdd(1, ordering: .relaxed) }
            if length > 2 { stats.lastOpusLayer.store(OpusLayer(toc: packet.payload[0]).rawValue, ordering: .relaxed) }
            if length > 0 && send {
                packet.length = UInt16(length)
                packet.voiceActivity = voice
                packet.audioLevel = audioLevel(encodeFrame, count: frameSamples)
                stats.encodedBytes.wrappingAdd(length, ordering: .relaxed)
                if config.loopback {
                    loopBack()
                } else if outgoing.push(packet) {
                    outgoingSignal?.signal()
                } else {
                    stats.packetsDroppedOutgoing.wrappingAdd(1, ordering: .relaxed)
                }
                packet.sequenceNumber &+= 1
            } else if length > 0 {
                stats.packetsSuppressedByDTX.wrappingAdd(1, ordering: .relaxed)
            }
            // The RTP clock runs on through suppressed frames: the receiver sees a DTX gap.
            packet.timestamp &+= rtpTicksPerFrame
        }
    }

    /// Loopback mode: the frame "arrives" now, unless the simulated network drops it.
    private func loopBack() {
        if config.loopbackLossPercent > 0 {
            if Int(lossRandom.next() % 100) < config.loopbackLossPercent {
                stats.packetsLost.wrappingAdd(1, ordering: .relaxed)
                return
            }
        }
        var arrived = packet
        arrived.arrivalSamples = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        remotes.insert(arrived)
    }

    /// RFC 6464 level of a frame: -dBov of its RMS, 0 (loudest) … 127 (silence).
    private func audioLevel(_ frame: UnsafePointer<Float>, count: Int) -> UInt8 {
        var energy: Float = 0
        for i in 0..<count { energy += frame[i] * frame[i] }
        let dbov = dBFS(fromLinear: (energy / Float(count)).squareRoot(), floor: -127)
        return RTPAudioLevel(voiceActivity: false, dBov: Double(dbov)).level
    }

    /// What the speaker plays this period, into `speaker` (one period of the block): each source
    /// fills its mixer slot (far-end talker, remote streams through their jitter buffers and
    /// decoders), the mixer applies gains and the limiter. The same samples are the APM's
    /// far-end reference.
    private func renderSpeakerPeriod(into speaker: UnsafeMutablePointer<Float>) {
        if let feed = farEndFeedRef {
            let slot = slotAudio + MixerSlot.farEnd * period
            let got = feed._withUnsafeGuaranteedRef { $0.read(into: farEndPeriod) }
            for i in 0..<got { slot[i] = SampleConversion.float(fromInt16: farEndPeriod[i]) }
            for i in got..<period { slot[i] = 0 }
            slotPointers[MixerSlot.farEnd] = UnsafePointer(slot)
        } else if farEnd.count > 0 {
            let slot = slotAudio + MixerSlot.farEnd * period
            for i in 0..<period {
                if farEndPosition >= farEnd.count {
                    guard config.farEndLoops else { slot[i] = 0; continue }
                    farEndPosition = 0
                }
                slot[i] = SampleConversion.float(fromInt16: farEnd[farEndPosition])
                farEndPosition += 1
            }
            slotPointers[MixerSlot.farEnd] = UnsafePointer(slot)
        }
        let now = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        while let received = incoming.pop() { remotes.insert(received) }
        // After the packets: those that came before the release are filed, then freed with it.
        while let departed = releases.pop() { remotes.release(departed, at: now) }
        remotes.render(into: slotAudio + MixerSlot.firstRemote * period, pointers: slotPointers + MixerSlot.firstRemote, now: now,
                       publishing: streamStatistics)
        applyStreamGains()
        mixer.mix(streams: UnsafeBufferPointer(start: slotPointers, count: MixerSlot.count),
                  into: UnsafeMutableBufferPointer(start: speaker, count: period))
    }

    /// Per-sender volumes into the mixer's remote slots, looked up only when a volume was set or
    /// a slot changed sender since the last period.
    private func applyStreamGains() {
        let generation = streamGains.generation
        for i in 0..<MixerSlot.remoteCount {
            let ssrc = remotes.ssrc(ofSlot: i)
            guard ssrc != 0, ssrc != gainSSRCs[i] || generation != gainGeneration else { continue }
            mixer.setGain(streamGains.gain(ssrc: ssrc), slot: MixerSlot.firstRemote + i)
            gainSSRCs[i] = ssrc
        }
        gainGeneration = generation
    }

    /// Writes the period to the speaker, keeping what is queued ahead of the speaker, right
    /// after a capture period arrived, at the headroom: capture and playback clocks drift apart
    /// on real hardware (and on the simulated card with skew), so a period is dropped when a
    /// whole extra period has piled up, and one more is written when the queue is nearly empty
    /// (a card whose position moves in whole periods shows that only as an xrun). Each such
    /// correction is counted.
    private func writeSpeaker(_ speaker: UnsafePointer<Float>) -> Int {
        guard let device = playbackEveryPeriod else { return Int(AlsaCode.notOpen) }
        let channels = config.playbackChannels
        if channels == 1 {   // the usual speaker: a loop that vectorizes
            for i in 0..<period { speakerInterleaved[i] = SampleConversion.int16(fromFloat: speaker[i], scale: SampleConversion.outputScale) }
        } else {
            for i in 0..<period {
                let s = SampleConversion.int16(fromFloat: speaker[i], scale: SampleConversion.outputScale)
                for c in 0..<channels { speakerInterleaved[i * channels + c] = s }
            }
        }
        return device._withUnsafeGuaranteedRef { playback in
            let available = playback.available()
            if available < 0 { return available }
            let fill = playback.bufferFrames - available
            let headroom = config.playbackHeadroomFrames
            if fill >= headroom + period {
                stats.driftCorrections.wrappingAdd(1, ordering: .relaxed)
                return 0
            }
            var rc = playback.write(speakerInterleaved, frames: period)
            if rc >= 0 && fill < headroom / 4 {
                stats.driftCorrections.wrappingAdd(1, ordering: .relaxed)
                rc = playback.write(speakerInterleaved, frames: period)
            }
            return rc
        }
    }

    private func handleCaptureError(_ code: Int32) {
        blockTesting = false
        let xrun = AlsaCode.isXrun(code)
        if xrun { stats.captureXruns.wrappingAdd(1, ordering: .relaxed) }
        selfTest.abort()   // after the count: whoever sees a test aborted by an xrun sees the xrun
        if xrun {
            post(.xrun(capture: true))
            if restartBothDirections(after: code, capture: true) { return }
        }
        recoverLostDevice(capture: true, code: code)
    }

    private func handlePlaybackError(_ code: Int32) {
        blockTesting = false
        let xrun = AlsaCode.isXrun(code)
        if xrun { stats.playbackXruns.wrappingAdd(1, ordering: .relaxed) }
        selfTest.abort()   // after the count: whoever sees a test aborted by an xrun sees the xrun
        if xrun {
            post(.xrun(capture: false))
            if restartBothDirections(after: code, capture: false) { return }
        }
        recoverLostDevice(capture: false, code: code)
    }

    /// An xrun in either direction restarts both, pre-fill included, as at start: the
    /// canceller has learnt the speaker-to-mic delay of streams started back to back, and a
    /// direction restarted alone comes back at another offset against the other. (It did: one
    /// capture xrun in a 2 ms-echo room took ERLE from 43 dB to −17 dB — the output louder than
    /// the mic — for the rest of the session, with playback xruns following; AudioEngineTests.)
    /// Costs the speaker one pre-fill of silence, which the xrun has already broken anyway.
    private func restartBothDirections(after code: Int32, capture isCapture: Bool) -> Bool {
        guard let capture, let playback else { return false }
        guard (isCapture ? capture : playback).recover(code) == 0 else { return false }
        let other = isCapture ? playback : capture
        other.drop()
        guard other.prepare() == 0, startStreams() else { return false }
        return true
    }

    /// Sleeps `milliseconds` in 50 ms steps, returning early once the engine is told to stop:
    /// `stop()` waits for this thread at most 2 s, and a back-off of 2 s must not look like a
    /// thread stuck in the driver.
    private func pause(milliseconds: Int) {
        var left = milliseconds
        while left > 0 && control.running.load(ordering: .relaxed) {
            let step = min(left, 50)
            sleepMilliseconds(step)
            left -= step
        }
    }

    /// Closes both directions (they are one duplex device to the AEC) and reopens them with
    /// exponential back-off, 100 ms doubling to 2 s, until they come back or the engine stops.
    private func recoverLostDevice(capture isCapture: Bool, code: Int32) {
        stats.deviceLosses.wrappingAdd(1, ordering: .relaxed)
        stats.reopeningDevice.store(true, ordering: .relaxed)
        defer { stats.reopeningDevice.store(false, ordering: .relaxed) }
        post(.deviceLost(capture: isCapture, code: code))
        capture = nil
        playback = nil
        var backoff = 100
        var attempt = 0
        while control.running.load(ordering: .relaxed) {
            pause(milliseconds: backoff)
            guard control.running.load(ordering: .relaxed) else { break }
            attempt += 1
            stats.reopenAttempts.wrappingAdd(1, ordering: .relaxed)
            do {
                try openDevices()
                if startStreams() {
                    post(.deviceRestored(attempts: attempt))
                    calmPeriods = 0
                    return
                }
                capture = nil
                playback = nil
                post(.reopenFailed(attempt: attempt, code: AlsaCode.ioError))
            } catch {
                post(.reopenFailed(attempt: attempt, code: error.code))
            }
            backoff = min(backoff * 2, 2000)
        }
    }
}
