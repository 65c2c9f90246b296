import Glibc
import RoomAudio
import RoomCaptureChain
import RoomOpus
import RoomSystem

/// Times the per-period building blocks in isolation, on the sim board's shape (48 kHz, four
/// mics, beamformer), so a regression shows up even when the engine as a whole still keeps up.
/// Output: one JSON object per metric, the scripts/bench format.
enum MicroBench {
    static let benches = ["apm", "apmdelay", "opus", "srtp", "wake"]
    static let options = [CommandOption("--help", aliases: ["-h"], help: "print this help and exit")]
    static let usage = """
    usage: roombench [BENCH...]

    Micro-benchmarks, one JSON line per figure (docs/benchmarks.md; scripts/bench runs them).
    BENCH: \(benches.joined(separator: ", ")) (default: apm, apmdelay, opus).

    """ + "\n" + CommandLineParser.help(options, column: 25)

    static func main(_ args: [String]) -> Int32 {
        let parsed: ParsedCommandLine
        do throws(CommandLineUsageError) {
            parsed = try CommandLineParser.parse(args, options: options, operands: true)
            if let unknown = parsed.operands.first(where: { !benches.contains($0) }) {
                throw CommandLineUsageError("unknown bench '\(unknown)' (\(benches.joined(separator: ", ")))")
            }
        } catch {
            printError(error.text(program: "roombench"))
            return CommandLineUsageError.exitCode
        }
        if parsed.contains("--help") {
            printLine(usage)
            return 0
        }
        for name in parsed.operands.isEmpty ? ["apm", "apmdelay", "opus"] : parsed.operands {
            switch name {
            case "apm": apm()
            case "apmdelay": apmDelay()
            case "opus": opus()
            case "srtp": SRTPBench.run()
            case "wake": WakeBench.run()
            default: break   // refused above
            }
        }
        return 0
    }

    static func emit(_ bench: String, _ metric: String, _ value: Double, _ unit: String, _ extra: String = "") {
        let v = (value * 1000).rounded() / 1000
        print("{\"bench\":\"\(bench)\",\"metric\":\"\(metric)\",\"value\":\(v),\"unit\":\"\(unit)\"\(extra)}")
    }

    /// Speech-like test signal: a harmonic series with a slow syllable envelope, deterministic.
    static func signal(_ n: Int, rate: Int, seed: Double) -> [Float] {
        (0..<n).map { i in
            let t = Double(i) / Double(rate)
            let f0 = 120 + 30 * sin(2 * Double.pi * 0.7 * t + seed)
            var s = 0.0
            for h in 1...8 { s += sin(2 * Double.pi * f0 * Double(h) * t + seed * Double(h)) / Double(h) }
            let envelope = 0.5 + 0.5 * sin(2 * Double.pi * 3 * t + seed)
            return Float(0.1 * s * envelope)
        }
    }

    /// What the APM benches' mics hear at sample k: the far end's echo 40 ms late at −10 dB,
    /// and the near talker.
    static func micSample(far: [Float], near: [Float], at k: Int, rate: Int) -> Float {
        (k >= rate / 25 ? 0.3 * far[k - rate / 25] : 0) + 0.2 * near[k]
    }

    /// `ROOMBENCH_RATE` (8000, 16000, 32000, 48000; default 48000): the rate the APM and Opus
    /// benches run at, to weigh processing the speech band at 16 kHz against the card's 48 kHz.
    static let rate: Int = {
        guard let v = getenv("ROOMBENCH_RATE"), let r = Int(String(cString: v)), [8000, 16000, 32000, 48000].contains(r) else { return 48000 }
        return r
    }()

    static func apm() {
        apm(mics: 4, settings: ProcessingSettings(), metric: "apm.us_per_10ms",
            config: "\(rate / 1000)kHz 4 mics beamformer HPF AEC(\(ProcessingSettings().echoCanceller.rawValue)) NS AGC VAD")
        var board = ProcessingSettings(); board.beamform = false
        apm(mics: 1, settings: board, metric: "apm.chain_us_per_10ms",
            config: "\(rate / 1000)kHz 1 mic (the sim board's chain) HPF AEC(\(board.echoCanceller.rawValue)) NS AGC VAD, webrtc on the \(board.webrtcBand.rawValue) band")
        board.webrtcBand = board.webrtcBand == .low ? .full : .low
        apm(mics: 1, settings: board, metric: "apm.chain_us_per_10ms",
            config: "\(rate / 1000)kHz 1 mic (the sim board's chain) HPF AEC(\(board.echoCanceller.rawValue)) NS AGC VAD, webrtc on the \(board.webrtcBand.rawValue) band")
        if getenv("ROOMBENCH_STAGES") != nil {
            var none = board; none.highPass = false; none.echoCancel = false; none.noiseSuppress = false; none.gainControl = false; none.voiceDetect = false
            var x = none; apm(mics: 1, settings: x, metric: "stage", config: "none")
            x = none; x.highPass = true; apm(mics: 1, settings: x, metric: "stage", config: "hpf")
            x = none; x.voiceDetect = true; apm(mics: 1, settings: x, metric: "stage", config: "vad")
            x = none; x.gainControl = true; apm(mics: 1, settings: x, metric: "stage", config: "agc")
            x = none; x.echoCancel = true; apm(mics: 1, settings: x, metric: "stage", config: "kalman")
            x = none; x.echoCancel = true; x.noiseSuppress = true; apm(mics: 1, settings: x, metric: "stage", config: "kalman+ns")
        }
    }

