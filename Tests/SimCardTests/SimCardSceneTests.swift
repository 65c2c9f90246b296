// Scenes (docs/sim-card.md, "Scenes"): talkers, noise and the speaker placed in a shoebox room,
// each reaching each mic through its own image-source response, heard through real ALSA calls.
// The figures asserted are the geometry's (distance / speed of sound, 1 / distance) and the
// scene's reverberation time; the responses themselves are checked against pyroomacoustics by
// `scripts/bench scene`.
import CAlsa
import Glibc
import XCTest

final class SimCardSceneTests: XCTestCase {
    override func setUpWithError() throws {
        try SimCard.setUp()
    }

    /// board/sim's array: radius 32 mm, mic0 on +x, then counter-clockwise.
    static let mics: [[Double]] = [[0.032, 0, 0], [0, 0.032, 0], [-0.032, 0, 0], [0, -0.032, 0]]
    static let micLines = mics.enumerated().map { "mic\($0.offset) = \($0.element[0]) \($0.element[1]) \($0.element[2])" }
        .joined(separator: "\n")
    static let centre = [2.5, 2.0, 0.75]

    static func distance(_ a: [Double], _ b: [Double]) -> Double {
        sqrt(zip(a, b).map { ($0 - $1) * ($0 - $1) }.reduce(0, +))
    }
    static func micPosition(_ m: Int) -> [Double] { zip(centre, mics[m]).map { $0 + $1 } }

    /// Writes `scene` beside the room file and returns its path.
    @discardableResult
    private func writeScene(_ room: Room, _ body: String) -> String {
        let path = "\(room.dir)/test.scene"
        let text = """
            room = 5 4 2.8
            array = \(Self.centre.map { String($0) }.joined(separator: " "))
            \(Self.micLines)

            """ + body + "\n"
        writeFile(path, Array(text.utf8))
        return path
    }

    /// The amplitude of an impulse arriving at `at`: the root of its energy within 8 samples.
    private func directLevel(_ x: [Double], at: Int) -> Double {
        sqrt(x[(at - 8)...(at + 8)].map { $0 * $0 }.reduce(0, +))
    }

    /// Schroeder T20 of x (from its start) at 48 kHz, in seconds.
    private func t20(_ x: [Double]) -> Double {
        var edc = [Double](repeating: 0, count: x.count)
        var sum = 0.0
        for i in stride(from: x.count - 1, through: 0, by: -1) { sum += x[i] * x[i]; edc[i] = sum }
        let db = edc.map { 10 * log10($0 / edc[0] + 1e-30) }
        guard let a = db.firstIndex(where: { $0 <= -5 }), let b = db.firstIndex(where: { $0 <= -25 }), b > a + 1 else { return 0 }
        let xs = (a..<b).map { Double($0) / 48000 }, ys = Array(db[a..<b])
        let n = Double(xs.count), sx = xs.reduce(0, +), sy = ys.reduce(0, +)
        let sxx = xs.map { $0 * $0 }.reduce(0, +), sxy = zip(xs, ys).map { $0 * $1 }.reduce(0, +)
        return -60 / ((n * sxy - sx * sy) / (n * sxx - sx * sx))
    }

