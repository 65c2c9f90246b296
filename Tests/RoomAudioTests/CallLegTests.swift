import COpus
import Foundation
@testable import RoomAudio
import RoomDSP
import RoomMedia
import RoomSystem
import RoomTelephony
import RoomTestSupport
import XCTest

/// Issue 29, item 1: a call's audio in the engine. The caller's telephone codecs play through
/// the jitter buffer, the caller is sent 20 ms frames of its codec, and what each side is sent
/// is a mix-minus (docs/calls.md).
final class CallLegTests: XCTestCase {
    /// Power of `frequency` in `x` (Goertzel), as a mean square: which of the test's tones a
    /// signal carries, and how much.
    static func tonePower(_ x: ArraySlice<Float>, frequency: Double, rate: Int) -> Double {
        let w = 2 * Double.pi * frequency / Double(rate)
        let c = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for v in x {
            let s = Double(v) + c * s1 - s2
            s2 = s1
            s1 = s
        }
        let power = s1 * s1 + s2 * s2 - c * s1 * s2
        return 2 * power / Double(x.count * x.count)
    }

    static func dB(_ ratio: Double) -> Double { 10 * log10(max(ratio, 1e-30)) }

    /// A tone switched on and off like syllables (so the voice detector and the gate treat it as
    /// someone talking), at 48 kHz.
    static func syllables(_ hz: Double, seconds: Double, amplitude: Float = 0.2, rate: Int = 48_000) -> [Float] {
        (0..<Int(seconds * Double(rate))).map { i in
            let t = Double(i) / Double(rate)
            let envelope = Float(max(0.15, sin(2 * Double.pi * 3 * t)))
            return amplitude * envelope * Float(sin(2 * Double.pi * hz * t))
        }
    }

    private func packets(_ signal: [Float], codec: AudioCodec, ssrc: UInt32) throws -> [MediaPacket] {
        let frame = codec.sampleRate / 50   // 20 ms at the codec's rate
        var at48k = signal
        if codec != .opus {
            let down = try XCTUnwrap(RateConverter(from: 48_000, to: codec.sampleRate))
            var out = [Float](repeating: 0, count: down.outputCapacity(forInput: signal.count))
            let n = out.withUnsafeMutableBufferPointer { down.process(signal, count: signal.count, into: $0.baseAddress!) }
            at48k = Array(out[0..<n])
        }
        var result: [MediaPacket] = []
        let g722 = G722Encoder()
        var i = 0
        while i + frame <= at48k.count {
            var p = MediaPacket()
            p.ssrc = ssrc
            p.codec = codec
            p.sequenceNumber = UInt16(truncatingIfNeeded: result.count)
            p.timestamp = UInt32(result.count * 960)   // the 48 kHz media clock, 20 ms a frame
            let ints = at48k[i..<(i + frame)].map { SampleConversion.int16(fromFloat: $0, scale: SampleConversion.outputScale) }
            var bytes: [UInt8]
            switch codec {
            case .pcmu: bytes = ints.map(G711.muLaw(fromLinear:))
            case .pcma: bytes = ints.map(G711.aLaw(fromLinear:))
            case .g722:
                bytes = [UInt8](repeating: 0, count: frame / 2)
                let n = ints.withUnsafeBufferPointer { g722.encode($0.baseAddress!, count: frame, into: &bytes) }
                bytes = Array(bytes[0..<n])
            case .opus: XCTFail("opus packets come from libopus"); return []
            }
            _ = bytes.withUnsafeBytes { p.setPayload($0) }
            result.append(p)
            i += frame
        }
        return result
    }

