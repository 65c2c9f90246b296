import RoomAudio
import RoomBase
import RoomClient
import RoomModel
import RoomSystem

/// Prints what a newcomer wants to see the pipeline do: levels, voice activity, echo removed,
/// xruns, CPU and memory. One line per interval, human or JSON.
final class StatusReporter {
    private let json: Bool
    private let engine: AudioEngine
    private let room: RoomLink
    private let quality: QualityMonitor
    private var session: (any RoomBackend)? { room.session }
    private var last: EngineSnapshot
    private var lastCPU: UInt64
    private var lastTime: UInt64
    private let firstCPU: UInt64
    private let firstTime: UInt64
    private let first: EngineSnapshot
    /// The first snapshot after 5 s of far-end speech (500 far-end-active periods): the summary's
    /// ERLE is measured from there, the window `scripts/bench` measures it in from the status
    /// lines (bench_analysis.py `echo_reduction`), so the two agree. Not only the seconds with
    /// no voice detected: the VAD fires on residual echo, so that selection keeps the quietest
    /// seconds and flatters by up to 17 dB (56.8 against 39.7 dB measured from the lines).
    private var settledEchoBase: EngineSnapshot?
    static let settledFarEndPeriods = 500

    init(json: Bool, engine: AudioEngine, room: RoomLink, quality: QualityMonitor) {
        self.json = json
        self.quality = quality
        self.engine = engine
        self.room = room
        last = engine.stats.snapshot()
        first = last
        lastCPU = ProcessStats.cpuNanoseconds()
        firstCPU = lastCPU
        lastTime = monotonicNanoseconds()
        firstTime = lastTime
    }

