import RoomALSA
import RoomAudio
import RoomBase
import RoomClient
import RoomDSP
import RoomSettings
import RoomSystem

/// Why roomd stops before it runs: the message for the journal and the sysexits code.
struct StartFailure: Error {
    let code: Int32
    let message: String
    init(_ code: Int32, _ message: String) { self.code = code; self.message = message }
    static func config(_ m: String) -> StartFailure { StartFailure(ExitStatus.configuration, m) }
    static func os(_ m: String) -> StartFailure { StartFailure(ExitStatus.osError, m) }
    static func device(_ m: String) -> StartFailure { StartFailure(ExitStatus.unavailable, m) }
}

/// Wiring, in the order things must happen: settings → event loop and signals → board and
/// ALSA environment → engine → room link, control socket, panel → engine start → join → serve
/// until told to stop → leave, stop audio, summary.
public struct Daemon {
    let options: Options

    public init(options: Options) { self.options = options }

    public func run() -> Int32 {
        do {
            return try runChecked()
        } catch {
            Log.error(error.message)
            return error.code
        }
    }

    private func runChecked() throws(StartFailure) -> Int32 {
        if let problem = PrivateMemory.keep() { Log.warning("roomd: cannot keep keys out of core dumps: \(problem)") }
        // Settings first: a bad configuration file is reported before anything opens.
        let settings: SettingsStore
        do { settings = try SettingsStore(options: options) } catch { throw .config("\(error)") }
        let initial = settings.effective
        guard let level = LogLevel(name: initial.logLevel) else {
            throw StartFailure(2, LogLevelNames.refusal("log.level", initial.logLevel))
        }
        Log.level = level
        if initial.placesRoom && options.loopback {
            throw StartFailure(2, "--loopback: the configuration joins a room (room.server or room.placement_key); loopback and a room exclude each other")
        }

        var reload: (() -> Void)?
        let (loop, signals) = try makeLoop { reload?() }
        defer { signals.close() }
        let (board, boardFile) = try openBoard(initial.boardPath, settings: settings)
        // The recording's file is created now: a path roomd cannot write is an error before the
        // session, not a recording lost at its end.
        var recorder: WAVRecorder?
        if let path = options.record {
            do { recorder = try WAVRecorder(path: path, sampleRate: board.rate) } catch {
                throw StartFailure(ExitStatus.cannotCreate, "--record: \(error)")
            }
        }
        let farEnd = try openFarEnd(rate: board.rate)
        let corrections = MicCorrectionsKeeper(stateDirectory: settings.stateDirectory, board: board.name, mics: board.captureChannels)
        let engine = try makeEngine(board: board, boardFile: boardFile, settings: initial, micCorrections: corrections.start)
        let farEndFeeder = farEnd.flatMap { FarEndFeeder(reader: $0, engine: engine) }
        farEndFeeder?.topUp()   // a full ring before the first period plays
        // The room link owns the eventfd the engine wakes; it must exist before the engine starts.
        let room: RoomLink
        do { room = try RoomLink(loop: loop, engine: engine, enabled: !options.loopback, plainMedia: options.plainMedia) } catch { throw .os("\(error)") }
        // The call link owns the eventfd the engine wakes for a caller's frames: before the engine too.
        let calls: CallLink
        do { calls = try CallLink(loop: loop, engine: engine) } catch { throw .os("\(error)") }
        let appliance = Appliance(loop: loop, engine: engine, settings: settings, room: room, calls: calls,
                                  selfTestArray: board.hasArray ? SelfTestArrayGeometry(micPositions: board.micPositions, speaker: board.speakerPosition) : nil)
        reload = { [unowned appliance] in _ = appliance.reloadAndLog(origin: "SIGHUP") }
        try attachControlAndPanel(appliance, board: board, boardFile: boardFile, settings: initial)
        calls.onChange = { [unowned appliance] calls in
            appliance.control?.forwardCall(calls)
            appliance.panel?.refresh()
        }
        calls.onDigit = { [unowned appliance] digit in appliance.control?.forwardDigit(digit) }
        room.callerBridged = { [unowned calls] in calls.bridged }
        defer {
            appliance.control?.close()
            appliance.panel?.close()
            appliance.ring?.close()
            calls.close()
        }
        do { try engine.start() } catch { throw .device("\(boardFile): \(error)") }
        if let start = corrections.start, let path = corrections.path {
            if engine.stats.micCorrectionsStarted.load(ordering: .relaxed) {
                Log.info("array: the mics start from the corrections measured before (\(path)): \(MicCorrectionsKeeper.describe(start.map(Double.init)))")
            } else {
                Log.info("\(path): not used (no array processing, or ROOMD_MIC_CALIBRATION=off)")
            }
        }
        if let sip = settings.file.sip {
            do throws(CallLink.Refusal) { try calls.configure(sip) } catch {
                engine.stop()
                throw .config("\(error)")
            }
        }
        if initial.placesRoom {
            // The benches turn this into e2e.join_ms (join request to first remote audio played).
            if options.json { printLine("{\"event\":\"room_session_start\",\"monotonic_ns\":\(monotonicNanoseconds())}") }
            do {
                try appliance.join()
            } catch {
                // A token whose placement is refused (tampered, expired during an outage) must
                // not keep the appliance down and mute about why: it runs without a room,
                // `roomctl status` says why (`room_refused`), and a reload with a good token joins.
                if initial.placementKey != nil, appliance.roomRefusal != nil {
                    Log.error("room: \(error); no room until a token that verifies is reloaded")
                } else {
                    engine.stop()
                    throw .config("room: \(error)")
                }
            }
            appliance.listenAgain()
        }
        return serve(appliance, recorder: recorder, farEnd: farEndFeeder, corrections: corrections, joining: initial.placesRoom)
    }

