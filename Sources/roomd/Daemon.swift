import Glibc
import RoomAudio
import RoomClient
import RoomCore
import RoomSystem

/// Wiring: board profile → ALSA environment → engine → status lines until told to stop.
struct Daemon {
    let options: Options

    func run() -> Int32 {
        // Settings first: a bad configuration file is reported before anything opens.
        let settings: SettingsStore
        do {
            settings = try SettingsStore(options: options)
        } catch {
            Log.error("\(error)")
            return 78  // EX_CONFIG
        }
        let initial = settings.effective
        if let level = LogLevel(name: initial.logLevel) { Log.level = level } else {
            Log.error("--log-level: unknown level \"\(initial.logLevel)\" (error, warning, notice, info, debug)")
            return 2
        }
        if !initial.servers.isEmpty && options.loopback {
            Log.error("--loopback: the configuration joins a room (room.server); loopback and a room exclude each other")
            return 2
        }
        var reload: (() -> Void)?
        let loop: EventLoop
        let signals: SignalSource
        do {
            loop = try EventLoop()
            // Before any thread starts, so every thread inherits the blocked mask and the
            // signals arrive only through the signalfd.
            signals = try SignalSource(signals: [SIGINT, SIGTERM, SIGHUP], loop: loop) { signal in
                if signal == SIGHUP {
                    reload?()
                } else {
                    Log.notice("stopping on \(signal == SIGINT ? "SIGINT" : "SIGTERM")")
                    loop.stop()
                }
            }
        } catch {
            Log.error("\(error)")
            return 71  // EX_OSERR
        }
        defer { signals.close() }

        let board: BoardProfile
        let boardFile: String
        do {
            (board, boardFile) = try loadBoard(initial.boardPath)
        } catch {
            Log.error("\(error)")
            return 78  // EX_CONFIG
        }
        let boardDir = Files.directory(of: Files.absolute(boardFile))
        let alsaConfig = board.alsaConfig.map { Files.resolve($0, relativeTo: boardDir) }
        if let alsaConfig, !Files.exists(alsaConfig) {
            Log.error("\(boardFile): audio.alsa_config: \(alsaConfig) does not exist")
            return 78
        }
        let env = AlsaEnvironment.prepare(boardAlsaConfig: alsaConfig)
        Log.info("roomd \(roomdVersion): board \(board.name) (\(boardFile))\(env.isEmpty ? "" : "; " + env)"
                 + "; configuration \(settings.configPath ?? "none"); run-time settings \(settings.statePath ?? "not kept")")

        let config: EngineConfiguration
        switch engineConfiguration(board: board, settings: initial) {
        case .success(let c): config = c
        case .failure(let message):
            Log.error(message)
            return 66  // EX_NOINPUT
        }
        let engine: AudioEngine
        do {
            engine = try AudioEngine(configuration: config)
            engine.mixer.setGain(dB: Float(options.farEndGainDB), slot: MixerSlot.farEnd)
        } catch {
            Log.error("\(boardFile): \(error)")
            return 69  // EX_UNAVAILABLE
        }
        // The room link owns the eventfd the engine wakes; it must exist before the engine starts.
        let room: RoomLink
        do {
            room = try RoomLink(loop: loop, engine: engine, enabled: !options.loopback)
        } catch {
            Log.error("\(error)")
            return 71
        }
        let appliance = Appliance(loop: loop, engine: engine, settings: settings, room: room)
        reload = { [unowned appliance] in _ = appliance.reloadAndLog(origin: "SIGHUP") }
        if let path = controlSocketPath(initial) {
            let group: gid_t?
            do {
                group = try Appliance.controlGroup(initial.controlGroup)
            } catch {
                Log.error("\(settings.configPath ?? "--control-group"): control.group: \(error)")
                return 78  // EX_CONFIG
            }
            do {
                appliance.control = try ControlBridge(path: path, group: group, appliance: appliance)
                Log.info("control socket \(path)\(initial.controlGroup.map { ", group " + $0 } ?? "")")
            } catch {
                Log.error("control socket \(path): \(error)")
                return 71  // EX_OSERR
            }
        }
        defer { appliance.control?.close() }
        // Buttons and LEDs. An appliance whose GPIO fails still serves audio: warn, go on.
        do {
            appliance.panel = try Panel(board: board.gpio, loop: loop, room: room)
            appliance.panel?.afterAction = { [unowned appliance] in appliance.noteMuteState() }
        } catch {
            Log.warning("\(boardFile): gpio: \(error); running without buttons and LEDs")
        }
        defer { appliance.panel?.close() }
        room.onEvent = { [unowned appliance] event in
            RoomEventLog.log(event)
            appliance.control?.forward(event)
            appliance.panel?.refresh()
            appliance.noteMuteState()
        }
        do {
            try engine.start()
        } catch {
            Log.error("\(boardFile): \(error)")
            return 69  // EX_UNAVAILABLE
        }
        if !initial.servers.isEmpty {
            // The benches turn this into e2e.join_ms (join request to first remote audio played).
            if options.json { printLine("{\"event\":\"room_session_start\",\"monotonic_ns\":\(monotonicNanoseconds())}") }
            do {
                try appliance.join()
            } catch {
                Log.error("room: \(error)")
                engine.stop()
                return 78
            }
        }

        let reporter = StatusReporter(json: options.json, engine: engine, room: room)
        var recorded: [Int16] = []
        let started = monotonicNanoseconds()
        func elapsed() -> Double { Double(monotonicNanoseconds() - started) / 1e9 }
        // The event loop owns everything but the audio: engine events and the recorder are
        // drained every 50 ms, status lines on their own timer, signals through a signalfd.
        _ = loop.schedule(after: .milliseconds(50), repeating: .milliseconds(50)) { [self] in
            drainEvents(engine, control: appliance.control)
            drainRecording(engine, into: &recorded)
        }
        _ = loop.schedule(after: .milliseconds(100), repeating: .milliseconds(100)) { appliance.control?.publishLevels() }
        if options.statsInterval > 0 {
            let interval = Duration.milliseconds(Int64(options.statsInterval * 1000))
            _ = loop.schedule(after: interval, repeating: interval) { reporter.report(elapsed: elapsed()) }
        }
        if let d = options.duration {
            _ = loop.schedule(after: .milliseconds(Int64(d * 1000))) { loop.stop() }
        }
        // systemd: READY once the engine and the control socket are up; watchdog keepalives
        // from this loop, so a wedged loop gets the service restarted. No-ops outside systemd.
        let notifier = SystemdNotifier()
        _ = try? notifier.ready(status: "audio engine running\(initial.servers.isEmpty ? "" : ", joining the room")")
        if let interval = SystemdNotifier.watchdogInterval() {
            _ = loop.schedule(after: interval, repeating: interval) { _ = try? notifier.watchdog() }
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
        engine.stop()
        room.close()
        drainEvents(engine)
        drainRecording(engine, into: &recorded)
        reporter.summary(elapsed: elapsed())
        var exitCode: Int32 = 0
        if let path = options.record {
            let audio = WAVAudio(sampleRate: board.rate, channels: 1, samples: recorded)
            do {
                try Files.writeAtomically(path, WAVFile.encode(audio))
                Log.info("recorded \(recorded.count) samples of cleaned capture to \(path)")
            } catch {
                Log.error("--record: \(error)")
                exitCode = 73  // EX_CANTCREAT
            }
        }
        return exitCode
    }

    private enum ConfigurationResult { case success(EngineConfiguration), failure(String) }

    /// Board profile + settings + command line → what the engine runs with.
    private func engineConfiguration(board: BoardProfile, settings e: EffectiveSettings) -> ConfigurationResult {
        var config = EngineConfiguration(
            captureDevice: board.captureDevice, playbackDevice: board.playbackDevice, rate: board.rate,
            micChannels: board.captureChannels, playbackChannels: board.playbackChannels,
            micPositions: board.micPositions.map { (Float($0.x), Float($0.y), Float($0.z)) })
        config.periodMilliseconds = board.periodMilliseconds
        config.processing.beamform = board.beamformer
        config.loopback = options.loopback
        config.loopbackLossPercent = options.loopbackLossPercent
        config.recordProcessed = options.record != nil
        config.opus.frameMilliseconds = e.opusFrameMilliseconds
        config.profile = e.profile
        config.farEndLoops = !options.farEndOnce
        for (feature, on) in options.processing {
            switch feature {
            case "aec": config.processing.echoCancel = on
            case "ns": config.processing.noiseSuppress = on
            case "agc": config.processing.gainControl = on
            case "vad": config.processing.voiceDetect = on
            case "hpf": config.processing.highPass = on
            default: config.processing.beamform = on
            }
        }
        if let level = e.aecSuppression { config.processing.echoSuppression = level }
        if let path = options.farEnd {
            do {
                config.farEnd = try loadFarEnd(path, rate: board.rate)
            } catch {
                return .failure("--far-end \(path): \(error)")
            }
        }
        return .success(config)
    }

    /// The option, else $ROOMD_CONTROL_SOCKET, else /run/roomd/control.sock when systemd made
    /// /run/roomd for us (RuntimeDirectory); "none" switches the socket off.
    private func controlSocketPath(_ e: EffectiveSettings) -> String? {
        let chosen = e.controlSocket ?? Environment.get("ROOMD_CONTROL_SOCKET")
        if let chosen { return chosen == "none" ? nil : chosen }
        return Files.exists("/run/roomd") ? "/run/roomd/control.sock" : nil
    }

    private func loadBoard(_ path: String) throws -> (BoardProfile, String) {
        let file = path.hasSuffix(".conf") ? path : path + "/board.conf"
        let text = try Files.readText(file)
        return (try BoardProfile.parse(text: text, file: file), file)
    }

    private func loadFarEnd(_ path: String, rate: Int) throws -> [Float] {
        let audio = try WAVFile.decode(bytes: Files.read(path))
        guard audio.sampleRate == rate else {
            throw EngineError("sample rate \(audio.sampleRate) Hz, the board runs at \(rate) Hz (convert it, e.g. sox in.wav -r \(rate) out.wav)")
        }
        var mono: [Float] = []
        mono.reserveCapacity(audio.frames)
        let samples = audio.samples
        for f in 0..<audio.frames { mono.append(Float(samples[f * audio.channels]) / 32768) }
        return mono
    }

    private func drainEvents(_ engine: AudioEngine, control: ControlBridge? = nil) {
        while let event = engine.events.pop() {
            control?.forward(event)
            switch event {
            case .started(let rate, let mics, let beam):
                Log.info("audio engine running: \(rate) Hz, \(mics) mic(s)\(beam ? ", beamformer on" : "")")
            case .realtimeGranted(let p): Log.info("audio thread runs SCHED_FIFO priority \(p)")
            case .realtimeDenied(let code):
                Log.warning("audio thread: SCHED_FIFO refused (\(String(cString: strerror(code)))); running at normal priority")
            case .xrun(let capture): Log.notice("\(capture ? "capture overrun" : "playback underrun") recovered")
            case .deviceLost(let capture, let code):
                Log.error("audio device lost (\(capture ? "capture" : "playback"): \(String(cString: snd_error_text(code)))); reopening with back-off")
            case .reopenFailed(let attempt, let code):
                Log.warning("audio device reopen attempt \(attempt) failed: \(String(cString: snd_error_text(code)))")
            case .deviceRestored(let attempts): Log.notice("audio device back after \(attempts) attempt(s)")
            case .stopped: Log.info("audio engine stopped")
            }
        }
    }

    private func drainRecording(_ engine: AudioEngine, into recorded: inout [Int16]) {
        guard let ring = engine.processedAudio else { return }
        var block = [Int16](repeating: 0, count: 4800)
        while true {
            let n = block.withUnsafeMutableBufferPointer { ring.read(into: $0) }
            if n == 0 { break }
            recorded.append(contentsOf: block[0..<n])
        }
    }
}

/// strerror for negative ALSA-style codes without linking ALSA into the executable.
private func snd_error_text(_ code: Int32) -> UnsafeMutablePointer<CChar> { strerror(code < 0 ? -code : code) }
