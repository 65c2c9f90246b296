import RoomCaptureChain
import RoomDSP
import RoomMedia
import RoomOpus
import RoomSettings
import RoomSystem
import Synchronization

/// Everything the engine needs to run, resolved from the board profile and the command line.
public struct EngineConfiguration: Sendable {
    public var captureDevice: String
    public var playbackDevice: String
    public var rate: Int
    public var micChannels: Int
    public var playbackChannels: Int
    /// Microphone positions in metres, channel order; empty when the board has no array.
    public var micPositions: [(Float, Float, Float)]
    /// The ALSA period (board profile `audio.period_ms`, one of `BoardProfile.supportedPeriods`):
    /// how often the loop wakes, reads the mics and writes the speaker. The processing chain
    /// (APM, canceller, Opus) always works in 10 ms blocks (`blockMilliseconds`); a 5 ms period
    /// gathers two capture periods per block but renders the speaker every 5 ms, so a received
    /// packet waits at most 5 ms, not 10, for the next playback write (docs/audio-engine.md,
    /// "One thread, lock-step").
    public var periodMilliseconds = 10
    /// The ALSA buffer, in milliseconds rather than periods, so a shorter period does not shrink
    /// the room for the pre-fill and a drift correction (60 ms: six 10 ms periods, twelve 5 ms).
    public var bufferMilliseconds = 60
    /// Periods in each ALSA buffer.
    public var periodsInBuffer: Int { bufferMilliseconds / periodMilliseconds }
    /// The processing block: webrtc-audio-processing and roomd's canceller take 10 ms blocks.
    public static let blockMilliseconds = 10
    /// How far ahead of the speaker the engine writes (board profile
    /// `audio.playback_headroom_ms`): playback starts with one period plus this much silence, so
    /// each period is written this long before it is due. The whole of it is mouth-to-ear delay.
    public var playbackHeadroomMilliseconds = BoardProfile.defaultPlaybackHeadroomMilliseconds
    public var processing = ProcessingSettings()
    public var opus = OpusSettings()
    /// The profile the engine starts with; `EngineControl.profile` switches it while running.
    public var profile: AudioProfile = .speech
    /// Local loopback: what the mics hear, cleaned and Opus-coded, comes out of the speaker.
    public var loopback = false
    /// The jitter buffers' delay floor: none. The target follows the measured arrival spread
    /// (+5 ms), so a floor only added delay on a quiet network: 10 ms of floor cost 3–5.5 ms of
    /// median mouth-to-ear with 0 xruns either way (docs/jitter-buffer.md).
    public var jitterMinimumDelayMs = 0
    /// RTP SSRC the engine stamps on its frames. Only loopback mode sees it: in a room the
    /// session restamps every packet with the SSRC the server assigned.
    public var ssrc: UInt32 = 0x524F_4F4D
    /// Simulated loss on the loopback channel, percent (deterministic pseudo-random).
    public var loopbackLossPercent = 0
    /// A far-end talker: mono 16-bit samples at `rate` played to the speaker as a remote
    /// participant would be. 16-bit as in the file: half the memory of floats (the engine keeps
    /// one copy, converted per sample as it plays; issue 9 counted a 24 s file held twice as
    /// floats, 8.7 MB of the engine bench's RSS).
    public var farEnd: [Int16] = []
    public var farEndLoops = true
    /// The far end comes through `AudioEngine.farEndFeed` instead, which the caller keeps
    /// topped up from a file (`roomd --far-end`: `WAVStreamReader` on the event loop), so a
    /// long file is never held in memory. The speaker plays silence where the feed runs dry.
    public var farEndStreamed = false
    /// Keep the cleaned capture for a recorder (roomd --record, the benches).
    public var recordProcessed = false
    public var realtimePriority: Int32 = 70
    /// Playback level (dBFS) above which a period counts as far-end activity for the ERLE figures.
    public var farEndActiveThresholdDBFS: Float = -50
    /// The array's mic corrections (dB, mic 0 first) an earlier run measured on this board: the
    /// calibration starts from them (`AudioProcessor.startMicCorrections`); nil measures afresh.
    public var micCorrectionsStartDB: [Float]?