    /// G.711 frames of a call play at their level and pitch through a stream slot (20 ms
    /// frames, 10 ms periods at 48 kHz), and a lost frame is filled rather than left a hole.
    func testTelephoneFramesPlayAtTheirLevelAndLossIsFilled() throws {
        for codec in [AudioCodec.pcmu, .pcma, .g722] {
            let streams = try RemoteStreams(count: 2, rate: 48_000, periodFrames: 480, frameMilliseconds: 20, minimumDelayMs: 0)
            let stats = StreamStatistics(slots: 2)
            let tone = (0..<57_600).map { 0.3 * Float(sin(2 * Double.pi * 1000 * Double($0) / 48_000)) }
            var sent = try packets(tone, codec: codec, ssrc: 5)
            sent.remove(at: 40)   // one lost frame, 0.8 s in
            let slots = UnsafeMutablePointer<Float>.allocate(capacity: 2 * 480)
            let pointers = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: 2)
            defer { slots.deallocate(); pointers.deallocate() }
            var played: [Float] = []
            var now: Int64 = 1_000_000
            var next = 0
            for period in 0..<120 {
                while next < sent.count && Int(sent[next].timestamp) <= period * 480 {
                    var p = sent[next]
                    p.arrivalSamples = now
                    streams.insert(p, leg: .call)
                    next += 1
                }
                streams.render(into: slots, pointers: pointers, now: now, publishing: stats)
                played += pointers[0].map { Array(UnsafeBufferPointer(start: $0, count: 480)) } ?? [Float](repeating: 0, count: 480)
                now += 480
            }
            XCTAssertEqual(streams.leg(ofSlot: 0), .call)
            // 0.3 amplitude: mean square 0.045; the converters' pass band keeps it within 0.5 dB.
            let steady = Self.tonePower(played[9600..<33600], frequency: 1000, rate: 48_000)
            XCTAssertEqual(Self.dB(steady / 0.045), 0, accuracy: 0.6, "\(codec) level")
            // The lost frame is not a hole: the last 10 ms repeat, 20 % quieter each 10 ms (the
            // jitter buffer conceals 40 ms for this one loss: 1, 0.8, 0.6, 0.4 → -8 dB at the end).
            var quietest = Double.infinity
            for start in stride(from: 30_000, to: played.count - 480, by: 240) {
                quietest = min(quietest, played[start..<(start + 480)].reduce(0) { $0 + Double($1 * $1) } / 480)
            }
            XCTAssertGreaterThan(Self.dB(quietest / 0.045), -9, "\(codec): the lost frame left a hole")
        }
    }

    /// In-band DTMF for a far end without telephone-event: the queued digits come out of G.711
    /// as their two tones, one at a time, each 100 ms with a 100 ms pause, in order; the mic's
    /// sound is replaced while a digit sounds and is back after the last. Bad digits queue nothing.
    func testInBandDigitsReplaceTheMixAndDecodeInOrder() throws {
        let leg = CallLeg()
        let uplink = try CallUplink(leg: leg, rate: 48_000)
        XCTAssertFalse(leg.sendInBand("1x"), "a byte that is no digit refuses the whole string")
        XCTAssertFalse(leg.sendInBand(String(repeating: "1", count: 65)), "more than the queue holds")
        leg.start(codec: .pcmu)
        _ = uplink.follow()
        XCTAssertTrue(leg.sendInBand("1#9"))
        let voice = (0..<48_000).map { 0.3 * Float(sin(2 * Double.pi * 500 * Double($0) / 48_000)) }
        voice.withUnsafeBufferPointer { v in
            for block in 0..<100 { uplink.take(v.baseAddress! + (block % 50) * 480, count: 480, codec: .pcmu) }
        }
        var decoded: [Float] = []
        while let f = leg.outgoing.pop() {
            f.withPayload { p in for b in p { decoded.append(SampleConversion.float(fromInt16: G711.linear(fromMuLaw: b))) } }
        }
        XCTAssertEqual(decoded.count, 8000, "1 s at 8 kHz")
        // A 20 ms window names a digit when one low and one high DTMF tone each hold most of
        // their group's power and the voice's 500 Hz is far below them.
        let lows = [697.0, 770.0, 852.0, 941.0], highs = [1209.0, 1336.0, 1477.0, 1633.0]
        let keys = Array("123A456B789C*0#D")
        var heard: [Character] = []
        var last: Character? = nil
        for start in stride(from: 0, to: decoded.count - 160, by: 80) {
            let w = decoded[start..<(start + 160)]
            let l = lows.map { Self.tonePower(w, frequency: $0, rate: 8000) }, h = highs.map { Self.tonePower(w, frequency: $0, rate: 8000) }
            let li = l.indices.max { l[$0] < l[$1] }!, hi = h.indices.max { h[$0] < h[$1] }!
            let voice = Self.tonePower(w, frequency: 500, rate: 8000)
            let digit: Character? = l[li] > 1e-3 && h[hi] > 1e-3 && l[li] > 10 * (l.reduce(0, +) - l[li]) && h[hi] > 10 * (h.reduce(0, +) - h[hi]) && voice < 0.01 * l[li]
                ? keys[li * 4 + hi] : nil
            if let digit, digit != last { heard.append(digit) }
            last = digit
        }
        XCTAssertEqual(String(heard), "1#9")
        // After the three digits (0.6 s) the mic's sound is back at its level.
        XCTAssertEqual(Self.dB(Self.tonePower(decoded[5200..<8000], frequency: 500, rate: 8000) / 0.045), 0, accuracy: 0.6)
        XCTAssertLessThan(Self.tonePower(decoded[0..<800], frequency: 500, rate: 8000), 1e-4, "the mic is not mixed under a digit")
        leg.end()
    }

    /// The uplink to the caller: 20 ms frames of the call's codec, numbered and timed on the
    /// codec's RTP clock, restarted from 0 by a new call; the tone comes back at its level.
    func testTheCallerIsSentTwentyMillisecondFramesOfTheCallsCodec() throws {
        let leg = CallLeg()
        let uplink = try CallUplink(leg: leg, rate: 48_000)
        let tone = (0..<48_000).map { 0.3 * Float(sin(2 * Double.pi * 800 * Double($0) / 48_000)) }
        for codec in [AudioCodec.pcmu, .pcma, .g722, .opus] {
            leg.start(codec: codec)
            let (now, bridged) = uplink.follow()
            XCTAssertEqual(now, codec)
            XCTAssertFalse(bridged)
            tone.withUnsafeBufferPointer { t in
                for block in 0..<50 { uplink.take(t.baseAddress! + block * 480, count: 480, codec: codec) }
            }
            var frames: [MediaPacket] = []
            while let p = leg.outgoing.pop() { frames.append(p) }
            XCTAssertEqual(frames.count, 25, "\(codec): 0.5 s in 20 ms frames")
            XCTAssertEqual(frames.map(\.sequenceNumber), (0..<25).map { UInt16($0) })
            XCTAssertEqual(frames.map(\.timestamp), (0..<25).map { UInt32($0 * codec.rtpClockRate / 50) })
            XCTAssertTrue(frames.allSatisfy { $0.codec == codec })
            var decoded: [Float] = []
            switch codec {
            case .pcmu, .pcma:
                XCTAssertTrue(frames.allSatisfy { $0.length == 160 })
                for f in frames {
                    f.withPayload { p in
                        for b in p { decoded.append(SampleConversion.float(fromInt16: codec == .pcmu ? G711.linear(fromMuLaw: b) : G711.linear(fromALaw: b))) }
                    }
                }
                let level = Self.tonePower(decoded[800...], frequency: 800, rate: 8000)
                XCTAssertEqual(Self.dB(level / 0.045), 0, accuracy: 0.6, "\(codec) level")
            case .opus:
                var rc: Int32 = 0
                let dec = try XCTUnwrap(opus_decoder_create(48_000, 1, &rc))
                defer { opus_decoder_destroy(dec) }
                var pcm = [Float](repeating: 0, count: 960)
                for f in frames {
                    let n = f.withPayload { p in opus_decode_float(dec, p.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(p.count), &pcm, 960, 0) }
                    XCTAssertEqual(n, 960, "one 20 ms Opus frame")
                    decoded += pcm
                }
                let level = Self.tonePower(decoded[4800...], frequency: 800, rate: 48_000)
                XCTAssertEqual(Self.dB(level / 0.045), 0, accuracy: 1.5, "opus level")
            case .g722:
                XCTAssertTrue(frames.allSatisfy { $0.length == 160 }, "320 samples at 16 kHz in 160 bytes")
                let decoder = G722Decoder()
                var pcm = [Int16](repeating: 0, count: 320)
                for f in frames {
                    let n = f.withPayload { p in decoder.decode(p.baseAddress!.assumingMemoryBound(to: UInt8.self), count: p.count, into: &pcm) }
                    decoded += pcm[0..<n].map(SampleConversion.float(fromInt16:))
                }
                let level = Self.tonePower(decoded[1600...], frequency: 800, rate: 16_000)
                XCTAssertEqual(Self.dB(level / 0.045), 0, accuracy: 0.6, "g722 level")
            }
        }
        leg.end()
        XCTAssertNil(uplink.follow().codec)
        XCTAssertNil(leg.codec)
    }

    /// Bridging is a property of a call: without one, `setBridged` bridges nothing.
    func testBridgingNeedsACall() {
        let leg = CallLeg()
        leg.setBridged(true)
        XCTAssertFalse(leg.isBridged)
        leg.start(codec: .pcmu)
        XCTAssertFalse(leg.isBridged, "a call starts outside the room")
        leg.setBridged(true)
        XCTAssertTrue(leg.isBridged)
        leg.setBridged(false)
        XCTAssertFalse(leg.isBridged)
        leg.setBridged(true)
        leg.end()
        XCTAssertFalse(leg.isBridged)
    }
}

