import RoomDSP
import XCTest

final class StreamMixerTests: XCTestCase {
    /// Runs one mix with the given per-slot buffers (nil = no audio this period).
    private func mix(_ mixer: StreamMixer, _ streams: [[Float]?], frames: Int) -> [Float] {
        var out = [Float](repeating: 123, count: frames)
        let pointers = UnsafeMutablePointer<UnsafePointer<Float>?>.allocate(capacity: streams.count)
        defer { pointers.deallocate() }
        var owned: [UnsafeMutablePointer<Float>] = []
        for (i, s) in streams.enumerated() {
            if let s {
                let p = UnsafeMutablePointer<Float>.allocate(capacity: s.count)
                p.initialize(from: s, count: s.count)
                owned.append(p)
                pointers[i] = UnsafePointer(p)
            } else {
                pointers[i] = nil
            }
        }
        defer { owned.forEach { $0.deallocate() } }
        out.withUnsafeMutableBufferPointer { mixer.mix(streams: UnsafeBufferPointer(start: pointers, count: streams.count), into: $0) }
        return out
    }

    func testSumsActiveStreamsTimesGains() {
        let mixer = StreamMixer(slots: 4, sampleRate: 48000, rampGainChanges: false)
        mixer.setActive(true, slot: 0)
        mixer.setActive(true, slot: 1)
        mixer.setActive(true, slot: 3)
        mixer.setGain(0.5, slot: 0)
        mixer.setGain(0.25, slot: 1)
        XCTAssertTrue(mixer.setGain(dB: -6.0206, slot: 3))
        let a: [Float] = [0.1, 0.2, -0.4, 0]
        let b: [Float] = [0.4, -0.4, 0.2, 0.8]
        let c: [Float] = [0.9, 0.9, 0.9, 0.9]     // slot 2 is inactive: must not be heard
        let d: [Float] = [0.2, 0.2, 0.2, 0.2]
        let out = mix(mixer, [a, b, c, d], frames: 4)
        for i in 0..<4 {
            XCTAssertEqual(out[i], a[i] * 0.5 + b[i] * 0.25 + d[i] * 0.5, accuracy: 1e-5, "frame \(i)")
        }
    }

    func testMasterGainAndNilStreams() {
        let mixer = StreamMixer(slots: 2, sampleRate: 48000, rampGainChanges: false)
        mixer.setActive(true, slot: 0)
        mixer.setActive(true, slot: 1)
        mixer.masterGain = 0.5
        let out = mix(mixer, [[0.4, -0.4], nil], frames: 2)
        XCTAssertEqual(out, [0.2, -0.2])
        mixer.masterGain = -1          // rejected: stays 0.5
        mixer.masterGain = .nan
        XCTAssertEqual(mixer.masterGain, 0.5)
        XCTAssertEqual(mix(mixer, [], frames: 2), [0, 0], "no streams: silence, and the output is overwritten")
    }

    func testSumIsLimited() {
        let mixer = StreamMixer(slots: 3, sampleRate: 48000, limiterThresholdDBFS: -1, rampGainChanges: false)
        for s in 0..<3 { mixer.setActive(true, slot: s) }
        let loud = [Float](repeating: 0.8, count: 64)
        let out = mix(mixer, [loud, loud, loud], frames: 64)   // 2.4 before limiting
        let ceiling = linear(fromDB: -1)
        XCTAssertTrue(out.allSatisfy { $0 <= ceiling && $0 > ceiling * 0.999 }, "\(out.prefix(3))")
        XCTAssertLessThan(mixer.limiterGain, 0.5)
    }

    func testGainChangesAreRampedOverOnePeriod() {
        let mixer = StreamMixer(slots: 1, sampleRate: 48000)
        mixer.setActive(true, slot: 0)
        let ones = [Float](repeating: 0.5, count: 4)
        // Activation ramps from 0 to the gain (1) across the period: 1/4, 2/4, 3/4, 4/4.
        XCTAssertEqual(mix(mixer, [ones], frames: 4), [0.125, 0.25, 0.375, 0.5])
        XCTAssertEqual(mix(mixer, [ones], frames: 4), [0.5, 0.5, 0.5, 0.5], "steady once reached")
        mixer.setGain(0, slot: 0)
        XCTAssertEqual(mix(mixer, [ones], frames: 4), [0.375, 0.25, 0.125, 0])
        mixer.setGain(1, slot: 0)
        mixer.setActive(false, slot: 0)
        XCTAssertEqual(mix(mixer, [ones], frames: 4), [0, 0, 0, 0], "inactive and already at zero: skipped")
    }

    func testControlRejectsBadInput() {
        let mixer = StreamMixer(slots: 2, sampleRate: 16000)
        XCTAssertFalse(mixer.setGain(1, slot: 2))
        XCTAssertFalse(mixer.setGain(1, slot: -1))
        XCTAssertFalse(mixer.setGain(.nan, slot: 0))
        XCTAssertFalse(mixer.setGain(-0.5, slot: 0))
        XCTAssertFalse(mixer.setActive(true, slot: 9))
        XCTAssertNil(mixer.gain(slot: 5))
        XCTAssertFalse(mixer.isActive(slot: 5))
        XCTAssertEqual(mixer.gain(slot: 0), 1, "slots start at unity gain")
        XCTAssertFalse(mixer.isActive(slot: 0), "and inactive")
        XCTAssertTrue(mixer.setGain(dB: -20, slot: 1))
        XCTAssertEqual(mixer.gain(slot: 1) ?? 0, 0.1, accuracy: 1e-6)
    }

    func testMoreStreamsThanSlotsAreIgnored() {
        let mixer = StreamMixer(slots: 1, sampleRate: 48000, rampGainChanges: false)
        mixer.setActive(true, slot: 0)
        XCTAssertEqual(mix(mixer, [[0.1], [0.7]], frames: 1), [0.1])
    }
}