    func testTalkerReachesEachMicAtItsDistanceAndTheRoomDecaysInItsRT60() throws {
        let room = Room("scene = test.scene\necho = off")
        let talker = [3.7, 2.6, 1.2], clickAt = 2400
        var click = [Int16](repeating: 0, count: 48000)
        click[clickAt] = 16000
        writeFile("\(room.dir)/click.wav", wavBytes(channels: 1, rate: 48000, samples: click))
        writeScene(room, """
            rt60_ms = 400
            talker1 = click.wav
            talker1_at = \(talker[0]) \(talker[1]) \(talker[2])
            """)
        defer { withExtendedLifetime(room) {} }   // each run opens the room's files again
        let got = try captureAll("testTalkerReachesEachMicAtItsDistanceAndTheRoomDecaysInItsRT60", channels: 4, frames: 48000)
        var arrivals: [Int] = []
        for m in 0..<4 {
            let d = Self.distance(talker, Self.micPosition(m))
            let expected = Double(clickAt) + d / 343 * 48000
            let mic = (0..<48000).map { Double(got[$0 * 4 + m]) }
            let peak = mic.indices.max { abs(mic[$0]) < abs(mic[$1]) }!
            arrivals.append(peak)
            XCTAssertEqual(Double(peak), expected, accuracy: 1.0, "mic \(m): direct path at \(peak), geometry says \(expected)")
            // 1 / distance (gain 1 at 1 m): the direct sound's energy (a fractional delay spreads it
            // over the interpolator's taps, so its peak alone is lower)
            XCTAssertEqual(directLevel(mic, at: peak), 16000 / d, accuracy: 16000 / d * 0.1, "mic \(m): level")
            XCTAssertTrue(mic[0..<(clickAt + Int(d / 343 * 48000) - 25)].allSatisfy { abs($0) < 2 },
                          "mic \(m) hears the talker before the sound can arrive")
            let decay = t20(Array(mic[peak...]))
            XCTAssertEqual(decay, 0.4, accuracy: 0.4 * 0.15, "mic \(m): T20 \(decay) s for rt60_ms = 400")
        }
        // the differences between mics are the array's geometry (what localization reads)
        XCTAssertNotEqual(arrivals[0], arrivals[2], "a talker off to the side reaches mic0 and mic2 at different times")
    }

    func testSpeakerEchoReachesEachMicThroughItsOwnResponse() throws {
        let room = Room("scene = test.scene\necho = on\necho_delay_ms = 2\necho_gain_db = 0")
        let speaker = [0.07, 0.0, -0.03] // off-centre under the array: each mic is at its own distance
        writeScene(room, "rt60_ms = 300\nspeaker = \(speaker[0]) \(speaker[1]) \(speaker[2])")
        let impulseAt = 4800, total = 14400
        let run = try playImpulse(room, at: impulseAt, level: 1000, total: total)
        let mics = run.mics
        XCTAssertEqual(run.playback["xruns"], "0")
        let x = run.speakerOffset(echoDelayMs: 2)
        let source = zip(Self.centre, speaker).map { $0 + $1 }
        for m in 0..<4 {
            let d = Self.distance(source, Self.micPosition(m))
            let expected = Double(impulseAt) - x.rounded() + d / 343 * 48000
            let mic = (0..<total).map { Double(mics[$0 * 4 + m]) }
            let peak = mic.indices.max { abs(mic[$0]) < abs(mic[$1]) }!
            XCTAssertEqual(Double(peak), expected, accuracy: 1.0, "mic \(m): echo at \(peak), geometry says \(expected)")
            XCTAssertEqual(directLevel(mic, at: peak), 1000 / d, accuracy: 1000 / d * 0.1, "mic \(m): echo level")
        }
    }

