import RoomAudio
import RoomBase
import RoomCaptureChain
import RoomControl
import RoomDSP
import RoomJSON
import RoomSystem

/// `roomctl selftest` on the daemon side: asks the audio thread to play the test signals
/// (`SelfTestPlan`: a sweep, a noise burst, a digitally injected talker during and after it)
/// and record (SelfTestCapture), polls for the end on the event loop, analyses the recording
/// (SelfTestAnalysis) on a worker thread and answers on the loop. One test at a time; the room
/// hears nothing meanwhile.
///
/// Why a worker: the analysis takes ~0.2 s in release on x86-64 (several times that on ARM, and
/// seconds in a debug build), and on the loop it held up everything the loop serves —
/// signalling, RTP receive, buttons, the control socket (a `status` waited for it) — and the
/// systemd watchdog's keep-alive. The worker gets the recording (a value) and gives back the
/// report (a value); it touches nothing else (`EventLoop.runOffLoop`).
final class SelfTestRunner {
    private let engine: AudioEngine
    private let loop: EventLoop
    private var reply: ((ControlResult) -> Void)?
    private var timer: EventLoop.TimerID?
    private var deadline: UInt64 = 0
    private var startedNs: UInt64 = 0
    private var signal: [Float] = []
    private var talker: [Float] = []
    private let plan: SelfTestPlan
    private var attempt = 1
    /// A worker thread is analysing the recording: `poll` waits for its answer.
    private var analysing = false
    /// The board's array (nil on a one-mic board): the dead-mic and geometry checks and the
    /// beam's noise gain (SelfTestArray.swift).
    private let array: SelfTestArrayGeometry?

    init(engine: AudioEngine, loop: EventLoop, array: SelfTestArrayGeometry? = nil) {
        self.engine = engine
        self.loop = loop
        plan = SelfTestPlan(rate: engine.configuration.rate)
        self.array = array.flatMap { $0.micPositions.count >= 2 && $0.micPositions.count == engine.configuration.micChannels ? $0 : nil }
    }

    func start(reply: @escaping (ControlResult) -> Void) {
        guard self.reply == nil else { return reply(.failure(ControlError(.busy, "a self-test is already running"))) }
        guard engine.isRunning else { return reply(.failure(ControlError(.deviceError, "the audio engine is not running"))) }
        engine.selfTest.reset()
        // Built once: the signals are deterministic.
        if signal.isEmpty {
            signal = plan.played()
            talker = plan.nearEnd()
        }
        attempt = 1
        guard engine.selfTest.request(signal, nearEnd: talker) else {
            // No test of ours is waiting: one that timed out is still being dropped by a stalled
            // audio thread.
            return reply(.failure(ControlError(.busy, "the previous self-test is still being dropped (is the audio device stalled?); try again")))
        }
        Log.notice("self-test: playing a \(plan.sweepSeconds) s sweep and a \(plan.echoSeconds + plan.doubleTalkSeconds) s noise burst at \(Int(plan.levelDBFS)) dBFS peak, a test talker added to the mics for \(plan.doubleTalkSeconds) s of it")
        self.reply = reply
        startedNs = monotonicNanoseconds()
        // The test lasts about 7 s; a device that stalls must not leave the caller waiting.
        deadline = startedNs + 10_000_000_000
        timer = loop.schedule(after: .milliseconds(50), repeating: .milliseconds(50)) { [weak self] in self?.poll() }
    }