    public init(captureDevice: String, playbackDevice: String, rate: Int, micChannels: Int,
                playbackChannels: Int, micPositions: [(Float, Float, Float)]) {
        self.captureDevice = captureDevice
        self.playbackDevice = playbackDevice
        self.rate = rate
        self.micChannels = micChannels
        self.playbackChannels = playbackChannels
        self.micPositions = micPositions
    }

    public var periodFrames: Int { rate * periodMilliseconds / 1000 }
    /// Frames in one processing block (10 ms): what the APM, the meters and the self-test see.
    public var blockFrames: Int { rate * Self.blockMilliseconds / 1000 }
    /// ALSA periods per processing block (2 at 5 ms, 1 at 10 ms).
    public var periodsPerBlock: Int { Self.blockMilliseconds / periodMilliseconds }
    public var playbackHeadroomFrames: Int { rate * playbackHeadroomMilliseconds / 1000 }
    /// Silence written before playback starts: the period being processed plus the headroom.
    public var playbackPrefillFrames: Int { periodFrames + playbackHeadroomFrames }

    /// Checks what ALSA would only discover late, naming the offending setting.
    public func validate() throws(EngineError) {
        guard [8000, 16000, 32000, 48000].contains(rate) else {
            throw EngineError("audio.rate: \(rate) Hz is not supported (8000, 16000, 32000 or 48000)")
        }
        guard opusRates.contains(rate) else {
            throw EngineError("audio.rate: \(rate) Hz is not an Opus rate (8000, 16000 or 48000 work with both APM and Opus)")
        }
        guard (1...8).contains(micChannels) else { throw EngineError("audio.capture_channels: \(micChannels) is not supported (1..8)") }
        guard (1...2).contains(playbackChannels) else { throw EngineError("audio.playback_channels: \(playbackChannels) is not supported (1..2)") }
        guard BoardProfile.supportedPeriods.contains(periodMilliseconds) else {
            let choices = BoardProfile.supportedPeriods.map(String.init).joined(separator: " or ")
            throw EngineError("audio.period_ms: \(periodMilliseconds) is not supported (\(choices): whole divisors of the 10 ms processing block)")
        }
        guard opus.frameMilliseconds == 10 || opus.frameMilliseconds == 20 else {
            throw EngineError("opus frame: \(opus.frameMilliseconds) ms is not supported (10 or 20)")
        }
        guard micPositions.isEmpty || micPositions.count == micChannels else {
            throw EngineError("array: \(micPositions.count) mic positions for \(micChannels) capture channels")
        }
        guard playbackHeadroomMilliseconds >= 1, playbackPrefillFrames + 2 * periodFrames <= periodsInBuffer * periodFrames else {
            throw EngineError("audio.playback_headroom_ms: \(playbackHeadroomMilliseconds) is not supported with \(periodMilliseconds) ms periods (1 to \(bufferMilliseconds - 3 * periodMilliseconds) ms)")
        }
        guard (0...100).contains(loopbackLossPercent) else { throw EngineError("loopback loss: \(loopbackLossPercent) % is not in 0..100") }
    }
}

public struct EngineError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What the audio thread tells the rest of the daemon. Trivial payloads only, so it crosses the
/// SPSC ring by plain copy.
public enum EngineEvent: Sendable, Equatable, BitwiseCopyable {
    case started(rate: Int, micChannels: Int, beamforming: Bool, array: Bool)
    case realtimeGranted(priority: Int32)
    /// SCHED_FIFO was refused; `code` is the errno value pthread_setschedparam returned.
    case realtimeDenied(code: Int32)
    case xrun(capture: Bool)
    case deviceLost(capture: Bool, code: Int32)
    case reopenFailed(attempt: Int, code: Int32)
    case deviceRestored(attempts: Int)
    case stopped
    /// The array found a talker in a new direction (tenths of a degree, board frame).
    case talkerChanged(azimuthTenths: Int)
}

/// Where the talker is, as the array hears it (`TalkerLocator`).
public struct TalkerDirection: Sendable, Equatable {
    /// Board frame: 0° along +x (mic0 on board/sim), counter-clockwise, -180...180.
    public var azimuthDegrees: Double
    /// A talker's direction is held; false before the first and after 2 s without anyone
    /// talking (the direction is then the last one).
    public var locked: Bool
    /// How often the direction moved to a new talker (or was first found).
    public var changes: Int
}