    /// A mic's sensitivity (`micN_gain_db`: real MEMS mics differ by up to ±1 dB) scales all it
    /// hears: a talker's sound (the rendering) and the speaker's echo (the card's run-time paths).
    func testMicSensitivityScalesTheTalkerAndTheEcho() throws {
        let gainsDB = [0.0, 6.0, -6.0, 0.0]
        let gainLines = gainsDB.enumerated().filter { $0.element != 0 }.map { "mic\($0.offset)_gain_db = \($0.element)" }.joined(separator: "\n")
        // the echo: an impulse from the speaker under the array's centre
        let room = Room("scene = test.scene\necho = on\necho_delay_ms = 2\necho_gain_db = 0")
        let speaker = [0.0, 0.0, -0.05]
        writeScene(room, "rt60_ms = 300\nspeaker = \(speaker[0]) \(speaker[1]) \(speaker[2])\n" + gainLines)
        let impulseAt = 4800, total = 14400
        let run = try playImpulse(room, at: impulseAt, level: 1000, total: total)
        let x = run.speakerOffset(echoDelayMs: 2)
        let source = zip(Self.centre, speaker).map { $0 + $1 }
        for m in 0..<4 {
            let d = Self.distance(source, Self.micPosition(m))
            let at = Int((Double(impulseAt) - x.rounded() + d / 343 * 48000).rounded())
            let mic = (0..<total).map { Double(run.mics[$0 * 4 + m]) }
            let expected = 1000 / d * pow(10, gainsDB[m] / 20)
            XCTAssertEqual(directLevel(mic, at: at), expected, accuracy: expected * 0.1, "mic \(m): echo level with \(gainsDB[m]) dB")
        }
        // the talker: an impulse 1 m from the array
        let talkerRoom = Room("scene = test.scene\necho = off")
        var pulse = [Int16](repeating: 0, count: 4800)
        pulse[0] = 10000
        writeFile("\(talkerRoom.dir)/pulse.wav", wavBytes(channels: 1, rate: 48000, samples: pulse))
        let at = [Self.centre[0] + 1, Self.centre[1], Self.centre[2]]
        writeScene(talkerRoom, "rt60_ms = 300\ntalker1 = pulse.wav\ntalker1_at = \(at[0]) \(at[1]) \(at[2])\ntalker1_start_s = 0.1\n" + gainLines)
        defer { withExtendedLifetime(talkerRoom) {} }
        let got = try captureAll("testMicSensitivityScalesTheTalkerAndTheEcho", channels: 4, frames: 9600)
        for m in 0..<4 {
            let d = Self.distance(at, Self.micPosition(m))
            let arrival = 4800 + Int((d / 343 * 48000).rounded())
            let mic = (0..<9600).map { Double(got[$0 * 4 + m]) }
            let expected = 10000 / d * pow(10, gainsDB[m] / 20)
            XCTAssertEqual(directLevel(mic, at: arrival), expected, accuracy: expected * 0.15, "mic \(m): the talker's level with \(gainsDB[m]) dB")
        }
    }

    /// Cross-correlation lag (samples) of b against a within ±maxLag: positive when b hears later.
    private func lag(_ a: ArraySlice<Double>, _ b: ArraySlice<Double>, maxLag: Int) -> Int {
        let a = Array(a), b = Array(b)
        var best = 0, bestValue = -Double.infinity
        for l in -maxLag...maxLag {
            var s = 0.0
            for i in maxLag..<(a.count - maxLag) { s += a[i] * b[i + l] }
            if s > bestValue { bestValue = s; best = l }
        }
        return best
    }

    func testWalkingTalkerMovesFromOneSideOfTheArrayToTheOther() throws {
        let room = Room("scene = test.scene\necho = off")
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let noise = (0..<(3 * 48000)).map { _ -> Int16 in // xorshift64*: white noise
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            return Int16(truncatingIfNeeded: Int((state &* 2_685_821_657_736_338_717) >> 52) - 2048)
        }
        writeFile("\(room.dir)/noise.wav", wavBytes(channels: 1, rate: 48000, samples: noise))
        writeScene(room, """
            rt60_ms = 250
            talker1 = noise.wav
            talker1_path = 3.3 2.0 1.0 @ 0.5; 1.7 2.0 1.0 @ 2.5
            """)
        defer { withExtendedLifetime(room) {} }
        let got = try captureAll("testWalkingTalkerMovesFromOneSideOfTheArrayToTheOther", channels: 4, frames: 3 * 48000)
        let mic0 = (0..<(3 * 48000)).map { Double(got[$0 * 4]) }, mic2 = (0..<(3 * 48000)).map { Double(got[$0 * 4 + 2]) }
        // mic0 sits at +x: while the talker is on the +x side mic2 hears it later, then earlier
        let early = lag(mic0[4800..<24000], mic2[4800..<24000], maxLag: 12)
        let late = lag(mic0[120_000..<139_200], mic2[120_000..<139_200], maxLag: 12)
        let spread = (Self.distance([3.3, 2.0, 1.0], Self.micPosition(2)) - Self.distance([3.3, 2.0, 1.0], Self.micPosition(0))) / 343 * 48000
        XCTAssertEqual(Double(early), spread, accuracy: 1.5, "at the start (+x side)")
        XCTAssertEqual(Double(late), -spread, accuracy: 1.5, "at the end (-x side)")
    }