    /// The event loop and the signals. Before any thread starts, so every thread inherits the
    /// blocked mask and the signals arrive only through the signalfd.
    private func makeLoop(onReload: @escaping () -> Void) throws(StartFailure) -> (EventLoop, SignalSource) {
        do {
            let loop = try EventLoop()
            let signals = try SignalSource(signals: SignalSource.daemonSignals, loop: loop) { signal in
                if signal == SignalNumber.hangUp {
                    onReload()
                } else {
                    Log.notice("stopping on \(signal == SignalNumber.interrupt ? "SIGINT" : "SIGTERM")")
                    loop.stop()
                }
            }
            return (loop, signals)
        } catch {
            throw .os("\(error)")
        }
    }

    /// The board profile, and the ALSA environment its `alsa_config` asks for.
    private func openBoard(_ path: String, settings: SettingsStore) throws(StartFailure) -> (BoardProfile, String) {
        let board: BoardProfile
        let boardFile: String
        do { (board, boardFile) = try loadBoard(path) } catch { throw .config("\(error)") }
        let boardDir = Files.directory(of: Files.absolute(boardFile))
        let alsaConfig = board.alsaConfig.map { Files.resolve($0, relativeTo: boardDir) }
        if let alsaConfig, !Files.exists(alsaConfig) {
            throw .config("\(boardFile): audio.alsa_config: \(alsaConfig) does not exist")
        }
        let env = AlsaEnvironment.prepare(boardAlsaConfig: alsaConfig)
        Log.info("roomd \(roomdVersion): board \(board.name) (\(boardFile))\(env.isEmpty ? "" : "; " + env)"
                 + "; configuration \(settings.configPath ?? "none"); run-time settings \(settings.statePath ?? "not kept")")
        return (board, boardFile)
    }

    /// `--far-end FILE`, opened and checked before anything starts; read as it plays.
    private func openFarEnd(rate: Int) throws(StartFailure) -> WAVStreamReader? {
        guard let path = options.farEnd else { return nil }
        let reader: WAVStreamReader
        do { reader = try WAVStreamReader(path: path, loops: !options.farEndOnce) } catch {
            throw StartFailure(ExitStatus.noInput, "--far-end \(error)")
        }
        guard reader.layout.sampleRate == rate else {
            throw StartFailure(ExitStatus.noInput, "--far-end \(path): sample rate \(reader.layout.sampleRate) Hz, the board runs at \(rate) Hz (convert it, e.g. sox in.wav -r \(rate) out.wav)")
        }
        return reader
    }