    func report(elapsed: Double) {
        let now = engine.stats.snapshot()
        let cpu = ProcessStats.cpuNanoseconds()
        let time = monotonicNanoseconds()
        let cpuPct = time > lastTime ? Double(cpu - lastCPU) / Double(time - lastTime) * 100 : 0
        let erle = now.erleDB(since: last)
        let longestPeriodMs = engine.stats.takeLongestPeriod()
        // Counters are read one by one, so the ratio can overshoot by a period: clamp it.
        let voiced = now.periods > last.periods ? min(100, Double(now.voicePeriods - last.voicePeriods) / Double(now.periods - last.periods) * 100) : 0
        if settledEchoBase == nil && now.farEndActivePeriods >= Self.settledFarEndPeriods { settledEchoBase = now }
        if json {
            let resident = ResidentMemory.breakdown()
            let talker = engine.stats.talker
            var fields: [(String, String)] = [
                ("t", fixedDecimalText(elapsed, 2)), ("periods", "\(now.periods)"),
                ("mic_dbfs", fixedDecimalText(Double(now.inputLevel), 1)), ("out_dbfs", fixedDecimalText(Double(now.outputLevel), 1)),
                ("speaker_dbfs", fixedDecimalText(Double(now.playbackLevel), 1)), ("vad", now.voiceActive ? "true" : "false"),
                ("voiced_pct", fixedDecimalText(voiced, 1)),
                ("erle_db", erle.map { fixedDecimalText($0, 1) } ?? "null"),
                ("far_end_periods", "\(now.farEndActivePeriods)"),
                ("echo_in_energy", "\(now.echoInEnergy)"), ("echo_out_energy", "\(now.echoOutEnergy)"),
                ("aec_delay_ms", "\(now.aecDelayMilliseconds)"),
                ("capture_xruns", "\(now.captureXruns)"), ("playback_xruns", "\(now.playbackXruns)"),
                ("device_losses", "\(now.deviceLosses)"), ("drift_corrections", "\(now.driftCorrections)"),
                ("packets", "\(now.packetsEncoded)"), ("dtx_suppressed", "\(now.packetsSuppressedByDTX)"),
                ("lost", "\(now.packetsLost)"), ("received_lost", "\(now.receivedLost)"), ("late", "\(now.receivedLate)"),
                ("jitter_delay_ms", "\(now.jitterBufferDelayMs)"), ("fec", "\(now.fecRecovered)"), ("plc", "\(now.concealedFrames)"),
                ("alloc_probe", now.allocationProbeActive ? "true" : "false"),
                ("steady_allocs", "\(now.steadyAllocations)"), ("steady_periods", "\(now.steadyPeriodsMeasured)"),
                ("steady_retains", "\(engine.stats.steadyRetains.load(ordering: .relaxed))"),
                ("retain_probe_verified", engine.stats.retainProbeVerified.load(ordering: .relaxed) ? "true" : "false"),
                ("audio_thread_cpu_ns", "\(now.threadCPUNanoseconds)"),
                ("cpu_pct", fixedDecimalText(cpuPct, 2)), ("period_max_ms", fixedDecimalText(longestPeriodMs, 2)), ("rss_mb", fixedDecimalText(ProcessStats.residentMegabytes(), 2)),
                ("rss_file_mb", fixedDecimalText(resident.file, 2)), ("rss_anon_mb", fixedDecimalText(resident.anonymous, 2)),
                // Loss-driven FEC: the encoder's expected loss and bitrate now.
                ("opus_expected_loss_pct", engine.lossFeedback.applied.map { "\($0.expectedLossPercent)" } ?? "null"),
                ("opus_bitrate", engine.lossFeedback.applied.map { "\($0.bitrate)" } ?? "null"),
                ("opus_layer", engine.stats.opusLayer.map { "\"\($0.name)\"" } ?? "null"),
                ("opus_lookahead_ms", engine.stats.opusLookaheadMilliseconds.map { fixedDecimalText($0, 1) } ?? "null"),
                ("talker_azimuth_deg", talker.map { fixedDecimalText($0.azimuthDegrees, 1) } ?? "null"),
                ("talker_locked", talker?.locked == true ? "true" : "false"),
                ("beam_azimuth_deg", engine.stats.beamAzimuthDegrees.map { fixedDecimalText($0, 1) } ?? "null"),
                ("reverberance", engine.stats.reverberance.map { fixedDecimalText($0, 3) } ?? "null"),
                ("mic_corrections_db", engine.stats.micCorrectionsDB.map { "[" + $0.map { fixedDecimalText($0, 1) }.joined(separator: ",") + "]" } ?? "null"),
                ("quality_warnings", "[" + quality.active.map { "\"\($0.rawValue)\"" }.joined(separator: ",") + "]"),
            ]
            if let session {
                let st = session.statistics
                fields += [("room_state", "\"\(session.connectionState)\""),
                           ("stage", "\"\(session.localParticipant?.stage.rawValue ?? "none")\""),
                           ("participants", "\(session.participants.count)"),
                           ("rtp_sent", "\(st.packetsSent)"), ("rtp_received", "\(st.packetsReceived)"),
                          ]
            }
            fields.removeAll { $0.1.isEmpty }
            printLine("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
        } else {
            // The ratio is ERLE while the near end is silent; in double talk the talker is in both
            // energies and it reads low. roomd cannot tell the two apart here (the voice
            // detector also fires on residual echo), so the figure is printed either way.
            let echoText = erle.map { "echo removed \(fixedDecimalText($0, 1)) dB" } ?? "echo: no far end"
            printLine("t=\(fixedDecimalText(elapsed, 1))s  mic \(fixedDecimalText(Double(now.inputLevel), 1))  out \(fixedDecimalText(Double(now.outputLevel), 1))  "
                  + "spk \(fixedDecimalText(Double(now.playbackLevel), 1)) dBFS  voice \(fixedDecimalText(voiced, 0))%  "
                  + "\(echoText)  xruns \(now.captureXruns)/\(now.playbackXruns)  fec/plc \(now.fecRecovered)/\(now.concealedFrames)  "
                  + "cpu \(fixedDecimalText(cpuPct, 1))% (period max \(fixedDecimalText(longestPeriodMs, 1)) ms)" + talkerText() + roomText())
        }
        last = now
        lastCPU = cpu
        lastTime = time
    }

    private func talkerText() -> String {
        guard let talker = engine.stats.talker else { return "" }
        return "  talker \(Daemon.degreesText(Int((talker.azimuthDegrees * 10).rounded())))\(talker.locked ? "" : " (last)")"
    }

    private func roomText() -> String {
        guard let session else { return "" }
        let st = session.statistics
        return "  | room \(session.connectionState), \(session.localParticipant?.stage.rawValue ?? "-"), "
            + "\(session.participants.count) in room, rtp out/in \(st.packetsSent)/\(st.packetsReceived)"
    }

    /// Whole-run figures: what the README's demo ends with.
    func summary(elapsed: Double) {
        let now = engine.stats.snapshot()
        let cpuPct = Double(ProcessStats.cpuNanoseconds() - firstCPU) / Double(max(monotonicNanoseconds() - firstTime, 1)) * 100
        // After the first 5 s of far-end speech when there were that many; else all of it.
        let erleWindow = settledEchoBase == nil ? "all" : "after_5s"
        let erle = now.erleDB(since: settledEchoBase ?? first)
        let allocs = now.steadyPeriodsMeasured > 0 ? Double(now.steadyAllocations) / Double(now.steadyPeriodsMeasured) : 0
        if json {
            printLine("{\"summary\":true,\"t\":\(fixedDecimalText(elapsed, 2)),\"periods\":\(now.periods),\"erle_db\":\(erle.map { fixedDecimalText($0, 2) } ?? "null"),\"erle_window\":\"\(erleWindow)\","
                  + "\"cpu_pct\":\(fixedDecimalText(cpuPct, 2)),\"rss_mb\":\(fixedDecimalText(ProcessStats.residentMegabytes(), 2)),\"rss_peak_mb\":\(fixedDecimalText(ResidentMemory.peakMegabytes(), 2)),"
                  + "\"alloc_probe\":\(now.allocationProbeActive),\"alloc_probe_verified\":\(now.allocationProbeVerified),\"unsteady_allocs\":\(now.unsteadyAllocations),\"steady_allocs\":\(now.steadyAllocations),\"steady_periods\":\(now.steadyPeriodsMeasured),"
                  + "\"retain_probe_verified\":\(engine.stats.retainProbeVerified.load(ordering: .relaxed)),\"steady_retains\":\(engine.stats.steadyRetains.load(ordering: .relaxed)),"
                  + "\"capture_xruns\":\(now.captureXruns),\"playback_xruns\":\(now.playbackXruns),\"device_losses\":\(now.deviceLosses),"
                  + "\"drift_corrections\":\(now.driftCorrections),\"fec\":\(now.fecRecovered),\"plc\":\(now.concealedFrames),\"lost\":\(now.packetsLost)}")
        } else {
            printLine("summary: \(now.periods) periods in \(fixedDecimalText(elapsed, 1)) s; echo removed \(erle.map { fixedDecimalText($0, 1) + " dB" } ?? "n/a") (\(settledEchoBase == nil ? "over all far-end speech" : "over far-end speech after its first 5 s")); "
                  + "cpu \(fixedDecimalText(cpuPct, 1))% of one core; rss \(fixedDecimalText(ProcessStats.residentMegabytes(), 1)) MB; xruns \(now.captureXruns)/\(now.playbackXruns); "
                  + (now.allocationProbeActive ? "steady-state allocations \(fixedDecimalText(allocs, 3))/period over \(now.steadyPeriodsMeasured) periods (probe \(now.allocationProbeVerified ? "verified" : "NOT verified"), \(now.unsteadyAllocations) during start-up/recovery)" : "allocation probe not loaded"))
        }
    }
}

/// Fixed-point formatting without Foundation.