    static func apm(mics: Int, settings: ProcessingSettings, metric: String, config: String) {
        let period = rate / 100, blocks = 1500
        let positions: [(Float, Float, Float)] = [(0.032, 0, 0), (0, 0.032, 0), (-0.032, 0, 0), (0, -0.032, 0)]
        guard let processor = try? AudioProcessor(rate: rate, micChannels: mics, micPositions: Array(positions.prefix(mics)), settings: settings) else {
            printError("roombench: cannot create APM\n"); return
        }
        let far = signal(period * blocks, rate: rate, seed: 0.3)
        let near = signal(period * blocks, rate: rate, seed: 1.7)
        let micBuf = UnsafeMutablePointer<Float>.allocate(capacity: period * mics)
        let micPtrs = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: mics)
        let out = UnsafeMutablePointer<Float>.allocate(capacity: period * mics)
        let outPtrs = UnsafeMutablePointer<UnsafeMutablePointer<Float>?>.allocate(capacity: mics)
        let render = UnsafeMutablePointer<Float>.allocate(capacity: period)
        let renderPtrs = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 1)
        for m in 0..<mics { micPtrs[m] = UnsafePointer(micBuf + m * period); outPtrs[m] = out + m * period }
        renderPtrs[0] = UnsafePointer(render)
        var total: UInt64 = 0
        for b in 0..<blocks {
            for i in 0..<period {
                let k = b * period + i
                render[i] = far[k]
                let sample = micSample(far: far, near: near, at: k, rate: rate)
                for m in 0..<mics { micBuf[m * period + i] = sample }
            }
            let t0 = threadCPUNanoseconds()
            _ = processor.analyzeRender(renderPtrs)
            _ = processor.processCapture(micPtrs, into: outPtrs, delayMilliseconds: 40)
            if b >= 100 { total += threadCPUNanoseconds() - t0 }
        }
        emit("apm", metric, Double(total) / Double(blocks - 100) / 1000, "us", ",\"config\":\"\(config)\"")
    }

    /// The capture path's algorithmic delay through the APM, per stage, at 48 kHz with one mic
    /// and a silent far end: a sweep goes in, the lag of the output's cross-correlation peak is
    /// the delay. It explains the mic-to-wire time (10.4 ms with the APM off, 20.4 with it on,
    /// measured at packet resolution): the stages' own framing, not a buffer of roomd's.
    static func apmDelay() {
        let period = rate / 100, blocks = 120, start = 40 * period, length = 40 * period
        let sweep: [Float] = (0..<(period * blocks)).map { k in
            guard k >= start && k < start + length else { return 0 }
            let t = Double(k - start) / Double(rate)
            return Float(0.3 * sin(2 * Double.pi * (200 * t + 1800 * t * t)))   // 200 Hz → ~3.8 kHz
        }
        var stages: [(String, ProcessingSettings)] = []
        var none = ProcessingSettings()
        none.highPass = false; none.echoCancel = false; none.noiseSuppress = false
        none.gainControl = false; none.voiceDetect = false; none.beamform = false
        stages.append(("none", none))
        var hpf = none; hpf.highPass = true; stages.append(("hpf", hpf))
        var ns = none; ns.noiseSuppress = true; stages.append(("ns", ns))
        var aec = none; aec.echoCancel = true; stages.append(("aec", aec))
        var agc = none; agc.gainControl = true; stages.append(("agc", agc))
        var chain = ProcessingSettings(); chain.beamform = false; stages.append(("hpf+aec+ns+agc+vad", chain))
        // Each canceller by name, alone and in the chain (with roomd's, noise suppression runs
        // inside its suppressor and webrtc's NS is off).
        for canceller in [EchoCanceller.webrtc, .kalman] {
            var alone = aec; alone.echoCanceller = canceller; stages.append(("aec(\(canceller.rawValue))", alone))
            var both = aec; both.noiseSuppress = true; both.echoCanceller = canceller; stages.append(("aec(\(canceller.rawValue))+ns", both))
            var full = chain; full.echoCanceller = canceller; stages.append(("hpf+aec(\(canceller.rawValue))+ns+agc+vad", full))
            if canceller == .kalman {
                var wide = full; wide.webrtcBand = .full; stages.append(("hpf+aec(kalman)+ns+agc+vad, webrtc full band", wide))
            }
        }
        let input = UnsafeMutablePointer<Float>.allocate(capacity: period)
        let inputs = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 1)
        let output = UnsafeMutablePointer<Float>.allocate(capacity: period)
        let outputs = UnsafeMutablePointer<UnsafeMutablePointer<Float>?>.allocate(capacity: 1)
        let render = UnsafeMutablePointer<Float>.allocate(capacity: period)
        let renders = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 1)
        render.initialize(repeating: 0, count: period)
        inputs[0] = UnsafePointer(input); outputs[0] = output; renders[0] = UnsafePointer(render)
        defer { input.deallocate(); inputs.deallocate(); output.deallocate(); outputs.deallocate(); render.deallocate(); renders.deallocate() }
        for (name, settings) in stages {
            guard let processor = try? AudioProcessor(rate: rate, micChannels: 1, micPositions: [], settings: settings) else {
                printError("roombench: cannot create APM (\(name))\n"); continue
            }
            var out = [Float](repeating: 0, count: period * blocks)
            for b in 0..<blocks {
                for i in 0..<period { input[i] = sweep[b * period + i] }
                _ = processor.analyzeRender(renders)
                _ = processor.processCapture(inputs, into: outputs, delayMilliseconds: 0)
                for i in 0..<period { out[b * period + i] = output[i] }
            }
            var bestLag = 0, best = -Double.infinity
            for lag in 0..<(rate / 20) {
                var c = 0.0
                for k in start..<(start + length) { c += Double(sweep[k]) * Double(out[k + lag]) }
                if c > best { best = c; bestLag = lag }
            }
            emit("apm", "apm.delay_ms", Double(bestLag) * 1000 / Double(rate), "ms", ",\"stages\":\"\(name)\",\"rate\":\(rate)")
        }
    }

    static func opus() {
        let frame = rate / 100, frames = 3000
        guard let encoder = try? OpusEncoderBox(rate: rate, settings: OpusSettings()),
              let decoder = try? OpusDecoderBox(rate: rate) else { printError("roombench: cannot create Opus\n"); return }
        let pcm = signal(frame * frames, rate: rate, seed: 0.9)
        let packet = UnsafeMutablePointer<UInt8>.allocate(capacity: 1500)
        let decoded = UnsafeMutablePointer<Float>.allocate(capacity: frame)
        var encodeNs: UInt64 = 0, decodeNs: UInt64 = 0, plcNs: UInt64 = 0, bytes = 0
        pcm.withUnsafeBufferPointer { all in
            for f in 0..<frames {
                let t0 = threadCPUNanoseconds()
                let n = encoder.encode(all.baseAddress! + f * frame, into: packet, capacity: 1500)
                let t1 = threadCPUNanoseconds()
                if n > 0 { _ = decoder.decode(packet, length: n, into: decoded, frames: frame); bytes += n }
                let t2 = threadCPUNanoseconds()
                if f % 10 == 5 { _ = decoder.conceal(into: decoded, frames: frame) }
                let t3 = threadCPUNanoseconds()
                encodeNs += t1 - t0
                decodeNs += t2 - t1
                plcNs += t3 - t2
            }
        }
        let o = encoder.settings
        let settings = ",\"config\":\"\(rate / 1000)kHz mono VOIP \(o.bitrate / 1000)kb/s \(o.maxBandwidth.rawValue) complexity \(o.complexity) "
            + "FEC \(o.inbandFEC ? "for \(o.expectedLossPercent) %" : "off") DTX \(o.dtx ? "on" : "off") \(o.frameMilliseconds)ms\""
        emit("opus", "opus.encode_us_per_frame", Double(encodeNs) / Double(frames) / 1000, "us", settings)
        emit("opus", "opus.decode_us_per_frame", Double(decodeNs) / Double(frames) / 1000, "us", settings)
        emit("opus", "opus.plc_us_per_frame", Double(plcNs) / Double(frames / 10) / 1000, "us", settings)
        emit("opus", "opus.kbps", Double(bytes * 8) / (Double(frames) * 0.01) / 1000, "kb/s", settings)
    }
}