    private func makeEngine(board: BoardProfile, boardFile: String, settings: EffectiveSettings,
                            micCorrections: [Float]?) throws(StartFailure) -> AudioEngine {
        var config: EngineConfiguration
        switch engineConfiguration(board: board, settings: settings) {
        case .success(let c): config = c
        case .failure(let message): throw StartFailure(ExitStatus.noInput, message)
        }
        config.micCorrectionsStartDB = micCorrections
        // A board whose array cannot tell directions runs without one, and says why once.
        if board.captureChannels > 1, let problem = AudioEngine.talkerDirectionProblem(rate: config.rate, micPositions: config.micPositions) {
            Log.notice("\(boardFile): [array] \(problem): no array processing on this board (the chain hears mic 0 alone)")
        }
        do {
            let engine = try AudioEngine(configuration: config)
            engine.mixer.setGain(dB: Float(options.farEndGainDB), slot: MixerSlot.farEnd)
            return engine
        } catch {
            throw .device("\(boardFile): \(error)")
        }
    }

    /// The control socket (fatal when it cannot be opened: the rig and people need it), the
    /// buttons and LEDs (a warning: an appliance whose GPIO fails still carries the room's
    /// audio), and the room events that feed both.
    private func attachControlAndPanel(_ appliance: Appliance, board: BoardProfile, boardFile: String,
                                       settings initial: EffectiveSettings) throws(StartFailure) {
        if let path = controlSocketPath(initial) {
            let group: GroupID?
            do { group = try Appliance.controlGroup(initial.controlGroup) } catch {
                throw .config("\(appliance.settings.configPath ?? "--control-group"): control.group: \(error)")
            }
            do {
                appliance.control = try ControlBridge(path: path, group: group, appliance: appliance)
                Log.info("control socket \(path)\(initial.controlGroup.map { ", group " + $0 } ?? "")")
            } catch {
                throw .os("control socket \(path): \(error)")
            }
        }
        do {
            appliance.panel = try Panel(board: board.gpio, loop: appliance.loop, room: appliance.room)
            appliance.panel?.isLinked = { [unowned appliance] in appliance.listening != nil }
            appliance.panel?.calls = appliance.calls
            appliance.panel?.isMuted = { [unowned appliance] in appliance.isMuted }
            appliance.panel?.setMuted = { [unowned appliance] on in appliance.setMuted(on) { _ in } }
            appliance.panel?.afterAction = { [unowned appliance] in appliance.noteMuteState() }
        } catch {
            Log.warning("\(boardFile): gpio: \(error); running without buttons and LEDs")
        }
        if let ring = board.ring {
            do {
                appliance.ring = try TalkerRing(ring: ring, loop: appliance.loop, engine: appliance.engine) { [unowned appliance] in
                    appliance.session?.isEffectivelyMuted ?? false
                }
            } catch {
                Log.warning("\(boardFile): ring: \(error); running without the LED ring")
            }
        }
        appliance.quality.onChange = { [unowned appliance] change in
            let value = change.value.map { " (\(fixedDecimalText($0, 1)))" } ?? ""
            if change.raised {
                Log.warning("call quality: \(change.warning.rawValue)\(value)")
            } else {
                Log.notice("call quality: \(change.warning.rawValue) cleared\(value)")
            }
            appliance.control?.forward(change)
        }
        appliance.onListenEvent = { [unowned appliance] room, event in
            if case .stateChanged(let state) = event { Log.notice("listen: room \(room): \(state.name)") }
            appliance.control?.forwardListen(room: room, event)
            appliance.panel?.refresh()
        }
        appliance.room.onEvent = { [unowned appliance] event in
            RoomEventLog.log(event)
            appliance.quality.note(event)
            appliance.control?.forward(event)
            appliance.panel?.refresh()
            appliance.noteMuteState()
        }
    }