    private func poll() {
        guard !analysing else { return }
        switch engine.selfTest.currentState {
        case .done:
            guard let r = engine.selfTest.takeResult() else { return }
            let recording = SelfTestRecording(rate: engine.configuration.rate, quietMics: r.quiet, played: r.played,
                                              signalMics: r.mics, cleaned: r.cleaned, segments: plan.segments)
            analysing = true
            let array = self.array
            let beam = array.map { ArrayBeamMeter(rate: recording.rate, micPositions: $0.micPositions) }
            let analyse: @Sendable () -> (SelfTestReport, Double) = {
                let t0 = monotonicNanoseconds()
                let report = SelfTestAnalysis.analyze(recording, array: array, beam: beam)
                return (report, Double(monotonicNanoseconds() - t0) / 1e6)
            }
            do {
                try loop.runOffLoop(name: "roomd-selftest", analyse) { [weak self] result in
                    self?.analysed(result.0, analysisMs: result.1)
                }
            } catch {
                // No thread to be had (out of memory or threads): answer late rather than never.
                Log.warning("self-test: \(error); analysing on the event loop")
                let (report, ms) = analyse()
                analysed(report, analysisMs: ms)
            }
        case .aborted:
            engine.selfTest.reset()
            finish(.failure(ControlError(.deviceError, "the audio device had an xrun or was lost during the test; run it again")))
        default:
            if monotonicNanoseconds() > deadline {
                engine.selfTest.cancel()
                finish(.failure(ControlError(.deviceError, "the test did not finish in time (audio device stalled?)")))
            }
        }
    }

    /// The worker's report, back on the loop: measure once more, or answer.
    private func analysed(_ report: SelfTestReport, analysisMs: Double) {
        analysing = false
        // The analysis's worker allocated tens of MB in its own malloc arena and freed them;
        // give those pages back (~10 MB stayed resident otherwise, locked memory or not).
        let trimStart = monotonicNanoseconds()
        Realtime.trimHeapKeepingLock()
        Log.debug("self-test: heap trimmed in \(fixedDecimalText(Double(monotonicNanoseconds() - trimStart) / 1e6, 1)) ms; resident now \(fixedDecimalText(ProcessStats.residentMegabytes(), 1)) MB")
        guard reply != nil else { return }
        // Echo reduction is the one figure that depends on the canceller's state rather
        // than on the hardware: after loud double talk (someone talking through a test) its
        // delay estimate can be off for a few seconds (measured with webrtc's AEC: 4 dB on the
        // next run, 45 dB on the one after; roomd's canceller passed the rig's scenario 50 at
        // the first attempt). When that is the only problem, measure once more.
        if attempt == 1, report.failedOnlyOnEcho(), engine.selfTest.request(signal, nearEnd: talker) {
            attempt = 2
            deadline = monotonicNanoseconds() + 10_000_000_000
            Log.notice("self-test: echo reduced by \(report.echoReductionDB.map { "\(Int($0))" } ?? "?") dB only; measuring once more")
            return
        }
        Log.notice("self-test: \(report.passed ? "passed" : "problems: " + report.problems.joined(separator: "; "))")
        var result = Self.json(report, plan: plan, analysisMs: analysisMs)
        result["attempts"] = .int(attempt)
        finish(.success(result))
    }

    private func finish(_ result: ControlResult) {
        if let timer { loop.cancel(timer) }
        timer = nil
        let reply = self.reply
        self.reply = nil
        reply?(result)
    }

