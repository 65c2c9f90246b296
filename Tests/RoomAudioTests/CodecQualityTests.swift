import RoomAudio
import RoomCaptureChain
import RoomOpus
import XCTest

/// The codec settings `scripts/bench quality` chose (docs/audio-engine.md, "Codec settings"),
/// checked where they can regress without a listener noticing in a unit test: what the encoder
/// is configured with (read back through libopus's getters), the audio band that survives an
/// encode → decode, and that in-band FEC rebuilds a lost frame better than concealment.
final class CodecQualityTests: XCTestCase {
    private let rate = 48000

    /// Speech-like test signal: a voiced harmonic series (f0 110-150 Hz, harmonics up to 7.8 kHz
    /// falling 3 dB per octave) with a syllable envelope, plus a little noise; deterministic.
    private func speechLike(seconds: Double) -> [Float] {
        let n = Int(seconds * Double(rate))
        var out = [Float](repeating: 0, count: n)
        var seed: UInt64 = 0x5EED
        var phase = 0.0
        for i in 0..<n {
            let t = Double(i) / Double(rate)
            let f0 = 130 + 20 * sin(2 * Double.pi * 0.9 * t)
            phase += 2 * Double.pi * f0 / Double(rate)
            var s = 0.0
            var h = 1
            while Double(h) * f0 < 7800 {
                s += sin(Double(h) * phase) / Double(h).squareRoot()
                h += 1
            }
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            let noise = Double(Int64(bitPattern: seed) >> 11) / Double(1 << 52)
            let envelope = 0.55 + 0.45 * sin(2 * Double.pi * 3 * t)
            out[i] = Float(0.05 * s * envelope + 0.002 * noise)
        }
        return out
    }

    /// Energy above ~7 kHz: four cascaded RBJ high-pass biquads at 7 kHz (8th order, so the
    /// mediumband codec's 6 kHz content hardly leaks in).
    private func energyAbove7kHz(_ x: ArraySlice<Float>) -> Double {
        let w0 = 2 * Double.pi * 7000 / Double(rate)
        let alpha = sin(w0) / (2 * 0.7071)
        let cw = cos(w0)
        let b0 = (1 + cw) / 2, b1 = -(1 + cw), b2 = (1 + cw) / 2
        let a0 = 1 + alpha, a1 = -2 * cw, a2 = 1 - alpha
        var y = x.map(Double.init)
        for _ in 0..<4 {
            var x1 = 0.0, x2 = 0.0, y1 = 0.0, y2 = 0.0
            for i in y.indices {
                let v = y[i]
                let o = (b0 * v + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2) / a0
                x2 = x1; x1 = v; y2 = y1; y1 = o
                y[i] = o
            }
        }
        return y.reduce(0) { $0 + $1 * $1 }
    }