    /// Runs the loop until SIGINT/SIGTERM or `--duration`, then leaves the room, stops the
    /// audio and prints the summary. Returns the exit code.
    private func serve(_ appliance: Appliance, recorder: WAVRecorder?, farEnd: FarEndFeeder?, corrections: MicCorrectionsKeeper,
                       joining: Bool) -> Int32 {
        let loop = appliance.loop, engine = appliance.engine, room = appliance.room
        let reporter = StatusReporter(json: options.json, engine: engine, room: room, quality: appliance.quality)
        var recordingFailed = false
        let started = monotonicNanoseconds()
        func elapsed() -> Double { Double(monotonicNanoseconds() - started) / 1e9 }
        // The event loop owns everything but the audio: engine events and the recorder are
        // drained, the far end topped up and levels published for subscribers every 100 ms,
        // status lines on their own timer, signals through a signalfd.
        // systemd: READY once the engine and the control socket are up; STATUS follows the
        // room and the audio; WATCHDOG=1 only while the audio thread makes progress
        // (HealthMonitor). No-ops outside systemd.
        let notifier = SystemdNotifier()
        let health = HealthMonitor(notifier: notifier, engine: engine, room: room, loopback: options.loopback)
        // The timers' closures hold the appliance and the loop, and the loop holds the closures:
        // they are cancelled on the way out, so the daemon's objects are freed when `serve`
        // returns. Nothing depends on that at exit, but LeakSanitizer (scripts/sanitize) reported
        // the whole graph (8.1 MB in ~62 blocks) as leaked from every roomd, which would hide a
        // real leak among them.
        var timers: [EventLoop.TimerID] = []
        defer { for timer in timers { loop.cancel(timer) } }
        // One housekeeping tick, 10 a second: a wake-up of this thread costs more than the work
        // it does (scheduling and the timer heap; docs/benchmarks.md, "The event loop's share"),
        // and nothing here needs to be sooner: the rings it drains and fills hold over a second,
        // the levels roomctl shows and systemd's STATUS are for people.
        var ticks = 0
        timers.append(loop.schedule(after: .milliseconds(100), repeating: .milliseconds(100)) { [self] in
            drainEvents(engine, control: appliance.control)
            drainRecording(engine, into: recorder, failed: &recordingFailed)
            farEnd?.topUp()
            health.sample()
            appliance.control?.publishLevels()
            ticks += 1
            if ticks % 10 == 0 {
                appliance.quality.tick()
                corrections.keepIfMoved(engine.stats)
            }
        })
        if options.statsInterval > 0 {
            let interval = Duration.milliseconds(Int64(options.statsInterval * 1000))
            timers.append(loop.schedule(after: interval, repeating: interval) { reporter.report(elapsed: elapsed()) })
        }
        if let d = options.duration {
            timers.append(loop.schedule(after: .milliseconds(Int64(d * 1000))) { loop.stop() })
        }
        // Start-up is over a few seconds in (the devices open, the chain set up, the room joined:
        // ~20 ms in a call on loopback). What it alone ran — configuration and board parsing, ALSA's
        // configuration, the dynamic loader's relocation work, the join — stays mapped until
        // unmapped: give those clean, read-only file pages back (the steady state maps again what it
        // touches), and freed heap pages with them. docs/benchmarks.md, "Where roomd's memory goes
        // in a call": about 2 MB of roomd's resident set.
        //
        // Then the memory is locked, on fault (`Realtime.MemoryLock.onFault`): what the call has
        // touched stays resident, so memory pressure cannot page the audio thread's code or data
        // out and make it wait for a major fault mid-period; nothing untouched is faulted in
        // (a full mlockall made the resident set ~49 MB). After the release, because locked
        // pages cannot be given back. docs/systemd.md, "Locked memory".
        let memoryLock = memoryLockMode()
        timers.append(loop.schedule(after: .seconds(3)) {
            let released = ResidentMemory.releaseReadOnlyFilePages()
            ResidentMemory.trimHeap()
            Log.debug("memory: unmapped \(released) KiB of start-up file pages; resident now \(fixedDecimalText(ProcessStats.residentMegabytes(), 1)) MB")
            let code = Realtime.lockMemory(memoryLock)
            if code == 0 {
                if memoryLock != .none { Log.info("memory locked (mlockall, \(memoryLock.rawValue))") }
            } else {
                Log.warning("memory not locked (mlockall: \(Errno(rawValue: code))): under memory pressure the audio thread may wait for pages; systemd: AmbientCapabilities=CAP_IPC_LOCK")
            }
        })
        _ = try? notifier.ready(status: "audio engine running" + (joining ? ", joining the room" : options.loopback ? ", loopback test" : ""))
        if let interval = SystemdNotifier.watchdogInterval() {
            timers.append(loop.schedule(after: interval, repeating: interval) { health.watchdogTick() })
        }
        do {
            try loop.run()
        } catch {
            Log.error("event loop: \(error)")
        }
        _ = try? notifier.stopping()
        // Leave the room properly (others see "left", not a timeout); then audio, then the
        // session: it owns the eventfd the audio thread signals.
        room.shutdown()
        appliance.listening?.link.shutdown(timeout: .seconds(1))
        let stopped = engine.stop()
        // The stats are atomics: readable even with the audio thread stuck.
        corrections.keepIfMoved(engine.stats, stopping: true)
        if !stopped {
            // The process exits next; the room's eventfd is closed with it, so the stuck
            // thread cannot signal a descriptor that was reused.
            Log.error("audio thread did not stop within 2 s (stuck in the sound driver?); exiting without it")
            reporter.summary(elapsed: elapsed())
            return ExitStatus.software
        }
        room.close()
        appliance.listening?.link.close()
        drainEvents(engine)
        drainRecording(engine, into: recorder, failed: &recordingFailed)
        reporter.summary(elapsed: elapsed())
        guard let recorder else { return 0 }
        do {
            if recordingFailed { throw SystemError("the recording stopped early (see above)") }
            try recorder.finish()
            Log.info("recorded \(recorder.samplesWritten) samples of cleaned capture to \(recorder.path)")
            return 0
        } catch {
            Log.error("--record: \(error)")
            return ExitStatus.cannotCreate
        }
    }

