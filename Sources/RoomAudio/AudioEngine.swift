// The engine's public face: `AudioEngine` (start and stop, the rings and controls the daemon
// uses, statistics read-outs), the flags it shares with the audio thread (`EngineControl`) and the
// mixer's slots. The audio thread itself is `AudioLoop`: AudioEngineState.swift and its extensions.

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
    /// Received frames of the room listened to (`MediaLeg.listen`), drained with `incomingMedia`.
    public let listenMedia = SPSCRing<MediaPacket>(capacity: 256)
    /// A call's audio: its frames in and out, its codec and whether it is bridged into the room.
    public let call = CallLeg()
    /// Streams whose senders left (`MediaLeg.key`: leg and SSRC; event loop → audio thread),
    /// drained every period after the packets: their jitter-buffer slots are freed and their
    /// statistics rows go. Push with `releaseStream(ssrc:leg:)` from the thread that feeds the
    /// packet rings.
    public let streamReleases = SPSCRing<UInt64>(capacity: 64)
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
                                 outgoing: outgoingMedia, incoming: incomingMedia, listening: listenMedia, call: call, releases: streamReleases,
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
    public func releaseStream(ssrc: UInt32, leg: MediaLeg = .room) -> Bool {
        guard ssrc != 0 else { return false }
        return streamReleases.push(MediaLeg.key(leg, ssrc))
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

    /// The appliance's mic is muted: nobody is sent it. Without a call that is the same as not
    /// transmitting; with a caller bridged into the room the room still takes the caller's
    /// audio from the appliance (transmitting, mic muted), and the caller still hears the room.
    let micMuted = Atomic<Bool>(false)

    public func setMicMuted(_ on: Bool) { micMuted.store(on, ordering: .relaxed) }

    public var isMicMuted: Bool { micMuted.load(ordering: .relaxed) }
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