/// Counters and levels the audio thread publishes with relaxed atomics: readers see a recent
/// value, the writer never waits.
public final class EngineStats: Sendable {
    /// 10 ms blocks processed: the engine's progress. The daemon's watchdog feeds systemd
    /// only while this advances (or while `reopeningDevice`), so a stalled card is restarted.
    public let periods = Atomic<Int>(0)
    /// True while the audio thread has lost its device and reopens it with back-off
    /// (`EngineEvent.deviceLost` … `.deviceRestored`): no block runs then, on purpose.
    public let reopeningDevice = Atomic<Bool>(false)
    /// Reopen attempts so far (each one at most 2 s after the last): shows that a recovery is
    /// alive rather than stuck inside an open.
    public let reopenAttempts = Atomic<Int>(0)
    /// The profile the audio thread has applied (index in `AudioProfile.allCases`; -1 before
    /// the first period): how a caller sees a switch take effect.
    public let profileIndex = Atomic<Int>(-1)
    public var appliedProfile: AudioProfile? {
        let i = profileIndex.load(ordering: .relaxed)
        return i >= 0 && i < AudioProfile.allCases.count ? AudioProfile.allCases[i] : nil
    }
    public let captureXruns = Atomic<Int>(0)
    public let playbackXruns = Atomic<Int>(0)
    /// The longest time one period's work took (from the capture read's return to the end of
    /// the period: processing, coding, the playback write), in ns, since a reader last took it
    /// (`takeLongestPeriod`). The status's CPU share is an average; an xrun comes from one
    /// period that ran past the buffer's headroom, and this shows how close the worst came.
    let longestPeriodNanoseconds = Atomic<Int>(0)
    /// The longest period's work since the last call, in ms, and starts the next interval.
    public func takeLongestPeriod() -> Double {
        Double(longestPeriodNanoseconds.exchange(0, ordering: .relaxed)) / 1e6
    }
    /// The talker's direction in tenths of a degree (`Int.min`: none yet), whether it is locked
    /// and how often it changed: `talker` reads them.
    let talkerAzimuthTenths = Atomic<Int>(Int.min)
    let talkerLocked = Atomic<Bool>(false)
    let talkerChanges = Atomic<Int>(0)
    /// Where the beam points, tenths of a degree (`Int.min`: mic 0 alone, or no array), and how
    /// reverberant the dereverberation finds the room, per mille (-1: it does not run).
    let beamAzimuthTenths = Atomic<Int>(Int.min)
    let reverberancePermille = Atomic<Int>(-1)
    /// The gains (dB) that bring each mic of the array to mic 0's sensitivity, packed into one
    /// word so the audio thread publishes them with one store: the count in the low 4 bits, then
    /// per mic 7 bits of tenths of a dB offset by 64 (−6.4 … +6.3 dB; the corrections stop at 6).
    let micCorrectionsPacked = Atomic<Int>(0)
    static let maxCorrectedMics = 8
    /// Blocks this run measured the mics' sensitivities in (`AudioProcessor.micCalibrationBlocks`):
    /// 0 while the corrections are only where they started.
    public let micCalibrationBlocks = Atomic<Int>(0)
    /// The calibration started from `EngineConfiguration.micCorrectionsStartDB` (set before the
    /// first block; false without a start, without an array or with the calibration off).
    public let micCorrectionsStarted = Atomic<Bool>(false)

    static func packCorrections(_ db: UnsafeMutableBufferPointer<Float>, count: Int) -> Int {
        let n = min(count, maxCorrectedMics)
        var word = n
        for m in 0..<n {
            let tenths = max(-64, min(63, Int((db[m] * 10).rounded())))
            word |= (tenths + 64) << (4 + 7 * m)
        }
        return word
    }

    /// Per mic, the gain in dB the array puts on it to match mic 0 (0 until measured); nil
    /// without an array. docs/audio-engine.md, "The mics brought to one sensitivity".
    public var micCorrectionsDB: [Double]? {
        let word = micCorrectionsPacked.load(ordering: .relaxed)
        let n = word & 0xF
        guard n > 0 else { return nil }
        return (0..<n).map { (m: Int) -> Double in
            let tenths: Int = ((word >> (4 + 7 * m)) & 0x7F) - 64
            return Double(tenths) / 10
        }
    }