    /// The memory lock: on fault, unless the measurement override ROOMD_MEMORY_LOCK says
    /// otherwise (a bad value is reported and ignored, as the other overrides are).
    private func memoryLockMode() -> Realtime.MemoryLock {
        let variable = Realtime.MemoryLock.environmentVariable
        guard let value = Environment.get(variable), !value.isEmpty else { return .onFault }
        if let mode = Realtime.MemoryLock(rawValue: value) { return mode }
        Log.warning("\(variable)=\(value): not a memory lock (\(Realtime.MemoryLock.allCases.map(\.rawValue).joined(separator: ", "))); using onfault")
        return .onFault
    }

    private enum ConfigurationResult { case success(EngineConfiguration), failure(String) }

    /// Board profile + settings + command line → what the engine runs with.
    private func engineConfiguration(board: BoardProfile, settings e: EffectiveSettings) -> ConfigurationResult {
        var config = EngineConfiguration(
            captureDevice: board.captureDevice, playbackDevice: board.playbackDevice, rate: board.rate,
            micChannels: board.captureChannels, playbackChannels: board.playbackChannels,
            micPositions: board.micPositions.map { (Float($0.x), Float($0.y), Float($0.z)) })
        config.periodMilliseconds = board.periodMilliseconds
        config.playbackHeadroomMilliseconds = board.playbackHeadroomMilliseconds
        config.processing.beamform = board.beamformer
        config.loopback = options.loopback
        config.loopbackLossPercent = options.loopbackLossPercent
        config.recordProcessed = options.record != nil
        config.opus.frameMilliseconds = e.opusFrameMilliseconds
        config.profile = e.profile
        config.farEndLoops = !options.farEndOnce
        for feature in options.disabled { feature.switchOff(in: &config.processing) }
        if let level = e.aecSuppression { config.processing.echoSuppression = level }
        config.farEndStreamed = options.farEnd != nil
        return .success(config)
    }

