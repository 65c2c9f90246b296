import Foundation
import RoomAudio
import RoomDSP
import RoomTestSupport
import XCTest

/// The engine through real ALSA calls on the simulated card, in real time.
final class AudioEngineTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(SimCard.prepared, "libasound_module_pcm_roomsim.so missing from \(SimCard.buildDirectory): run `swift build` first (scripts/test does)")
    }

    private func erle(_ engine: AudioEngine, from: EngineSnapshot) -> Double? {
        engine.stats.snapshot().erleDB(since: from)
    }

    /// Far-end speech through the simulated echo path: the AEC must remove most of it, and
    /// switching the AEC off must make the difference visible (an AEC that silently does nothing
    /// fails here).
    func testEchoIsCancelledAndOnlyWithAECOn() throws {
        let dir = SimCard.scratch("echo")
        SimCard.useRoom(dir, [:])
        var config = SimCard.simBoardConfiguration()
        config.farEnd = SimCard.speechLike(seconds: 9, seed: 0.4).map(SampleConversion.int16(fromFloat:))
        // Measure the canceller alone: AGC would add gain, NS and the beamformer remove echo too.
        config.processing.gainControl = false
        config.processing.noiseSuppress = false
        config.processing.beamform = false

        var results: [Bool: Double] = [:]
        for aec in [true, false] {
            config.processing.echoCancel = aec
            let engine = try AudioEngine(configuration: config)
            try engine.start()
            // After 5 s of far end, as scripts/bench measures ERLE.
            Thread.sleep(forTimeInterval: 5)
            let base = engine.stats.snapshot()
            Thread.sleep(forTimeInterval: 3)
            let value = erle(engine, from: base)
            let periods = engine.stats.snapshot().periods
            engine.stop()
            XCTAssertGreaterThan(periods, 750, "engine must run in real time (10 ms periods)")
            results[aec] = try XCTUnwrap(value, "far-end activity expected")
        }
        // roomd's canceller on this room and far end: 24.3 dB with 5 ms of playback headroom,
        // above 25 with 10 ms — its quality depends on where the echo's bulk delay falls
        // (docs/echo-canceller.md, "Surprise"); 20 dB is still 99 % of the echo's power gone.
        XCTAssertGreaterThan(results[true]!, 20, "echo reduction with AEC on (dB): \(results)")
        XCTAssertLessThan(results[false]!, 6, "without AEC the echo must stay: \(results)")
    }

    /// Pacing: 3 s of engine time is 300 periods of 10 ms, within 2 %.
    func testEngineIsPacedInRealTime() throws {
        struct Pacing { var periods: Int; var seconds: Double; var xruns: Int }
        // An xrun restarts both streams (periods lost while they do), and a stall of the audio
        // thread or of this one skews periods against wall time: such a run measures the
        // machine (the suite's one policy). An xrun is made again; so is a count off the bound
        // while the stall witness saw the machine stall. The last run is judged.
        func off(_ run: Pacing) -> Bool {
            let expected = run.seconds * 100
            return abs(Double(run.periods) - expected) > expected * 0.02 + 2
        }
        var attempt = 0
        let run = try Disturbance.rerun("testEngineIsPacedInRealTime", disturbed: { (run: Pacing, machineStallMs: Double) in
            run.xruns > 0 || (off(run) && machineStallMs >= Disturbance.machineStallMilliseconds)
        }) { () throws -> Pacing in
            let dir = SimCard.scratch("pacing-\(attempt)")
            attempt += 1
            SimCard.useRoom(dir, ["echo": "off"])
            let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
            try engine.start()
            Thread.sleep(forTimeInterval: 0.5)
            let p0 = engine.stats.snapshot().periods
            let t0 = Date()
            Thread.sleep(forTimeInterval: 3)
            let s1 = engine.stats.snapshot()
            let elapsed = Date().timeIntervalSince(t0)
            engine.stop()
            return Pacing(periods: s1.periods - p0, seconds: elapsed, xruns: s1.captureXruns + s1.playbackXruns)
        }
        XCTAssertEqual(run.xruns, 0, "xruns in every run the policy allowed")
        let expected = run.seconds * 100
        XCTAssertEqual(Double(run.periods), expected, accuracy: expected * 0.02 + 2)
    }

    /// The audio thread's CPU time (the status line's `audio_thread_cpu_ns`) is read from its
    /// own clock by whoever asks, so the loop makes no system call for it: it grows while the
    /// engine runs although the asking thread only sleeps, and stays at its total once stopped.
    /// Beside it, the longest period's work (`period_max_ms`).
    func testAudioThreadCPUTimeIsReadFromOutside() throws {
        let dir = SimCard.scratch("thread-cpu")
        SimCard.useRoom(dir, ["echo": "off"])
        let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
        XCTAssertEqual(engine.stats.snapshot().threadCPUNanoseconds, 0, "before the thread runs")
        try engine.start()
        Thread.sleep(forTimeInterval: 0.5)
        let a = engine.stats.snapshot().threadCPUNanoseconds
        _ = engine.stats.takeLongestPeriod()
        Thread.sleep(forTimeInterval: 1)
        let b = engine.stats.snapshot().threadCPUNanoseconds
        let longest = engine.stats.takeLongestPeriod()
        engine.stop()
        let c = engine.stats.snapshot().threadCPUNanoseconds
        Thread.sleep(forTimeInterval: 0.1)
        let d = engine.stats.snapshot().threadCPUNanoseconds
        _ = engine.stats.takeLongestPeriod()
        // The status's `period_max_ms`: the longest period's work in the interval, and taking it
        // starts the next interval.
        XCTAssertGreaterThan(longest, 0, "a second of periods did some work")
        XCTAssertLessThan(longest, 1000, "one period's work within the second it was measured in")
        XCTAssertEqual(engine.stats.takeLongestPeriod(), 0, "taken: nothing since, the engine is stopped")
        XCTAssertGreaterThan(b, a &+ 1_000_000, "the audio thread worked for a second: \(a) -> \(b) ns")
        XCTAssertLessThan(b &- a, 1_100_000_000, "one thread cannot use more than the wall time")
        XCTAssertGreaterThanOrEqual(c, b)
        XCTAssertEqual(c, d, "a stopped engine's total does not move")
    }

    /// Loopback: speech at the mics comes out of the speaker after APM and Opus.
    func testLoopbackCarriesTheMicrophoneToTheSpeaker() throws {
        let dir = SimCard.scratch("loopback")
        let speech = SimCard.speechLike(seconds: 4, seed: 1.1, level: 0.2)
        SimCard.writeWAV(dir + "/mic.wav", speech)
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "input_end": "silence", "echo": "off", "output": dir + "/speaker.wav"])
        var config = SimCard.simBoardConfiguration()
        config.loopback = true
        let engine = try AudioEngine(configuration: config)
        _ = try engine.run(seconds: 4.5)
        let s = engine.stats.snapshot()
        XCTAssertGreaterThan(s.packetsEncoded, 300)
        XCTAssertGreaterThan(s.voicePeriods, 50, "VAD should see the speech")

        let out = try SimCard.readWAV(dir + "/speaker.wav")
        XCTAssertEqual(out.sampleRate, 48000)
        // Compare 10 ms energy envelopes: the speaker's must follow the mic's (AGC and NS change
        // the level, not the shape), at the best lag within 0..200 ms.
        func envelope(_ x: [Float]) -> [Double] {
            stride(from: 0, to: x.count - 480, by: 480).map { i in
                var e = 0.0
                for k in i..<(i + 480) { e += Double(x[k] * x[k]) }
                return log10(e + 1e-9)
            }
        }
        let a = envelope(speech)
        let b = envelope(out.samples.map { Float($0) / 32768 })
        var best = -1.0
        for lag in 0...20 where lag + 300 < b.count {
            let n = min(a.count, b.count - lag, 350)
            let xa = Array(a[0..<n]), xb = Array(b[lag..<(lag + n)])
            let ma = xa.reduce(0, +) / Double(n), mb = xb.reduce(0, +) / Double(n)
            var num = 0.0, da = 0.0, db = 0.0
            for i in 0..<n { num += (xa[i] - ma) * (xb[i] - mb); da += (xa[i] - ma) * (xa[i] - ma); db += (xb[i] - mb) * (xb[i] - mb) }
            best = max(best, num / sqrt(da * db + 1e-12))
        }
        XCTAssertGreaterThan(best, 0.6, "speaker envelope must follow the mic envelope")
    }

    /// The sim board in loopback mode, its mics hearing a speech-like talker (looped, echo off),
    /// with `configure`'s changes: the engine, not started.
    private func talkingLoopback(_ name: String, seconds: Double = 3, seed: Double,
                                 _ configure: (inout EngineConfiguration) -> Void) throws -> AudioEngine {
        let dir = SimCard.scratch(name)
        SimCard.writeWAV(dir + "/mic.wav", SimCard.speechLike(seconds: seconds, seed: seed, level: 0.2))
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "input_end": "loop", "echo": "off"])
        var config = SimCard.simBoardConfiguration()
        config.loopback = true
        configure(&config)
        return try AudioEngine(configuration: config)
    }

    /// Simulated packet loss on the loopback channel: FEC rebuilds some frames, PLC the rest.
    func testLossIsRepairedByFECAndConcealment() throws {
        let engine = try talkingLoopback("fec", seed: 2.0) { $0.loopbackLossPercent = 20 }
        _ = try engine.run(seconds: 4)
        let s = engine.stats.snapshot()
        // Loss applies to frames that were sent; the VAD gate keeps pauses off the "wire".
        let sent = s.packetsEncoded - s.packetsSuppressedByDTX
        XCTAssertGreaterThan(sent, 100)
        XCTAssertGreaterThan(Double(s.packetsLost), 0.1 * Double(sent), "20 % loss asked: \(s.packetsLost) of \(sent)")
        XCTAssertLessThan(Double(s.packetsLost), 0.3 * Double(sent), "20 % loss asked: \(s.packetsLost) of \(sent)")
        // The receive side's jitter buffer finds the same losses from the sequence numbers.
        XCTAssertEqual(Double(s.receivedLost), Double(s.packetsLost), accuracy: 3)
        XCTAssertGreaterThan(s.fecRecovered, s.receivedLost / 3, "lost frames followed by a packet are rebuilt from FEC")
        XCTAssertLessThanOrEqual(s.fecRecovered, s.receivedLost)
    }

    /// With the VAD switched off (`--disable vad`) a talker is still sent: the voice gate has
    /// no voice to go by and steps aside (before: it read "no voice" for ever and held back all
    /// but one frame in 33 — the appliance muted).
    func testTalkerIsSentWithTheVADSwitchedOff() throws {
        let engine = try talkingLoopback("novad", seed: 0.7) { $0.processing.voiceDetect = false }
        _ = try engine.run(seconds: 3)
        let s = engine.stats.snapshot()
        let sent = s.packetsEncoded - s.packetsSuppressedByDTX
        XCTAssertGreaterThan(s.packetsEncoded, 200)
        XCTAssertGreaterThan(Double(sent), 0.5 * Double(s.packetsEncoded),
                             "a talking room without the VAD: \(sent) of \(s.packetsEncoded) frames sent")
    }

    /// An injected capture xrun is recovered without stopping the stream.
    func testInjectedXrunIsRecovered() throws {
        let dir = SimCard.scratch("xrun")
        SimCard.useRoom(dir, ["echo": "off", "xrun_at_ms": "1000"])
        let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
        let events = try engine.run(seconds: 2.5)
        let s = engine.stats.snapshot()
        XCTAssertTrue(events.contains(.xrun(capture: true)) || events.contains(.xrun(capture: false)), "xrun event expected: \(events)")
        XCTAssertGreaterThanOrEqual(s.captureXruns + s.playbackXruns, 1)
        XCTAssertEqual(s.deviceLosses, 0)
        XCTAssertGreaterThan(s.periods, 200, "the stream keeps running after the xrun")
    }

    /// After an xrun in either direction the canceller still cancels: both directions restart
    /// together, at the offset the canceller learnt. (Restarting only the direction that ran
    /// over left capture at another offset against playback: ERLE went from ~43 dB to below
    /// 0 — the output louder than the mic — for the rest of the session.)
    func testEchoIsStillCancelledAfterAnXrun() throws {
        for direction in ["capture", "playback"] {
            let dir = SimCard.scratch("xrun-aec-\(direction)")
            SimCard.useRoom(dir, ["echo_delay_ms": "2", "\(direction)_xrun_at_ms": "4000"])
            var config = SimCard.simBoardConfiguration()
            config.farEnd = SimCard.speechLike(seconds: 12, seed: 0.7).map(SampleConversion.int16(fromFloat:))
            config.processing.gainControl = false
            config.processing.noiseSuppress = false
            config.processing.beamform = false
            let engine = try AudioEngine(configuration: config)
            try engine.start()
            Thread.sleep(forTimeInterval: 6)   // the xrun at 4 s, then 2 s to settle
            let base = engine.stats.snapshot()
            Thread.sleep(forTimeInterval: 3)
            let value = erle(engine, from: base)
            let s = engine.stats.snapshot()
            engine.stop()
            XCTAssertGreaterThanOrEqual(s.captureXruns + s.playbackXruns, 1, "\(direction): the injected xrun happened")
            XCTAssertEqual(s.deviceLosses, 0, direction)
            let after = try XCTUnwrap(value, "far-end activity expected")
            XCTAssertGreaterThan(after, 20, "\(direction) xrun: echo reduction 2-5 s after it (dB)")
        }
    }

    /// A lost device is reported, reopened with back-off, and the stream resumes.
    func testLostDeviceComesBack() throws {
        let dir = SimCard.scratch("loss")
        SimCard.useRoom(dir, ["echo": "off", "lose_at_ms": "800", "lose_for_ms": "700"])
        let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
        try engine.start()
        Thread.sleep(forTimeInterval: 2.5)
        let before = engine.stats.snapshot().periods
        Thread.sleep(forTimeInterval: 0.5)
        let after = engine.stats.snapshot().periods
        engine.stop()
        var events: [EngineEvent] = []
        while let e = engine.events.pop() { events.append(e) }
        XCTAssertTrue(events.contains { if case .deviceLost = $0 { return true }; return false }, "\(events)")
        let restored = events.firstIndex { if case .deviceRestored = $0 { return true }; return false }
        XCTAssertNotNil(restored, "device must come back: \(events)")
        XCTAssertGreaterThan(after - before, 40, "periods flow again after the loss")
    }

    /// While a lost device is reopened the engine says so (`reopeningDevice`, `reopenAttempts`:
    /// the daemon's watchdog waits for a recovery), and `stop()` ends it promptly even in the
    /// 2 s back-off: the thread no longer sleeps the whole back-off, so the 2 s bound on `stop`
    /// is left for a thread stuck in the driver.
    func testStopDuringTheReopenBackOffIsPrompt() throws {
        let dir = SimCard.scratch("loss-stop")
        SimCard.useRoom(dir, ["echo": "off", "lose_at_ms": "300", "lose_for_ms": "60000"])
        let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
        try engine.start()
        // Attempts at about 0.1, 0.3, 0.7, 1.5 and 3.1 s into the loss; after the fifth the
        // back-off is 2 s.
        var events: [EngineEvent] = []
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline && !events.contains(.reopenFailed(attempt: 5, code: -ENODEV)) {
            Thread.sleep(forTimeInterval: 0.02)
            while let e = engine.events.pop() { events.append(e) }
        }
        XCTAssertTrue(events.contains(.reopenFailed(attempt: 5, code: -ENODEV)), "\(events)")
        XCTAssertTrue(engine.stats.reopeningDevice.load(ordering: .relaxed))
        XCTAssertGreaterThanOrEqual(engine.stats.reopenAttempts.load(ordering: .relaxed), 5)
        Thread.sleep(forTimeInterval: 0.2)   // well inside the 2 s back-off
        let t0 = Date()
        XCTAssertTrue(engine.stop(), "the audio thread stops")
        XCTAssertLessThan(Date().timeIntervalSince(t0), 1.0, "stop waited for the back-off")
        XCTAssertFalse(engine.stats.reopeningDevice.load(ordering: .relaxed))
        while let e = engine.events.pop() { events.append(e) }
        XCTAssertEqual(events.last, .stopped)
    }

    func testMissingDeviceIsAClearError() throws {
        var config = SimCard.simBoardConfiguration()
        config.captureDevice = "nosuchdevice"
        let engine = try AudioEngine(configuration: config)
        XCTAssertThrowsError(try engine.start()) { error in
            XCTAssertTrue("\(error)".contains("nosuchdevice"), "\(error)")
        }
    }

    func testUnsupportedSettingsNameTheField() {
        var config = SimCard.simBoardConfiguration()
        config.rate = 44100
        XCTAssertThrowsError(try AudioEngine(configuration: config)) { XCTAssertTrue("\($0)".contains("audio.rate"), "\($0)") }
        config = SimCard.simBoardConfiguration()
        config.micChannels = 9
        XCTAssertThrowsError(try AudioEngine(configuration: config)) { XCTAssertTrue("\($0)".contains("audio.capture_channels"), "\($0)") }
        config = SimCard.simBoardConfiguration()
        config.rate = 32000
        XCTAssertThrowsError(try AudioEngine(configuration: config)) { XCTAssertTrue("\($0)".contains("Opus"), "\($0)") }
    }

    /// 20 ms Opus frames: half as many packets, loopback still carries audio.
    func testTwentyMillisecondFrames() throws {
        let engine = try talkingLoopback("opus20", seconds: 2, seed: 0.5) { $0.opus.frameMilliseconds = 20 }
        _ = try engine.run(seconds: 2)
        let s = engine.stats.snapshot()
        XCTAssertEqual(Double(s.packetsEncoded), Double(s.periods) / 2, accuracy: 3)
        XCTAssertGreaterThan(engine.stats.playbackLevel, -60, "decoded loopback reaches the speaker")
    }

    /// Capture and playback clocks 1 % apart: the playback fill stays in its band by
    /// dropping/repeating whole periods, counted, without xruns.
    func testClockSkewIsAbsorbedWithoutXruns() throws {
        // A stall of the test process (an xrun not caused by the skew) restarts both streams
        // and re-primes playback, so such a run measures nothing: the shared rerun policy. Skew
        // that caused xruns would cause them every time, and fails below.
        var attempt = 0
        let s = try Disturbance.rerun("clock skew", disturbed: { $0.captureXruns + $0.playbackXruns > 0 }) { () throws -> EngineSnapshot in
            let dir = SimCard.scratch("skew-\(attempt)")
            attempt += 1
            SimCard.useRoom(dir, ["echo": "off", "capture_skew_ppm": "10000"])
            let engine = try AudioEngine(configuration: SimCard.simBoardConfiguration())
            _ = try engine.run(seconds: 4.5)
            return engine.stats.snapshot()
        }
        // 1 % is 10 ms (one period) a second; a period is dropped as soon as a whole extra one
        // is queued, so one correction a second (the first within the first second).
        XCTAssertGreaterThanOrEqual(s.driftCorrections, 3, "skew must show up as corrections")
        XCTAssertLessThanOrEqual(s.driftCorrections, 5)
        XCTAssertEqual(s.captureXruns + s.playbackXruns, 0)
    }

    /// Tone bursts at the mics, loopback (APM → Opus → jitter buffer → decoder → speaker),
    /// echo off; returns the median delay from each burst's onset at the mics to its onset at
    /// the speaker, in ms, and the run's counters. Both files start with their stream, and the
    /// engine starts capture and playback back to back.
    private func loopbackDelay(periodMilliseconds: Int, name: String,
                               file: StaticString = #filePath, line: UInt = #line) throws -> (ms: Double, stats: EngineSnapshot) {
        // An xrun re-primes playback and moves the speaker file against the mic file, so such a
        // run measures nothing: a debug build on a shared 2-core machine gets one now and then.
        // Only the last run is asserted on, after the rerun (an assertion inside the run would
        // record a failure of a run that is then repeated).
        var attempt = 0
        let run = try Disturbance.rerun("loopback delay", disturbed: { $0.stats.captureXruns + $0.stats.playbackXruns > 0 }) {
            defer { attempt += 1 }
            return try loopbackDelayOnce(periodMilliseconds: periodMilliseconds, name: name + (attempt == 0 ? "" : "-\(attempt)"))
        }
        XCTAssertGreaterThanOrEqual(run.heard, run.bursts - 1, "bursts heard at the speaker (\(periodMilliseconds) ms periods)",
                                    file: file, line: line)
        return (run.ms, run.stats)
    }

    private func loopbackDelayOnce(periodMilliseconds: Int, name: String) throws -> (ms: Double, stats: EngineSnapshot, heard: Int, bursts: Int) {
        let dir = SimCard.scratch(name)
        let rate = 48000
        var mic = [Float](repeating: 0, count: rate * 3)
        var onsets: [Int] = []
        var start = rate / 2
        while start + rate / 10 < mic.count {
            onsets.append(start)
            for i in 0..<(rate / 25) { mic[start + i] = Float(0.3 * sin(2 * Double.pi * 1000 * Double(i) / Double(rate))) }
            start += rate * 2 / 5
        }
        SimCard.writeWAV(dir + "/mic.wav", mic)
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "input_end": "silence", "echo": "off", "output": dir + "/speaker.wav"])
        var config = SimCard.simBoardConfiguration()
        config.periodMilliseconds = periodMilliseconds
        // 10 ms of headroom rather than the sim board's 5: a debug build's periods are slow,
        // and the difference between the two periods does not depend on it.
        config.playbackHeadroomMilliseconds = 10
        config.loopback = true
        // Every frame sent, nothing levelled: the bursts' onsets stay where they are. The
        // beamformer off, as on both boards: it adds ~14 ms of its own.
        config.opus.voiceGate = false
        config.opus.dtx = false
        config.processing.gainControl = false
        config.processing.noiseSuppress = false
        config.processing.beamform = false
        let engine = try AudioEngine(configuration: config)
        _ = try engine.run(seconds: 3.3)
        let speaker = try SimCard.readWAV(dir + "/speaker.wav").samples
        // The chain (high-pass, canceller, Opus) leaves the bursts at about a quarter of their
        // level; an onset is the first sample above a third of the loudest one at the speaker.
        let threshold = max(300, (speaker.map { abs(Int($0)) }.max() ?? 0) / 3)
        var delays: [Double] = []
        for onset in onsets {
            let window = onset..<min(onset + rate / 10, speaker.count)
            if let hit = window.first(where: { abs(Int(speaker[$0])) > threshold }) {
                delays.append(Double(hit - onset) * 1000 / Double(rate))
            }
        }
        delays.sort()
        return (delays.isEmpty ? .infinity : delays[delays.count / 2], engine.stats.snapshot(), delays.count, onsets.count)
    }

    /// 5 ms periods: the engine still processes 10 ms blocks (100 a second, two periods each)
    /// but renders the speaker every 5 ms. In loopback our own packet leaves at the block's end,
    /// after that period's speaker write, and plays at the next write: 5 ms later with 5 ms
    /// periods, 10 ms with 10 ms periods. That wait is what a received packet saves at the
    /// listener (docs/benchmarks.md, "Where the mouth-to-ear time goes").
    func testFiveMillisecondPeriodsPlayWhatTheyReceiveSooner() throws {
        let ten = try loopbackDelay(periodMilliseconds: 10, name: "period10")
        let five = try loopbackDelay(periodMilliseconds: 5, name: "period5")
        XCTAssertEqual(five.stats.captureXruns + five.stats.playbackXruns, 0)
        XCTAssertEqual(ten.stats.captureXruns + ten.stats.playbackXruns, 0)
        // 3.3 s of 10 ms blocks either way; every block encoded (no voice gate, 10 ms frames).
        XCTAssertEqual(Double(five.stats.periods), 330, accuracy: 15, "5 ms periods: 10 ms blocks counted")
        XCTAssertEqual(Double(five.stats.packetsEncoded), Double(five.stats.periods), accuracy: 3)
        // Release roomd --loopback on the sim board (2026-11-24, 5 ms headroom): 34.56 ms with
        // 10 ms periods, 29.56 ms with 5 — block 10 + chain 3 + Opus 6.5 + the wait for the
        // next write (a period) + the headroom; the array's beam adds 2 ms to the chain
        // (2026-11-28: 36.56 ms here). The timing is in the signal, so a debug build measures
        // the same; here with 10 ms of headroom.
        XCTAssertEqual(ten.ms - five.ms, 5, accuracy: 1, "5 ms periods save the wait for the next speaker write (5 ms: \(five.ms), 10 ms: \(ten.ms))")
        XCTAssertEqual(five.ms, 36.6, accuracy: 1.5, "loopback delay with 5 ms periods and 10 ms of headroom")
    }

    /// A period the engine cannot build 10 ms blocks from is refused, naming the key.
    func testUnsupportedPeriodNamesTheKey() {
        for ms in [4, 20] {
            var config = SimCard.simBoardConfiguration()
            config.periodMilliseconds = ms
            XCTAssertThrowsError(try AudioEngine(configuration: config)) {
                XCTAssertTrue("\($0)".contains("audio.period_ms: \(ms) is not supported (5 or 10"), "\($0)")
            }
        }
        var config = SimCard.simBoardConfiguration()
        config.periodMilliseconds = 5
        XCTAssertNoThrow(try AudioEngine(configuration: config))
        config.playbackHeadroomMilliseconds = 50
        XCTAssertThrowsError(try AudioEngine(configuration: config)) {
            XCTAssertTrue("\($0)".contains("audio.playback_headroom_ms: 50 is not supported with 5 ms periods"), "\($0)")
        }
    }
}