    static func json(_ report: SelfTestReport, plan: SelfTestPlan, analysisMs: Double) -> [String: JSONValue] {
        func number(_ v: Double) -> JSONValue { .double((v * 10).rounded() / 10) }
        let mics: [JSONValue] = report.mics.map { m in
            var row: [String: JSONValue] = [
                "mic": .int(m.index),
                "level_dbfs": number(m.levelDBFS),
                "peak_dbfs": number(m.peakDBFS),
                "noise_floor_dbfs": number(m.noiseFloorDBFS),
                "snr_db": number(m.snrDB),
                "clipped": .int(m.clippedSamples),
                "delay_ms": m.delayMilliseconds.map(number) ?? .null,
                "correlation": .double((m.correlation * 100).rounded() / 100),
            ]
            if let array = report.array { row.merge(arrayColumns(array, mic: m.index, number: number)) { $1 } }
            return .object(row)
        }
        var result: [String: JSONValue] = [
            "passed": .bool(report.passed),
            "problems": .array(report.problems.map(JSONValue.string)),
            "mics": .array(mics),
            "echo_reduction_db": report.echoReductionDB.map(number) ?? .null,
            "doubletalk_loss_db": report.doubleTalk.map { number($0.lossDB) } ?? .null,
            "doubletalk_corr": report.doubleTalk.map { .double(($0.correlation * 1000).rounded() / 1000) } ?? .null,
            "doubletalk_chopped_pct": report.doubleTalk.map { number($0.choppedFraction * 100) } ?? .null,
            "doubletalk_talker_dbfs": report.doubleTalk.map { number($0.talkerLevelDBFS) } ?? .null,
            "signal": .object([
                "sweep_seconds": .double(plan.sweepSeconds), "noise_seconds": .double(plan.echoSeconds + plan.doubleTalkSeconds),
                "level_dbfs": .double(Double(plan.levelDBFS)), "echo_measured_seconds": .double(plan.echoMeasuredSeconds),
                "talker_seconds": .double(plan.doubleTalkSeconds), "talker_level_dbfs": .double(Double(plan.talkerLevelDBFS)),
                "seconds": number(plan.seconds),
            ]),
            "analysis_ms": number(analysisMs),
        ]
        if let array = report.array { result["array"] = arrayJSON(array, number: number) }
        return result
    }

    /// Per mic, on a board with an array: its level against the median of the mics, whether it
    /// is dead, and (with array.speaker) its delay from the speaker after the reference mic's,
    /// measured and as the geometry predicts it.
    private static func arrayColumns(_ a: SelfTestArrayResult, mic: Int, number: (Double) -> JSONValue) -> [String: JSONValue] {
        var row: [String: JSONValue] = [
            "vs_median_db": mic < a.levelVsMedianDB.count ? number(a.levelVsMedianDB[mic]) : .null,
            "dead": .bool(a.deadMics.contains { $0.index == mic }),
        ]
        if case .checked(let d) = a.geometry, mic < d.measuredMicroseconds.count {
            row["array_delay_us"] = d.measuredMicroseconds[mic].map(number) ?? .null
            row["expected_delay_us"] = number(d.expectedMicroseconds[mic])
        }
        return row
    }

    /// `array`: what the array's checks found (docs/control-api.md, "selftest").
    private static func arrayJSON(_ a: SelfTestArrayResult, number: (Double) -> JSONValue) -> JSONValue {
        var o: [String: JSONValue] = [
            "dead_mics": .array(a.deadMics.map { .int($0.index) }),
            "median_level_dbfs": number(a.medianLevelDBFS),
        ]
        switch a.geometry {
        case .notChecked(let why):
            o["geometry"] = .string("not checked: \(why)")
        case .checked(let d):
            o["geometry"] = .string(d.fits ? "ok" : "failed")
            o["geometry_reference_mic"] = .int(d.referenceMic)
            o["geometry_tolerance_us"] = number(d.toleranceMicroseconds)
            o["misfit_mics"] = .array(d.misfits.map(JSONValue.int))
            o["swapped_mics"] = d.swapped.map { .array($0.map(JSONValue.int)) } ?? .null
            o["speaker"] = .array([d.speaker.x, d.speaker.y, d.speaker.z].map(JSONValue.double))
        }
        o["noise_gain_db"] = a.gain.map { number($0.noiseGainDB) } ?? .null
        if let g = a.gain {
            o["noise_gain_reference_mic"] = .int(g.referenceMic)
            o["noise_gain_by_direction_db"] = .array(g.perDirectionDB.map(number))
            o["noise_gain_azimuths_deg"] = .array(g.azimuthsDegrees.map { .double($0) })
            o["speaker_gain_db"] = g.speakerGainDB.map(number) ?? .null
            if let az = g.speakerAzimuthDegrees { o["speaker_azimuth_deg"] = number(az) }
        }
        return .object(o)
    }
}
