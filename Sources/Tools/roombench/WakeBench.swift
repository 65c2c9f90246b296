import CLinux
import Glibc
import RoomAudio
import RoomCaptureChain
import RoomOpus
import RoomSystem

/// What the audio thread's rhythm costs on this machine: first the wake-up alone (a thread that
/// does nothing but wake every 5 ms), then the sim board's per-block work (the shipped capture
/// chain on one mic with the output band at wideband, Opus encode at the clean-network coding,
/// decode of the packet) timed back to back, and again with a sleep before every block as
/// roomd's audio thread sleeps between periods.
///
/// Why it exists: `engine.cpu_pct` is ~3× what roomd's parts cost in isolation. On this KVM
/// guest work started after a sleep finds its code and data no longer cached: pure arithmetic
/// runs at the same speed after a sleep, an Opus encode takes 2-3× as long (docs/benchmarks.md,
/// "The wake-up tax"). The factor moves with the machine's load, so `scripts/bench engine`
/// prints it beside its own figure: how much a sleep cost in that minute. It is not the whole
/// of the figure's spread (the rest of the loop, the simulator and the kernel vary too).
enum WakeBench {
    static func run() {
        guard let idle = idleWakes() else {
            printError("roombench: no periodic timerfd or thread for the wake-up floor\n"); return
        }
        MicroBench.emit("wake", "wake.idle_us", idle, "us",
                        ",\"measure\":\"CPU time of one wake-up of a thread that only sleeps on a 5 ms timerfd (poll + read)\"")
        MicroBench.emit("wake", "wake.idle_floor_pct", rounded(idle * 200 / 10_000), "%",
                        ",\"measure\":\"those wake-ups at 200 a second (roomd's audio thread at 5 ms periods) as a share of one core\"")

        let rate = 48000, block = rate / 100
        var settings = ProcessingSettings(); settings.beamform = false
        guard let processor = try? AudioProcessor(rate: rate, micChannels: 1, micPositions: [], settings: settings),
              let encoder = try? OpusEncoderBox(rate: rate, settings: OpusSettings(), environment: false),
              let decoder = try? OpusDecoderBox(rate: rate) else {
            printError("roombench: cannot create the APM or Opus\n"); return
        }
        processor.setOutputBand(topHz: OpusBandwidth.wide.topHz)
        // What a clean network codes (LossAdaptation): no FEC, the transform layer, its complexity.
        let clean = OpusSettings()
        _ = encoder.apply(EncoderCoding(bitrate: clean.cleanNetworkBitrate, expectedLossPercent: 0, musicSignal: clean.cleanNetworkTransform,
                                        complexity: clean.cleanNetworkComplexity))
        let seconds = 4
        let far = MicroBench.signal(rate * seconds, rate: rate, seed: 0.3)
        let near = MicroBench.signal(rate * seconds, rate: rate, seed: 1.7)
        let mic = UnsafeMutablePointer<Float>.allocate(capacity: block)
        let render = UnsafeMutablePointer<Float>.allocate(capacity: block)
        let out = UnsafeMutablePointer<Float>.allocate(capacity: block)
        let decoded = UnsafeMutablePointer<Float>.allocate(capacity: block)
        let packet = UnsafeMutablePointer<UInt8>.allocate(capacity: 1500)
        let micPtrs = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 1)
        let outPtrs = UnsafeMutablePointer<UnsafeMutablePointer<Float>?>.allocate(capacity: 1)
        let renderPtrs = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 1)
        micPtrs[0] = UnsafePointer(mic); outPtrs[0] = out; renderPtrs[0] = UnsafePointer(render)
        var position = 0

        /// One block as the engine runs it; returns the thread CPU time of its parts.
        func oneBlock() -> (apm: UInt64, encode: UInt64, decode: UInt64) {
            if position + block > far.count { position = 0 }
            for i in 0..<block {
                let k = position + i
                render[i] = far[k]
                mic[i] = MicroBench.micSample(far: far, near: near, at: k, rate: rate)
            }
            position += block
            let t0 = threadCPUNanoseconds()
            _ = processor.analyzeRender(renderPtrs)
            _ = processor.processCapture(micPtrs, into: outPtrs, delayMilliseconds: 40)
            let t1 = threadCPUNanoseconds()
            let n = encoder.encode(out, into: packet, capacity: 1500)
            let t2 = threadCPUNanoseconds()
            if n > 0 { _ = decoder.decode(packet, length: n, into: decoded, frames: block) }
            let t3 = threadCPUNanoseconds()
            return (t1 - t0, t2 - t1, t3 - t2)
        }

        /// Dependent floating-point arithmetic, no memory: the control. If it slows after a
        /// sleep too, the clock (not the caches) is what changed.
        func arithmetic() -> UInt64 {
            let t0 = threadCPUNanoseconds()
            var a = 1.000001, b = 0.999999
            for _ in 0..<20_000 { a = a * b + 1e-9; b = b * 0.9999999 + a * 1e-9 }
            let t1 = threadCPUNanoseconds()
            if a + b == 42 { print("") }   // keeps the loop
            return t1 - t0
        }

        for _ in 0..<300 { _ = oneBlock() }   // the canceller and the encoder settle
        let config = ",\"config\":\"sim board's block: 48 kHz, 1 mic, shipped chain (band 8 kHz), Opus 10 ms clean-network coding "
            + "(\(clean.cleanNetworkBitrate / 1000) kb/s, complexity \(clean.cleanNetworkComplexity)) + decode\""
        var backToBack = 0.0
        for sleepMs in [0, 5, 10] {
            let blocks = sleepMs == 0 ? 1000 : 400
            var apm: UInt64 = 0, encode: UInt64 = 0, decode: UInt64 = 0, control: UInt64 = 0
            for _ in 0..<blocks {
                if sleepMs > 0 {
                    var pause = timespec(tv_sec: 0, tv_nsec: sleepMs * 1_000_000)
                    _ = nanosleep(&pause, nil)
                }
                let t = oneBlock()
                apm += t.apm; encode += t.encode; decode += t.decode
                control += arithmetic()
            }
            let per = { (ns: UInt64) in Double(ns) / Double(blocks) / 1000 }
            let total = per(apm + encode + decode)
            if sleepMs == 0 { backToBack = total }
            let parts = ",\"apm_us\":\(rounded(per(apm))),\"encode_us\":\(rounded(per(encode))),\"decode_us\":\(rounded(per(decode))),"
                + "\"arithmetic_us\":\(rounded(per(control))),\"sleep_ms\":\(sleepMs)"
            MicroBench.emit("wake", sleepMs == 0 ? "wake.block_us" : "wake.block_us_after_\(sleepMs)ms", total, "us", parts + config)
            if sleepMs > 0 {
                MicroBench.emit("wake", "wake.factor_after_\(sleepMs)ms", backToBack > 0 ? total / backToBack : 0, "x",
                                ",\"measure\":\"the block's CPU time after a \(sleepMs) ms sleep over its time back to back\"")
            }
        }
    }

    /// The wake-up alone: a thread that does nothing but sleep on a periodic timer every 5 ms,
    /// woken as roomd's audio thread is on the sim card (poll on a timerfd, then read it). Its
    /// CPU time is the floor under `engine.cpu_pct` that no work in roomd can remove while the
    /// loop keeps 5 ms periods: on this KVM guest 25-45 µs per wake-up (docs/benchmarks.md, "The
    /// floor under `engine.cpu_pct`"). Run on a thread of its own, so that the thread CPU clock
    /// counts only the wake-ups.
    static func idleWakes(periodMs: Int = 5, wakes: Int = 600) -> Double? {
        final class Result: @unchecked Sendable { var perWakeUs: Double? }
        let result = Result()
        let thread = try? NativeThread(name: "idle-wakes") {
            let fd = clinux_timerfd_periodic(Int64(periodMs) * 1_000_000)
            guard fd >= 0 else { return }
            defer { close(fd) }
            var expirations: UInt64 = 0
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            for _ in 0..<20 { _ = poll(&pfd, 1, -1); _ = read(fd, &expirations, 8) }
            let t0 = threadCPUNanoseconds()
            for _ in 0..<wakes { _ = poll(&pfd, 1, -1); _ = read(fd, &expirations, 8) }
            result.perWakeUs = Double(threadCPUNanoseconds() - t0) / Double(wakes) / 1000
        }
        guard let thread else { return nil }
        thread.join()   // the thread's writes are visible after the join
        return result.perWakeUs
    }

    private static func rounded(_ v: Double) -> Double { (v * 100).rounded() / 100 }
}