    /// Encodes `pcm` frame by frame with the speech profile applied as the engine applies it,
    /// decodes it, and returns the decoded signal (same length, Opus delay removed) and the
    /// packets.
    private func roundTrip(_ pcm: [Float], settings: OpusSettings,
                           lose: (Int) -> Bool = { _ in false }, fec: Bool = true) throws -> (out: [Float], packets: [[UInt8]], band: OpusBandwidth?) {
        let encoder = try OpusEncoderBox(rate: rate, settings: settings, environment: false)
        _ = encoder.apply(AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: settings, environment: false).encoder)
        let decoder = try OpusDecoderBox(rate: rate)
        let frame = encoder.frameSamples
        let frames = pcm.count / frame
        var packets: [[UInt8]] = []
        var packet = [UInt8](repeating: 0, count: 1500)
        for f in 0..<frames {
            let n = pcm.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * frame, into: &packet, capacity: 1500) }
            XCTAssertGreaterThan(n, 0)
            packets.append(Array(packet[0..<max(n, 0)]))
        }
        var out = [Float](repeating: 0, count: frames * frame)
        out.withUnsafeMutableBufferPointer { o in
            for f in 0..<frames {
                let dst = o.baseAddress! + f * frame
                if !lose(f) {
                    _ = packets[f].withUnsafeBufferPointer { decoder.decode($0.baseAddress!, length: $0.count, into: dst, frames: frame) }
                } else if fec, f + 1 < frames, !lose(f + 1) {
                    _ = packets[f + 1].withUnsafeBufferPointer { decoder.decodeFEC(from: $0.baseAddress!, length: $0.count, into: dst, frames: frame) }
                } else {
                    _ = decoder.conceal(into: dst, frames: frame)
                }
            }
        }
        // libopus delays the signal by its look-ahead (6.5 ms at 48 kHz in VOIP mode: 312 samples).
        let delay = 312
        return (Array(out[delay...]) + [Float](repeating: 0, count: delay), packets, encoder.lastBandwidth)
    }

    func testDefaultsAreTheMeasuredSpeechSettings() {
        let s = OpusSettings()
        XCTAssertEqual(s.bitrate, 96000)
        XCTAssertEqual(s.maxBandwidth, .wide)
        XCTAssertEqual(s.complexity, 5)
        XCTAssertEqual(s.frameMilliseconds, 10)
        XCTAssertTrue(s.inbandFEC)
        XCTAssertEqual(s.expectedLossPercent, 5)
        XCTAssertTrue(s.dtx)
        XCTAssertTrue(s.vbr)
        XCTAssertTrue(s.voiceGate)
    }

    /// What the encoder runs with after creation and after each profile is applied, read back
    /// from libopus itself (a setting lost between Swift and the ctl call shows here).
    func testEncoderReadsBackEachProfile() throws {
        let encoder = try OpusEncoderBox(rate: rate, settings: OpusSettings(), environment: false)
        let created = encoder.readBack()
        XCTAssertEqual(created, OpusEncoderReadback(bitrate: 96000, maxBandwidth: .wide, complexity: 5, inbandFEC: true,
                                                    expectedLossPercent: 5, dtx: true, vbr: true, music: false))
        XCTAssertEqual(encoder.apply(AudioProfileSettings(.music, processing: ProcessingSettings(), opus: OpusSettings(), environment: false).encoder), 0)
        let music = encoder.readBack()
        XCTAssertEqual(music.bitrate, AudioProfileSettings.musicMinimumBitrate)
        XCTAssertEqual(music.maxBandwidth, .full)
        XCTAssertTrue(music.music)
        XCTAssertFalse(music.dtx)
        XCTAssertEqual(encoder.apply(AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: OpusSettings(), environment: false).encoder), 0)
        XCTAssertEqual(encoder.readBack(), created, "back to speech: exactly the created configuration")
        XCTAssertEqual(encoder.setExpectedLoss(percent: 0), 0)
        XCTAssertEqual(encoder.readBack().expectedLossPercent, 0)
    }

    /// Loss-driven coding picks the layer: SILK with its FEC copy while listeners lose packets,
    /// the transform layer (CELT) while the network is clean — read from the packets' TOC bytes,
    /// since the signal hint only steers libopus's choice. The clean coding must also keep the
    /// wideband top octave (it is what a listener hears on a clean network).
    func testCleanNetworkCodesInTheTransformLayer() throws {
        let speech = AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: OpusSettings(), environment: false)
        let encoder = try OpusEncoderBox(rate: rate, settings: OpusSettings(), environment: false)
        let decoder = try OpusDecoderBox(rate: rate)
        let pcm = speechLike(seconds: 2)
        var adaptation = LossAdaptation(initialPercent: 5)
        func layers(count: Int, from start: Int) -> (layers: [OpusLayer: Int], out: [Float]) {
            var seen: [OpusLayer: Int] = [:]
            var out: [Float] = []
            var packet = [UInt8](repeating: 0, count: 1500)
            var frame = [Float](repeating: 0, count: encoder.frameSamples)
            for f in 0..<count {
                let at = start + f * encoder.frameSamples
                let n = pcm.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + at, into: &packet, capacity: packet.count) }
                XCTAssertGreaterThan(n, 0)
                if n > 2 { seen[OpusLayer(toc: packet[0]), default: 0] += 1 }   // 1-2 bytes: a DTX frame
                let got = frame.withUnsafeMutableBufferPointer { decoder.decode(packet, length: n, into: $0.baseAddress!, frames: encoder.frameSamples) }
                XCTAssertEqual(got, encoder.frameSamples)
                out += frame
            }
            return (seen, out)
        }
        XCTAssertEqual(encoder.apply(adaptation.coding(for: speech)), 0)
        let protected = layers(count: 50, from: 0)
        XCTAssertGreaterThan(protected.layers[.silk] ?? 0, 25, "FEC on: SILK, got \(protected.layers)")
        XCTAssertEqual(protected.layers[.silk], protected.layers.values.reduce(0, +), "FEC on: only SILK, got \(protected.layers)")
        for _ in 0..<LossAdaptation.cleanReportsToRelax { _ = adaptation.update(reportedPercent: 0) }
        let clean = adaptation.coding(for: speech)
        XCTAssertEqual(clean, EncoderCoding(bitrate: 96000, expectedLossPercent: 0, musicSignal: true, complexity: 0))
        XCTAssertEqual(encoder.apply(clean), 0)
        // libopus runs what was asked: the transform layer's search tools off (the clean-network
        // complexity), SILK's complexity back with the loss below.
        XCTAssertEqual(encoder.readBack().complexity, 0)
        let frames = 100, start = 50 * encoder.frameSamples
        let transform = layers(count: frames, from: start)
        // The first frame or two after the switch may still be SILK (libopus's transition).
        XCTAssertGreaterThanOrEqual(transform.layers[.celt] ?? 0, frames - 2, "clean: the transform layer, got \(transform.layers)")
        let skip = 10 * encoder.frameSamples, end = transform.out.count - 1000
        let ratio = 10 * log10(energyAbove7kHz(transform.out[skip..<end]) / energyAbove7kHz(pcm[(start + skip)..<(start + end)]))
        XCTAssertGreaterThan(ratio, -6, "energy above 7 kHz in the transform layer: \(ratio) dB")
        // Loss again: back to SILK with FEC.
        XCTAssertTrue(adaptation.update(reportedPercent: 5))
        XCTAssertEqual(encoder.apply(adaptation.coding(for: speech)), 0)
        let back = layers(count: 50, from: start + frames * encoder.frameSamples)
        XCTAssertGreaterThanOrEqual(back.layers[.silk] ?? 0, back.layers.values.reduce(0, +) - 2, "loss reported: SILK again, got \(back.layers)")
        XCTAssertGreaterThan(back.layers[.silk] ?? 0, 25)
        XCTAssertEqual(encoder.readBack().complexity, 5)
        // clean_celt=0 keeps SILK on a clean network.
        let silkOnly = AudioProfileSettings(.speech, processing: ProcessingSettings(),
                                            opus: try OpusSettings().overridden(by: "clean_celt=0"), environment: false)
        var quiet = LossAdaptation(initialPercent: 0)
        _ = quiet.update(reportedPercent: 0)
        XCTAssertFalse(quiet.coding(for: silkOnly).musicSignal)
        XCTAssertEqual(quiet.coding(for: silkOnly).complexity, 5)
    }

    /// On a clean network the transform layer is coded by a RESTRICTED_LOWDELAY encoder, whose
    /// 2.5 ms of look-ahead is 4 ms less than VOIP's 6.5 (mouth-to-ear, `scripts/bench e2e`); the
    /// engine makes it the coding encoder in a pause (`switchEncoder`). Measured here as the
    /// delay of the decoded speech against what went in, not only as libopus's figure.
    func testACleanNetworkIsCodedWithFourMillisecondsLessLookAhead() throws {
        let speech = AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: OpusSettings(), environment: false)
        let encoder = try OpusEncoderBox(rate: rate, settings: OpusSettings(), environment: false, lowDelay: true)
        _ = encoder.apply(speech.encoder)
        var adaptation = LossAdaptation(initialPercent: 5)
        let pcm = speechLike(seconds: 1)
        /// The lag (samples) at which the decoded signal matches the input best.
        func measuredDelay() throws -> Int {
            let decoder = try OpusDecoderBox(rate: rate)
            encoder.reset()
            var out = [Float](), frame = [Float](repeating: 0, count: encoder.frameSamples)
            var packet = [UInt8](repeating: 0, count: 1500)
            for f in 0..<(pcm.count / encoder.frameSamples) {
                let n = pcm.withUnsafeBufferPointer { encoder.encode($0.baseAddress! + f * encoder.frameSamples, into: &packet, capacity: packet.count) }
                XCTAssertGreaterThan(n, 0)
                _ = frame.withUnsafeMutableBufferPointer { decoder.decode(packet, length: n, into: $0.baseAddress!, frames: encoder.frameSamples) }
                out += frame
            }
            let from = 4800, count = 19200
            var best = (lag: 0, c: -Float.infinity)
            pcm.withUnsafeBufferPointer { x in
                out.withUnsafeBufferPointer { y in
                    for lag in 0...480 {
                        var c: Float = 0
                        for i in from..<(from + count) { c += x[i] * y[i + lag] }
                        if c > best.c { best = (lag, c) }
                    }
                }
            }
            return best.lag
        }
        XCTAssertEqual(encoder.apply(adaptation.coding(for: speech)), 0)
        XCTAssertFalse(encoder.switchPending, "protecting: the VOIP encoder, as created")
        XCTAssertEqual(encoder.lookaheadSamples, 312)
        let protectedDelay = try measuredDelay()
        _ = adaptation.update(reportedPercent: 0)
        XCTAssertEqual(encoder.apply(adaptation.coding(for: speech)), 0)
        XCTAssertTrue(encoder.switchPending, "clean: the low-delay encoder is asked for")
        XCTAssertFalse(encoder.codingWithLowDelay, "not before the engine switches")
        encoder.switchEncoder()
        XCTAssertTrue(encoder.codingWithLowDelay)
        XCTAssertEqual(encoder.lookaheadSamples, 120)
        XCTAssertEqual(encoder.readBack().complexity, 0, "the clean coding reached the main encoder")
        XCTAssertEqual(encoder.readBack(lowDelay: true).complexity, 0, "the clean coding reached the low-delay encoder")
        XCTAssertEqual(encoder.readBack(lowDelay: true).bitrate, 96000)
        let cleanDelay = try measuredDelay()
        print("decoded speech delayed by \(protectedDelay) samples protecting, \(cleanDelay) on a clean network")
        XCTAssertEqual(protectedDelay, 312, accuracy: 3)
        XCTAssertEqual(cleanDelay, 120, accuracy: 3)
        // Loss again: the protecting encoder (SILK and its FEC copy), switched back the same way.
        XCTAssertTrue(adaptation.update(reportedPercent: 5))
        XCTAssertEqual(encoder.apply(adaptation.coding(for: speech)), 0)
        XCTAssertTrue(encoder.switchPending)
        encoder.switchEncoder()
        XCTAssertFalse(encoder.codingWithLowDelay)
        XCTAssertEqual(encoder.lookaheadSamples, 312)
        // An encoder whose coding never changes (a call leg's) makes no low-delay encoder; nor
        // does the engine's with ROOMD_OPUS_LOW_DELAY=off, and another value is refused by name.
        let clean = EncoderCoding(bitrate: 96000, expectedLossPercent: 0, musicSignal: true, complexity: 0)
        let plain = try OpusEncoderBox(rate: rate, settings: OpusSettings(), environment: false)
        _ = plain.apply(clean)
        XCTAssertFalse(plain.switchPending)
        setenv(OpusEncoderBox.lowDelayEnvironmentVariable, "off", 1)
        defer { unsetenv(OpusEncoderBox.lowDelayEnvironmentVariable) }
        let without = try OpusEncoderBox(rate: rate, settings: OpusSettings(), lowDelay: true)
        _ = without.apply(clean)
        XCTAssertFalse(without.switchPending)
        XCTAssertEqual(without.lookaheadSamples, 312)
        setenv(OpusEncoderBox.lowDelayEnvironmentVariable, "of", 1)
        XCTAssertThrowsError(try OpusEncoderBox(rate: rate, settings: OpusSettings(), lowDelay: true)) { error in
            XCTAssertTrue("\(error)".contains("ROOMD_OPUS_LOW_DELAY=of: on or off"), "\(error)")
        }
    }

    /// The regression issue 9 found: 24 kb/s with FEC for 10 % loss made libopus fall back to
    /// mediumband, cutting everything above ~6.5 kHz (-53 dB at 7-8 kHz). The speech profile
    /// must keep the wideband top octave: energy above 7 kHz within 6 dB of the input's.
    func testSpeechKeepsTheBandAbove7kHz() throws {
        let pcm = speechLike(seconds: 2)
        let (out, _, band) = try roundTrip(pcm, settings: OpusSettings())
        XCTAssertEqual(band, .wide, "the encoder codes wideband speech")
        let skip = rate / 2  // after the encoder's start-up
        let ratio = 10 * log10(energyAbove7kHz(out[skip..<(out.count - 1000)]) / energyAbove7kHz(pcm[skip..<(out.count - 1000)]))
        XCTAssertGreaterThan(ratio, -6, "energy above 7 kHz after encode/decode: \(ratio) dB")

        // The old settings lose it (this is what the test is for): same signal, 24 kb/s, FEC at 10 %.
        var old = OpusSettings()
        old.bitrate = 24000
        old.maxBandwidth = .superwide
        old.expectedLossPercent = 10
        let (oldOut, _, oldBand) = try roundTrip(pcm, settings: old)
        let oldRatio = 10 * log10(energyAbove7kHz(oldOut[skip..<(out.count - 1000)]) / energyAbove7kHz(pcm[skip..<(out.count - 1000)]))
        XCTAssertLessThan(oldRatio, -15, "24 kb/s + FEC 10 %: band \(String(describing: oldBand)), \(oldRatio) dB above 7 kHz")
        print("speech profile: \(ratio) dB above 7 kHz; old settings: \(oldRatio) dB")
    }

    /// In-band FEC is in the packets and worth having: with every 7th frame lost, rebuilding
    /// from the next packet's FEC copy gets closer to the loss-free decode than concealment.
    func testFECRebuildsLostFramesBetterThanConcealment() throws {
        let pcm = speechLike(seconds: 3)
        let clean = try roundTrip(pcm, settings: OpusSettings()).out
        let lose: (Int) -> Bool = { $0 > 20 && $0 % 7 == 3 }
        let withFEC = try roundTrip(pcm, settings: OpusSettings(), lose: lose, fec: true).out
        let plcOnly = try roundTrip(pcm, settings: OpusSettings(), lose: lose, fec: false).out
        func snr(_ y: [Float]) -> Double {
            var s = 0.0, e = 0.0
            for i in (rate / 2)..<(clean.count - 1000) { s += Double(clean[i] * clean[i]); e += Double((y[i] - clean[i]) * (y[i] - clean[i])) }
            return 10 * log10(s / max(e, 1e-20))
        }
        XCTAssertGreaterThan(snr(withFEC), snr(plcOnly) + 3, "FEC \(snr(withFEC)) dB vs PLC \(snr(plcOnly)) dB")
    }

    func testLossDrivenExpectedLossHasNoFECTaxOnACleanNetwork() {
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 0, current: 0), 0)
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 0.7, current: 0), 0, "under 1 %: stays off")
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 0.7, current: 3), 3, "hysteresis: on until under 0.5 %")
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 0.4, current: 3), 0)
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 1.2, current: 0), 3)
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 6.4, current: 3), 6)
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: 35, current: 6), 10)
        XCTAssertEqual(OpusSettings.expectedLoss(forReportedLoss: .nan, current: 6), 0)
    }

    func testEnvironmentOverridesParseAndNameBadKeys() throws {
        let s = try OpusSettings().overridden(by: "bitrate=32000, bandwidth=swb,fec=0,loss=0,complexity=8,dtx=0,vbr=0,gate=0")
        XCTAssertEqual(s.bitrate, 32000)
        XCTAssertEqual(s.maxBandwidth, .superwide)
        XCTAssertFalse(s.inbandFEC)
        XCTAssertEqual(s.expectedLossPercent, 0)
        XCTAssertEqual(s.complexity, 8)
        XCTAssertFalse(s.dtx)
        XCTAssertFalse(s.vbr)
        XCTAssertFalse(s.voiceGate)
        XCTAssertEqual(try OpusSettings().overridden(by: ""), OpusSettings())
        for bad in ["bitrate=lots", "complexity=11", "bandwidth=huge", "frame=20", "fec"] {
            XCTAssertThrowsError(try OpusSettings().overridden(by: bad), bad) { error in
                XCTAssertTrue("\(error)".contains("ROOMD_OPUS"), "\(error)")
            }
        }
        let speech = AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: s, environment: false)
        XCTAssertEqual(speech.encoder.bitrate, 32000)
        XCTAssertEqual(speech.encoder.bandwidth, .superwide)
        XCTAssertFalse(speech.voiceGate)
        XCTAssertFalse(speech.encoder.inbandFEC)
    }
}