final class RingToneTests: XCTestCase {
    /// The ring's cadence and level: 0.4 s on, 0.2 s off, 0.4 s on, 2 s off, peaking at the
    /// amplitude asked for, restarting from its first ring.
    func testCadenceAndLevel() {
        var ring = RingTone(rate: 48_000)
        var out = [Float](repeating: 0, count: 48_000 * 3)
        out.withUnsafeMutableBufferPointer { b in
            for p in 0..<(b.count / 480) { ring.add(into: b.baseAddress! + p * 480, count: 480, amplitude: 0.5) }
        }
        func rms(_ from: Double, _ to: Double) -> Double {
            let s = out[Int(from * 48_000)..<Int(to * 48_000)]
            return (s.reduce(0) { $0 + Double($1 * $1) } / Double(s.count)).squareRoot()
        }
        XCTAssertGreaterThan(rms(0.05, 0.35), 0.2)
        XCTAssertEqual(rms(0.41, 0.59), 0)
        XCTAssertGreaterThan(rms(0.65, 0.95), 0.2)
        XCTAssertEqual(rms(1.01, 2.99), 0)
        XCTAssertLessThanOrEqual(out.map { abs($0) }.max()!, 0.5 + 1e-3)
        XCTAssertGreaterThan(out.map { abs($0) }.max()!, 0.49)
        XCTAssertGreaterThan(CallLegTests.tonePower(out[2400..<19_200], frequency: 440, rate: 48_000), 0.02)
        XCTAssertGreaterThan(CallLegTests.tonePower(out[2400..<19_200], frequency: 480, rate: 48_000), 0.02)
        // No click: neighbouring samples never jump by more than the two tones' slope allows.
        let steepest = zip(out.dropFirst(), out).map { abs($0 - $1) }.max()!
        XCTAssertLessThan(steepest, Float(0.25 * 2 * Double.pi * 480 / 48_000 * 2))
    }
}