    /// The beam's centre (board-frame degrees), nil while the chain hears mic 0 alone.
    public var beamAzimuthDegrees: Double? {
        let tenths = beamAzimuthTenths.load(ordering: .relaxed)
        return tenths == Int.min ? nil : Double(tenths) / 10
    }
    /// 0 (dry) … 1 (reverberant): how much dereverberation is applied; nil without it.
    public var reverberance: Double? {
        let p = reverberancePermille.load(ordering: .relaxed)
        return p < 0 ? nil : Double(p) / 1000
    }
    /// Nil on a board without an array that can tell directions, or before anyone talked.
    public var talker: TalkerDirection? {
        let tenths = talkerAzimuthTenths.load(ordering: .relaxed)
        guard tenths != Int.min else { return nil }
        return TalkerDirection(azimuthDegrees: Double(tenths) / 10, locked: talkerLocked.load(ordering: .relaxed),
                               changes: talkerChanges.load(ordering: .relaxed))
    }
    public let deviceLosses = Atomic<Int>(0)
    public let driftCorrections = Atomic<Int>(0)
    public let voicePeriods = Atomic<Int>(0)
    /// Blocks in which every microphone gave one sample value throughout: nothing a room makes
    /// (its noise moves the low bits), but an unplugged array or a dead capture path does
    /// (`constant_input_level`, docs/control-api.md).
    public let constantInputBlocks = Atomic<Int>(0)
    /// Periods in which remote streams played, and of those the ones in which all they decoded
    /// was silence (below one 16-bit step, before the volume): the far end sends packets of
    /// nothing (`constant_output_level`).
    public let remoteAudioPeriods = Atomic<Int>(0)
    public let silentRemoteAudioPeriods = Atomic<Int>(0)
    public let voiceActive = Atomic<Bool>(false)
    public let packetsEncoded = Atomic<Int>(0)
    /// The `OpusLayer` raw value of the last packet coded (-1: none yet): whether a clean
    /// network has the transform layer (`LossAdaptation.coding(for:)`).
    public let lastOpusLayer = Atomic<Int>(-1)
    public var opusLayer: OpusLayer? { OpusLayer(rawValue: lastOpusLayer.load(ordering: .relaxed)) }
    /// The coding encoder's look-ahead in tenths of a ms (`OpusEncoderBox.lookaheadSamples`:
    /// 6.5 ms protecting, 2.5 ms on a clean network), -1 before the first block.
    let opusLookaheadTenths = Atomic<Int>(-1)
    public var opusLookaheadMilliseconds: Double? {
        let t = opusLookaheadTenths.load(ordering: .relaxed)
        return t < 0 ? nil : Double(t) / 10
    }
    public let packetsSuppressedByDTX = Atomic<Int>(0)
    /// Loopback mode: frames the simulated network dropped.
    public let packetsLost = Atomic<Int>(0)
    /// Frames the network thread did not take in time (its ring was full).
    public let packetsDroppedOutgoing = Atomic<Int>(0)
    /// Receive side, summed over the remote streams' jitter buffers.
    public let encodedBytes = Atomic<Int>(0)
    /// Heap allocations seen on the audio thread in steady-state periods (needs the probe).
    public let steadyAllocations = Atomic<Int>(0)
    public let steadyPeriodsMeasured = Atomic<Int>(0)
    public let allocationProbeActive = Atomic<Bool>(false)
    /// The probe moved by exactly one for a deliberate malloc on the audio thread.
    public let allocationProbeVerified = Atomic<Bool>(false)
    /// Allocations outside steady state (start-up, recoveries): shows the probe sees the thread.
    public let unsteadyAllocations = Atomic<Int>(0)
    /// Swift retains on the audio thread in steady-state periods (needs the probe): reference
    /// counting on objects the event loop also holds is cache-line traffic between cores.
    public let steadyRetains = Atomic<Int>(0)
    /// The probe's retain counter moved for a deliberate retain on the audio thread.
    public let retainProbeVerified = Atomic<Bool>(false)
    /// CPU time of the audio thread since its loop started, nanoseconds, as of its end (while
    /// it runs, `snapshot()` reads the thread's clock itself: the audio loop makes no system
    /// call for it — the per-block read was one of the loop's three per period).
    let threadCPUAtEnd = Atomic<UInt64>(0)
    /// The running audio thread's CPU clock (`currentThreadCPUClock`) and its reading when the
    /// loop started; `threadCPUClockSet` is false before and after.
    let threadCPUClock = Atomic<Int32>(0)
    let threadCPUAtStart = Atomic<UInt64>(0)
    let threadCPUClockSet = Atomic<Bool>(false)

