import COpus
import Foundation
@testable import RoomAudio
import RoomDSP
import RoomMedia
import RoomSystem
import RoomTelephony
import RoomTestSupport
import XCTest

/// Issue 29, items 1 and 3, in the real-time engine on the simulated card: with a caller
/// bridged into the room, the caller is sent the appliance's mic and the room, the room is sent
/// the mic and the caller, and neither is sent itself; muting the mic takes the mic out of both
/// and leaves the caller's audio to the room. Each talker is a tone of its own under a syllable
/// envelope, so what a side was sent is read off its decoded audio by frequency. The card's echo
/// is off: the mixing is what is tested here (the canceller's part is the call tests' against
/// real peers).
final class CallMixMinusTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(SimCard.prepared, "libasound_module_pcm_roomsim.so missing from \(SimCard.buildDirectory): run `swift build` first")
    }

    private static let micHz = 500.0, roomHz = 1200.0, callerHz = 2600.0

    /// Per half (mic on, then muted), the power of each talker's tone in what each side was sent.
    private struct Run {
        var caller: [[Double]] = []   // [half][mic, room, caller]
        var room: [[Double]] = []
        var xruns = 0
        var framesToCaller = 0
        /// With the allocation probe preloaded (docs/benchmarks.md): the audio thread's heap
        /// allocations in steady state, a call running; nil without the probe. (Its retain count
        /// is a release build's figure, `scripts/bench engine`; a debug build retains freely.)
        var steadyAllocations: Int?
    }

    private func run(seconds: Double) throws -> Run {
        let dir = SimCard.scratch("call-mix-minus")
        let mic = CallLegTests.syllables(Self.micHz, seconds: seconds + 1)
        SimCard.writeWAV(dir + "/mic.wav", mic)
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "echo": "off"])
        var config = SimCard.simBoardConfiguration()
        config.processing.noiseSuppress = false
        config.processing.gainControl = false
        config.processing.echoCancel = false
        config.opus.voiceGate = false
        config.opus.dtx = false
        let engine = try AudioEngine(configuration: config)

        // The room's talker: 10 ms Opus frames; the caller: 20 ms G.711 μ-law frames.
        let roomTalker = CallLegTests.syllables(Self.roomHz, seconds: seconds)
        let callerTalker = CallLegTests.syllables(Self.callerHz, seconds: seconds)
        var rc: Int32 = 0
        let enc = try XCTUnwrap(opus_encoder_create(48_000, 1, copus_application_voip(), &rc))
        defer { opus_encoder_destroy(enc) }
        _ = copus_set_bitrate(enc, 64_000)
        let dec = try XCTUnwrap(opus_decoder_create(48_000, 1, &rc))
        defer { opus_decoder_destroy(dec) }
        let toNarrow = try XCTUnwrap(RateConverter(from: 48_000, to: 8000))
        var narrow = [Float](repeating: 0, count: 200)

        engine.call.start(codec: .pcmu)
        engine.call.setBridged(true)
        try engine.start()
        defer { engine.stop() }
        var toCaller: [Float] = [], toRoom: [Float] = []
        let start = monotonicNanoseconds()
        let ticks = Int(seconds * 100)
        var muted = false
        var result = Run()
        var halves: [(caller: Int, room: Int)] = []
        for tick in 0..<ticks {
            let due = start + UInt64(tick) * 10_000_000
            while monotonicNanoseconds() < due { Thread.sleep(forTimeInterval: 0.001) }
            let arrival = mediaClockSamples(nanoseconds: monotonicNanoseconds())
            var p = MediaPacket()
            p.ssrc = 11
            p.sequenceNumber = UInt16(truncatingIfNeeded: tick)
            p.timestamp = UInt32(tick * 480)
            p.arrivalSamples = arrival
            var bytes = [UInt8](repeating: 0, count: 400)
            let n = roomTalker.withUnsafeBufferPointer { opus_encode_float(enc, $0.baseAddress! + tick * 480, 480, &bytes, 400) }
            _ = bytes.withUnsafeBytes { p.setPayload(UnsafeRawBufferPointer(rebasing: $0[0..<Int(max(n, 1))])) }
            XCTAssertTrue(engine.incomingMedia.push(p))
            if tick % 2 == 0 {
                var c = MediaPacket()
                c.ssrc = 22
                c.codec = .pcmu
                c.sequenceNumber = UInt16(truncatingIfNeeded: tick / 2)
                c.timestamp = UInt32(tick * 480)
                c.arrivalSamples = arrival
                let made = callerTalker.withUnsafeBufferPointer { t in
                    narrow.withUnsafeMutableBufferPointer { toNarrow.process(t.baseAddress! + tick * 480, count: 960, into: $0.baseAddress!) }
                }
                let law = narrow[0..<made].map { G711.muLaw(fromLinear: SampleConversion.int16(fromFloat: $0, scale: SampleConversion.outputScale)) }
                _ = law.withUnsafeBytes { c.setPayload($0) }
                XCTAssertTrue(engine.call.incoming.push(c))
            }
            while let f = engine.call.outgoing.pop() {
                f.withPayload { for b in $0 { toCaller.append(SampleConversion.float(fromInt16: G711.linear(fromMuLaw: b))) } }
                result.framesToCaller += 1
            }
            while let f = engine.outgoingMedia.pop() {
                var pcm = [Float](repeating: 0, count: 960)
                let got = f.withPayload { opus_decode_float(dec, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count), &pcm, 960, 0) }
                if got > 0 { toRoom += pcm[0..<Int(got)] }
            }
            if tick == ticks / 2 && !muted {
                halves.append((toCaller.count, toRoom.count))
                engine.control.setMicMuted(true)
                muted = true
            }
        }
        halves.append((toCaller.count, toRoom.count))
        let s = engine.stats.snapshot()
        result.xruns = s.captureXruns + s.playbackXruns
        if s.allocationProbeActive {
            result.steadyAllocations = s.steadyAllocations
        }
        // Each half without its first 1.5 s (streams starting, then the mute taking effect).
        for (h, end) in halves.enumerated() {
            let callerStart = (h == 0 ? 0 : halves[0].caller) + 12_000, roomStart = (h == 0 ? 0 : halves[0].room) + 72_000
            XCTAssertGreaterThan(end.caller - callerStart, 8000, "at least a second of audio sent to the caller")
            XCTAssertGreaterThan(end.room - roomStart, 48_000, "at least a second of audio sent to the room")
            let c = toCaller[callerStart..<end.caller], r = toRoom[roomStart..<end.room]
            result.caller.append([Self.micHz, Self.roomHz, Self.callerHz].map { CallLegTests.tonePower(c, frequency: $0, rate: 8000) })
            result.room.append([Self.micHz, Self.roomHz, Self.callerHz].map { CallLegTests.tonePower(r, frequency: $0, rate: 48_000) })
        }
        return result
    }

    func testEachSideIsSentEveryoneButItself() throws {
        // A talker present is a tone at ~ -23 dB (mean square 0.2² · ⟨envelope²⟩ / 2); absent, only
        // the codecs' noise at its frequency: 30 dB apart at least.
        func missed(_ r: Run) -> Bool {
            for half in 0..<2 {
                let mic = half == 0
                let c = r.caller[half], m = r.room[half]
                let loudest = max(c[1], m[2])
                if CallLegTests.dB(c[2] / loudest) > -30 || CallLegTests.dB(m[1] / loudest) > -30 { return true }
                if CallLegTests.dB(c[1] / loudest) < -6 || CallLegTests.dB(m[2] / loudest) < -6 { return true }
                if mic != (CallLegTests.dB(c[0] / loudest) > -10) || mic != (CallLegTests.dB(m[0] / loudest) > -10) { return true }
            }
            return false
        }
        let r = try Disturbance.rerun("call mix-minus", disturbed: { run, stall in missed(run) && (run.xruns > 0 || stall >= Disturbance.machineStallMilliseconds) }) {
            try run(seconds: 6)
        }
        let names = ["mic", "room", "caller"]
        func show(_ p: [Double], _ ref: Double) -> String { zip(names, p).map { "\($0) \(String(format: "%.1f", CallLegTests.dB($1 / ref))) dB" }.joined(separator: ", ") }
        for half in 0..<2 {
            let c = r.caller[half], m = r.room[half]
            let loudest = max(c[1], m[2])
            let label = half == 0 ? "mic on" : "mic muted"
            print("call mix-minus, \(label): to the caller \(show(c, loudest)); to the room \(show(m, loudest))")
            XCTAssertLessThan(CallLegTests.dB(c[2] / loudest), -30, "\(label): the caller is not sent back to the caller")
            XCTAssertLessThan(CallLegTests.dB(m[1] / loudest), -30, "\(label): the room is not sent back to the room")
            XCTAssertGreaterThan(CallLegTests.dB(c[1] / loudest), -6, "\(label): the caller hears the room")
            XCTAssertGreaterThan(CallLegTests.dB(m[2] / loudest), -6, "\(label): the room hears the caller (bridged)")
            if half == 0 {
                XCTAssertGreaterThan(CallLegTests.dB(c[0] / loudest), -10, "the caller hears the appliance's mic")
                XCTAssertGreaterThan(CallLegTests.dB(m[0] / loudest), -10, "the room hears the appliance's mic")
            } else {
                XCTAssertLessThan(CallLegTests.dB(c[0] / loudest), -30, "muted: the caller does not hear the mic")
                XCTAssertLessThan(CallLegTests.dB(m[0] / loudest), -30, "muted: the room does not hear the mic")
            }
        }
        XCTAssertEqual(r.framesToCaller, 300, accuracy: 6, "6 s of 20 ms frames to the caller")
        if let allocations = r.steadyAllocations {
            XCTAssertEqual(allocations, 0, "the audio loop allocates nothing with a call and a bridged caller")
        }
    }
}