    /// The option, else $ROOMD_CONTROL_SOCKET, else /run/roomd/control.sock when systemd made
    /// /run/roomd for us (RuntimeDirectory); "none" switches the socket off. An empty
    /// variable counts as unset, as roomctl reads it (it once made roomd exit 71).
    private func controlSocketPath(_ e: EffectiveSettings) -> String? {
        let chosen = e.controlSocket ?? Environment.get("ROOMD_CONTROL_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
        if let chosen { return chosen == "none" ? nil : chosen }
        return Files.exists("/run/roomd") ? "/run/roomd/control.sock" : nil
    }

    /// "40°", "-120.5°": tenths of a degree as people read them.
    static func degreesText(_ tenths: Int) -> String {
        (tenths % 10 == 0 ? "\(tenths / 10)" : fixedDecimalText(Double(tenths) / 10, 1)) + "°"
    }

    private func loadBoard(_ path: String) throws -> (BoardProfile, String) {
        let file = path.hasSuffix(".conf") ? path : path + "/board.conf"
        let text = try Files.readText(file)
        return (try BoardProfile.parse(text: text, file: file), file)
    }

    private func drainEvents(_ engine: AudioEngine, control: ControlBridge? = nil) {
        while let event = engine.events.pop() {
            control?.forward(event)
            switch event {
            case .started(let rate, let mics, let beam, let array):
                Log.info("audio engine running: \(rate) Hz, \(mics) mic(s)\(beam ? ", beamformer on" : "")\(array ? ", array processing on (beam, dereverberation)" : "")")
            case .realtimeGranted(let p): Log.info("audio thread runs SCHED_FIFO priority \(p)")
            case .realtimeDenied(let code):
                Log.warning("audio thread: SCHED_FIFO refused (\(Errno(rawValue: code))); running at normal priority")
            case .xrun(let capture): Log.notice("\(capture ? "capture overrun" : "playback underrun") recovered")
            case .deviceLost(let capture, let code):
                Log.error("audio device lost (\(capture ? "capture" : "playback"): \(alsaErrorText(code))); reopening with back-off")
            case .reopenFailed(let attempt, let code):
                Log.warning("audio device reopen attempt \(attempt) failed: \(alsaErrorText(code))")
            case .deviceRestored(let attempts): Log.notice("audio device back after \(attempts) attempt(s)")
            case .stopped: Log.info("audio engine stopped")
            case .talkerChanged(let tenths): Log.info("talker at \(Self.degreesText(tenths))")
            }
        }
    }

    /// Moves what the engine cleaned into the recording file; a failed write (disk full) is
    /// logged once and the recording stops, the session goes on.
    private func drainRecording(_ engine: AudioEngine, into recorder: WAVRecorder?, failed: inout Bool) {
        guard let ring = engine.processedAudio, let recorder else { return }
        var block = [Int16](repeating: 0, count: 4800)
        while true {
            let got = block.withUnsafeMutableBufferPointer { ring.read(into: $0) }
            guard got > 0 else { return }
            guard !failed else { continue }   // keep the ring drained
            do {
                try block.withUnsafeBufferPointer { b throws(SystemError) in try recorder.append(UnsafeBufferPointer(rebasing: b[0..<got])) }
            } catch {
                failed = true
                Log.error("--record: \(error); recording stopped")
            }
        }
    }
}

/// `--far-end FILE` streamed: the reader's samples into the engine's feed ring, on the event loop.
final class FarEndFeeder {
    private let reader: WAVStreamReader
    private let ring: SPSCRing<Int16>
    private var scratch = [Int16](repeating: 0, count: 4800)

    /// nil when the engine was not configured for a streamed far end (`farEndStreamed`).
    init?(reader: WAVStreamReader, engine: AudioEngine) {
        guard let ring = engine.farEndFeed else { return nil }
        self.reader = reader
        self.ring = ring
    }

    func topUp() { reader.feed(ring, scratch: &scratch) }
}

/// The system's text for a negative ALSA-style code (`-errno`).
private func alsaErrorText(_ code: Int32) -> String { Errno(rawValue: code < 0 ? -code : code).description }