    /// Called by the audio thread as its loop starts.
    func audioThreadStarted() {
        guard let clock = currentThreadCPUClock(), let now = cpuNanoseconds(on: clock) else { return }
        threadCPUClock.store(clock, ordering: .relaxed)
        threadCPUAtStart.store(now, ordering: .relaxed)
        threadCPUAtEnd.store(0, ordering: .relaxed)
        threadCPUClockSet.store(true, ordering: .releasing)
    }

    /// Called by the audio thread as its loop ends: keeps the total for later snapshots.
    func audioThreadEnding() {
        guard threadCPUClockSet.load(ordering: .acquiring) else { return }
        let start = threadCPUAtStart.load(ordering: .relaxed)
        threadCPUAtEnd.store((cpuNanoseconds(on: threadCPUClock.load(ordering: .relaxed)) ?? start) &- start, ordering: .relaxed)
        threadCPUClockSet.store(false, ordering: .releasing)
    }

    /// The audio thread's CPU time since its loop started: read from its clock while it runs,
    /// the total it left when it has stopped.
    public var threadCPUNanoseconds: UInt64 {
        if threadCPUClockSet.load(ordering: .acquiring),
           let now = cpuNanoseconds(on: threadCPUClock.load(ordering: .relaxed)) {
            return now &- threadCPUAtStart.load(ordering: .relaxed)
        }
        return threadCPUAtEnd.load(ordering: .relaxed)
    }
    /// Smoothed levels in dBFS, stored as Float bit patterns.
    let inputLevelBits = Atomic<UInt32>(Float(-100).bitPattern)
    let outputLevelBits = Atomic<UInt32>(Float(-100).bitPattern)
    let playbackLevelBits = Atomic<UInt32>(Float(-100).bitPattern)
    /// Cumulative energies over far-end-active periods (Double bit patterns): mic 0 before and
    /// the cleaned channel after processing. Differences between two snapshots give the ERLE
    /// over any interval.
    let echoInEnergyBits = Atomic<UInt64>(0)
    let echoOutEnergyBits = Atomic<UInt64>(0)
    public let farEndActivePeriods = Atomic<Int>(0)
    /// AEC's own delay estimate, milliseconds (-1 unknown).
    public let aecDelayMilliseconds = Atomic<Int>(-1)

    /// Samples per period, so energies can be compared with the 16-bit quantization floor.
    public let periodFrames: Int

    /// Per remote stream receive counters (the audio thread publishes them each period); the
    /// snapshot's receive totals are derived from them, not kept a second time.
    public let streams: StreamStatistics

    public init(periodFrames: Int, streamSlots: Int = MixerSlot.remoteCount) {
        self.periodFrames = periodFrames
        streams = StreamStatistics(slots: streamSlots)
    }

    public var inputLevel: Float { Float(bitPattern: inputLevelBits.load(ordering: .relaxed)) }
    public var outputLevel: Float { Float(bitPattern: outputLevelBits.load(ordering: .relaxed)) }
    public var playbackLevel: Float { Float(bitPattern: playbackLevelBits.load(ordering: .relaxed)) }

    public func snapshot() -> EngineSnapshot {
        snapshot(now: mediaClockSamples(nanoseconds: monotonicNanoseconds()))
    }