    func testBadScenesAreRefusedNamingFileLineAndKey() throws {
        let cases: [(scene: String, message: String)] = [
            ("rt60_ms = 400\ntalker1 = t.wav\ntalker1_at = 9 1 1", ":9: key 'talker1_at': outside the room"),
            ("rt60_ms = soon", ":7: key 'rt60_ms': bad value 'soon'"),
            ("rt60_ms = 400\nmic6 = 0 0 0.01", ":8: key 'mic6': mics are numbered from mic0 without gaps"),
            ("rt60_ms = 400\nspeaker = 0 0 -0.9", ":8: key 'speaker': puts the speaker outside the room"),
            ("talker1 = t.wav\ntalker1_at = 1 1 1", ": key 'rt60_ms' missing"),
            ("rt60_ms = 400\nnoise1 = pink\nnoise1_at = 1 1 1\nnoise1_snr_db = 20", ":10: key 'noise1_snr_db': an SNR needs a talker"),
            ("rt60_ms = 400\ntalker1 = t.wav\ntalker1_path = 1 1 1 @ 2; 2 2 1 @ 1", ":9: key 'talker1_path': bad value"),
            ("rt60_ms = 400\nwalls = concrete", ":8: unknown key 'walls'"),
            ("rt60_ms = 400\nmic5_gain_db = 1", ":8: key 'mic5_gain_db': no such mic"),
            ("rt60_ms = 400\nmic1_gain_db = 30", ":8: key 'mic1_gain_db': bad value '30'"),
        ]
        for (body, message) in cases {
            let room = Room("scene = test.scene")
            writeFile("\(room.dir)/t.wav", wavBytes(channels: 1, rate: 48000, samples: [0, 100, 0]))
            let scene = writeScene(room, body)
            let (rc, err) = capturingStderr { PCM.open(SND_PCM_STREAM_CAPTURE).1 }
            XCTAssertEqual(rc, -EINVAL, "'\(body)' must be refused")
            XCTAssertTrue(err.contains(scene + message), "'\(body)': expected '\(message)' in: \(err)")
        }
        // a talker file at another rate: named, not resampled silently
        let room = Room("scene = test.scene")
        writeFile("\(room.dir)/t.wav", wavBytes(channels: 1, rate: 16000, samples: [0, 100, 0]))
        writeScene(room, "rt60_ms = 400\ntalker1 = t.wav\ntalker1_at = 1 1 1")
        let (rc, err) = capturingStderr { PCM.open(SND_PCM_STREAM_CAPTURE).1 }
        XCTAssertEqual(rc, -EINVAL)
        XCTAssertTrue(err.contains("t.wav is 16000 Hz, the scene renders at 48000 Hz"), err)
    }

    func testRoomFileThatAlsoSetsTheInputOrEchoShapeIsRefused() throws {
        for key in ["input = talk.wav", "mic_delays = 0 4 9 4", "ir = none", "input_mic_gains = 1 1"] {
            let room = Room("scene = test.scene\n\(key)")
            writeScene(room, "rt60_ms = 400")
            let (rc, err) = capturingStderr { PCM.open(SND_PCM_STREAM_CAPTURE).1 }
            XCTAssertEqual(rc, -EINVAL, "'\(key)' beside a scene must be refused")
            let name = String(key.prefix { $0 != " " })
            XCTAssertTrue(err.contains("\(room.conf):3: key '\(name)': the scene (line 2) places the talkers"), err)
        }
        // input = none says nothing a scene contradicts
        let room = Room("scene = test.scene\ninput = none")
        writeScene(room, "rt60_ms = 400")
        let (pcm, rc) = PCM.open(SND_PCM_STREAM_CAPTURE)
        XCTAssertEqual(rc, 0)
        pcm?.close()
    }
}