    /// The counters, with the streams judged active or idle at `now` (media clock).
    public func snapshot(now: Int64) -> EngineSnapshot {
        let rows = streams.rows()
        // Totals over every stream heard, the ended ones included: they only grow.
        let retired = streams.retired
        return EngineSnapshot(
            periods: periods.load(ordering: .relaxed),
            captureXruns: captureXruns.load(ordering: .relaxed),
            playbackXruns: playbackXruns.load(ordering: .relaxed),
            deviceLosses: deviceLosses.load(ordering: .relaxed),
            driftCorrections: driftCorrections.load(ordering: .relaxed),
            voicePeriods: voicePeriods.load(ordering: .relaxed),
            voiceActive: voiceActive.load(ordering: .relaxed),
            packetsEncoded: packetsEncoded.load(ordering: .relaxed),
            packetsSuppressedByDTX: packetsSuppressedByDTX.load(ordering: .relaxed),
            packetsLost: packetsLost.load(ordering: .relaxed),
            receivedLost: rows.reduce(retired.lost) { $0 + $1.lost },
            receivedLate: rows.reduce(retired.late) { $0 + $1.late },
            // What a listener waits now: the largest delay among the streams playing. An idle
            // stream's last delay is history (issue 10: 203-209 ms shown for minutes after a
            // malformed publisher had left, while the real stream's was 13 ms).
            jitterBufferDelayMs: Int(rows.filter { $0.isActive(now: now) }.map(\.delayMs).max() ?? 0),
            fecRecovered: rows.reduce(retired.fecRecovered) { $0 + $1.fecRecovered },
            concealedFrames: rows.reduce(retired.concealed) { $0 + $1.concealed },
            encodedBytes: encodedBytes.load(ordering: .relaxed),
            steadyAllocations: steadyAllocations.load(ordering: .relaxed),
            steadyPeriodsMeasured: steadyPeriodsMeasured.load(ordering: .relaxed),
            allocationProbeActive: allocationProbeActive.load(ordering: .relaxed),
            allocationProbeVerified: allocationProbeVerified.load(ordering: .relaxed),
            unsteadyAllocations: unsteadyAllocations.load(ordering: .relaxed),
            threadCPUNanoseconds: threadCPUNanoseconds,
            inputLevel: inputLevel, outputLevel: outputLevel, playbackLevel: playbackLevel,
            echoInEnergy: Double(bitPattern: echoInEnergyBits.load(ordering: .relaxed)),
            echoOutEnergy: Double(bitPattern: echoOutEnergyBits.load(ordering: .relaxed)),
            farEndActivePeriods: farEndActivePeriods.load(ordering: .relaxed),
            aecDelayMilliseconds: aecDelayMilliseconds.load(ordering: .relaxed),
            constantInputBlocks: constantInputBlocks.load(ordering: .relaxed),
            remoteAudioPeriods: remoteAudioPeriods.load(ordering: .relaxed),
            silentRemoteAudioPeriods: silentRemoteAudioPeriods.load(ordering: .relaxed),
            periodFrames: periodFrames)
    }
}

/// A copy of the counters at one instant.
public struct EngineSnapshot: Sendable {
    public var periods, captureXruns, playbackXruns, deviceLosses, driftCorrections: Int
    public var voicePeriods: Int
    public var voiceActive: Bool
    public var packetsEncoded, packetsSuppressedByDTX, packetsLost: Int
    public var receivedLost, receivedLate, jitterBufferDelayMs: Int
    public var fecRecovered, concealedFrames, encodedBytes: Int
    public var steadyAllocations, steadyPeriodsMeasured: Int
    public var allocationProbeActive: Bool
    public var allocationProbeVerified: Bool
    public var unsteadyAllocations: Int
    public var threadCPUNanoseconds: UInt64
    public var inputLevel, outputLevel, playbackLevel: Float
    public var echoInEnergy, echoOutEnergy: Double
    public var farEndActivePeriods: Int
    public var aecDelayMilliseconds: Int
    /// The call-quality counters (`EngineStats.constantInputBlocks` and the two after it).
    public var constantInputBlocks, remoteAudioPeriods, silentRemoteAudioPeriods: Int
    public var periodFrames: Int

    /// Echo return loss enhancement between two snapshots, over far-end-active periods:
    /// 10·log10(mic energy / cleaned energy). The cleaned energy is floored at 16-bit
    /// quantization noise (one LSB², /12, per sample): the chain outputs digital silence when
    /// only echo comes in, and "infinitely many dB" would say nothing. Nil when no far-end
    /// activity happened in between. Meaningful only while the near end is silent.
    public func erleDB(since earlier: EngineSnapshot) -> Double? {
        let inE = echoInEnergy - earlier.echoInEnergy
        let outE = echoOutEnergy - earlier.echoOutEnergy
        let periods = farEndActivePeriods - earlier.farEndActivePeriods
        guard periods > 0, inE > 0 else { return nil }
        let lsb = 1.0 / 32768
        let floor = Double(periods * periodFrames) * lsb * lsb / 12
        let ratio = inE / max(outE, floor)
        return ratio > 0 ? decibels(powerRatio: ratio) : -2000   // finite: the figure goes into JSON
    }
}
