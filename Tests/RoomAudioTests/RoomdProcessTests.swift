import Foundation
import RoomBase
import RoomControl
import RoomTestSupport
import XCTest

/// roomd as a process, the way systemd, the rig and the benches run it.
final class RoomdProcessTests: ProcessTestCase {
    private func roomd(_ args: [String], env: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runSeparated(try executable("roomd"), args, env: env)
    }

    private var board: String { SimCard.repoRoot + "/board/sim" }

    func testVersionAndHelp() throws {
        let v = try roomd(["--version"])
        XCTAssertEqual(v.status, 0)
        XCTAssertTrue(v.stdout.hasPrefix("roomd \(roomdVersion) (commit "), v.stdout)
        let h = try roomd(["--help"])
        XCTAssertEqual(h.status, 0)
        XCTAssertTrue(h.stdout.contains("--board"))
        let bad = try roomd(["--frobnicate"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("--frobnicate"))
    }

    /// Every shipped program names the git commit it was built from, so a report from a board
    /// says which source it runs (the checkout's HEAD here, "-dirty" with uncommitted changes).
    func testVersionNamesTheCommitBuiltFrom() throws {
        let git = try runSeparated("/usr/bin/git", ["-C", SimCard.repoRoot, "rev-parse", "--short=12", "HEAD"])
        let head = git.status == 0 ? git.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : "unknown"
        for (program, detail) in [("roomd", ")"), ("roomctl", ", control API "), ("roomserver", ", protocol ")] {
            let v = try runSeparated(try executable(program), ["--version"])
            XCTAssertEqual(v.status, 0, program)
            let line = v.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertTrue(line.hasPrefix("\(program) \(roomdVersion) (commit \(head)"), "\(program): \(line), HEAD \(head)")
            XCTAssertTrue(line.contains(detail), "\(program): \(line)")
        }
    }

    /// The audio loop allocates nothing in steady state, counted by the preloaded probe, and
    /// the probe itself is proven to count (it must see a deliberate malloc).
    func testSteadyStateAllocatesNothing() throws {
        let dir = SimCard.scratch("allocs")
        SimCard.writeWAV(dir + "/far.wav", SimCard.speechLike(seconds: 4, seed: 0.7))
        SimCard.writeWAV(dir + "/mic.wav", SimCard.speechLike(seconds: 4, seed: 2.2, level: 0.1))
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "input_end": "loop"])
        let r = try roomd(["--board", board, "--loopback", "--loopback-loss", "10", "--far-end", dir + "/far.wav",
                           "--duration", "4", "--json", "--stats-interval", "0"],
                          env: ["LD_PRELOAD": SimCard.buildDirectory + "/libroomallocprobe.so",
                                "ROOMSIM_CONFIG": dir + "/room.conf"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let line = try XCTUnwrap(r.stdout.split(separator: "\n").last { $0.contains("\"summary\"") })
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(summary["alloc_probe"] as? Bool, true)
        XCTAssertEqual(summary["alloc_probe_verified"] as? Bool, true, "the probe must count a test malloc")
        XCTAssertGreaterThan(summary["steady_periods"] as? Int ?? 0, 200)
        XCTAssertEqual(summary["steady_allocs"] as? Int, 0, "heap allocations in the steady-state audio loop")
    }

    /// The summary's echo reduction is the status lines' over the window scripts/bench reads
    /// them in (far-end speech after its first 5 s, 500 periods): it used to sum only the seconds
    /// in which no voice was detected, but the VAD fires on residual echo, so it kept the
    /// quietest seconds and reported 56.8 dB where the status lines gave 39.7.
    func testSummaryEchoReductionAgreesWithTheStatusLines() throws {
        let dir = SimCard.scratch("erle-summary")
        // two voices' worth, so the far end talks most of the time (one alone is active ~35 %)
        let far = zip(SimCard.speechLike(seconds: 12, seed: 0.9), SimCard.speechLike(seconds: 12, seed: 2.3)).map { $0 + $1 }
        SimCard.writeWAV(dir + "/far.wav", far)
        SimCard.useRoom(dir, ["echo_delay_ms": "80", "ir_length_ms": "360", "ir_rt60_ms": "360", "ir_drr_db": "0",
                              "noise_dbfs": "-60"])
        let r = try roomd(["--board", board, "--far-end", dir + "/far.wav", "--duration", "12", "--json",
                           "--stats-interval", "1", "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                          env: ["ROOMSIM_CONFIG": dir + "/room.conf"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = try r.stdout.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let status = lines.filter { $0["summary"] == nil }
        let summary = try XCTUnwrap(lines.last { $0["summary"] as? Bool == true })
        let base = try XCTUnwrap(status.first { ($0["far_end_periods"] as? Int ?? 0) >= 500 },
                                 "5 s of far-end speech expected, got \(status.last?["far_end_periods"] ?? "none")")
        let end = try XCTUnwrap(status.last)
        func energy(_ l: [String: Any], _ key: String) -> Double { (l[key] as? Double) ?? Double(l[key] as? Int ?? 0) }
        let outside = 10 * log10((energy(end, "echo_in_energy") - energy(base, "echo_in_energy"))
                                 / (energy(end, "echo_out_energy") - energy(base, "echo_out_energy")))
        let reported = try XCTUnwrap(summary["erle_db"] as? Double)
        XCTAssertEqual(summary["erle_window"] as? String, "after_5s")
        XCTAssertEqual(reported, outside, accuracy: 1.0, "summary \(reported) dB, status lines \(outside) dB")
    }

    /// A board whose mics lie on one line cannot tell where around the table a talker sits:
    /// roomd runs with mic 0's chain, says why once naming the profile's [array], and reports no
    /// direction rather than a wrong one.
    func testArrayThatCannotTellDirectionsIsNamedAndRunsWithout() throws {
        let dir = SimCard.scratch("line-array")
        try FileManager.default.copyItem(atPath: board + "/asound.conf", toPath: dir + "/asound.conf")
        try """
            [board]
            name = line
            [audio]
            capture_device = roomsim
            playback_device = roomsim
            rate = 48000
            capture_channels = 3
            playback_channels = 1
            alsa_config = asound.conf
            [array]
            mic0 = -0.03 0 0
            mic1 = 0 0 0
            mic2 = 0.03 0 0
            beamformer = no

            """.write(toFile: dir + "/board.conf", atomically: true, encoding: .utf8)
        SimCard.writeWAV(dir + "/talk.wav", SimCard.speechLike(seconds: 3, seed: 1.3))
        SimCard.useRoom(dir, ["input": dir + "/talk.wav", "input_mic_delays": "0 3 6"])
        let r = try roomd(["--board", dir, "--duration", "3", "--json", "--stats-interval", "1",
                           "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                          env: ["ROOMSIM_CONFIG": dir + "/room.conf"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("board.conf: [array] the microphones lie on one line"), r.stderr)
        let status = r.stdout.split(separator: "\n").filter { !$0.contains("\"summary\"") }
        XCTAssertFalse(status.isEmpty)
        XCTAssertTrue(status.allSatisfy { $0.contains("\"talker_azimuth_deg\":null") }, "no direction expected: \(status.last ?? "")")
    }

    /// The array brings every mic to mic 0's sensitivity, and the status lines say by how much
    /// (an installer sees a mic that is off): a scene whose mics 1-3 are +1, −1 and +0.5 dB off,
    /// in a room whose noise comes from all around, reads −1, +1 and −0.5 dB within 3 s. roomd
    /// keeps them in its state directory, and the next start has them from its first status line
    /// even though the far end then plays throughout (nothing to measure them in).
    func testStatusShowsHowTheArrayCorrectsEachMicAndTheNextStartKeepsThem() throws {
        let dir = SimCard.scratch("miccal")
        let state = dir + "/state"
        let scene = ["room = 5 4 2.7", "rt60_ms = 250", "array = 2.5 2 0.75",
                     "mic0 = 0.032 0 0", "mic1 = 0 0.032 0", "mic2 = -0.032 0 0", "mic3 = 0 -0.032 0",
                     "mic1_gain_db = 1", "mic2_gain_db = -1", "mic3_gain_db = 0.5",
                     "noise1 = pink", "noise1_at = diffuse", "noise1_dbfs = -45", "duration_s = 3"]
        try (scene.joined(separator: "\n") + "\n").write(toFile: dir + "/room.scene", atomically: true, encoding: .utf8)
        try "scene = room.scene\necho = off\n".write(toFile: dir + "/room.conf", atomically: true, encoding: .utf8)
        func run(_ seconds: String, _ extra: [String] = []) throws -> (corrections: [[Double]], stderr: String) {
            let r = try roomd(["--board", board, "--duration", seconds, "--json", "--stats-interval", "0.5",
                               "--config", "none", "--state-dir", state, "--control-socket", "none"] + extra,
                              env: ["ROOMSIM_CONFIG": dir + "/room.conf"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let lines = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            return (lines.compactMap { $0["mic_corrections_db"] as? [Double] }, r.stderr)
        }
        func check(_ corrections: [Double]?, _ what: String) {
            guard let corrections, corrections.count == 4 else { return XCTFail("\(what): no corrections for 4 mics: \(corrections ?? [])") }
            for (m, want) in [0.0, -1, 1, -0.5].enumerated() {
                XCTAssertEqual(corrections[m], want, accuracy: 0.25, "\(what), mic \(m): \(corrections)")
            }
        }
        let first = try run("3")
        check(first.corrections.last, "measured")
        let file = state + "/mic-corrections.conf"
        let kept = try String(contentsOfFile: file, encoding: .utf8)
        let line = try XCTUnwrap(kept.split(separator: "\n").first { $0.hasPrefix("corrections_db") }, kept)
        check(line.split(separator: "=")[1].split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }, "kept")
        XCTAssertTrue(kept.contains("board = "), kept)
        // The far end from the first block: the mics cannot be measured, the kept corrections apply.
        SimCard.writeWAV(dir + "/far.wav", SimCard.speechLike(seconds: 2, seed: 1.3, level: 0.3))
        let second = try run("1", ["--far-end", dir + "/far.wav"])
        XCTAssertTrue(second.stderr.contains("the mics start from the corrections measured before"), second.stderr)
        check(second.corrections.first, "the next start's first status line")
        check(second.corrections.last, "the next start's last status line")
    }

    /// Double talk with the array on: a talker on the board's −y side starts while the far end
    /// plays through the speaker on +x. The speaker's echo is louder at the mics than the talker
    /// and reaches them from its own side; the beam must go to the talker and stay there (the echo
    /// used to pull the direction around the room: 7 false jumps in 8 s, 4 to the speaker), and
    /// the status lines say where the beam points. A run with an xrun is run again (at most twice
    /// more): a stalled machine, not the locator, disturbed it.
    func testTheSpeakersEchoDoesNotSteerTheBeamInDoubleTalk() throws {
        let dir = SimCard.scratch("array-dt")
        SimCard.writeWAV(dir + "/far.wav", SimCard.speechLike(seconds: 10, seed: 3.1, level: 0.3))
        // 3 s of silence, then the near talker for 5 s, all of it over the far end
        SimCard.writeWAV(dir + "/talk.wav", [Float](repeating: 0, count: 3 * 48000) + SimCard.speechLike(seconds: 5, seed: 0.7, level: 0.1))
        SimCard.useRoom(dir, ["input": dir + "/talk.wav", "input_end": "silence", "input_mic_delays": "4 9 4 0",
                              "ir": "none", "echo_gain_db": "-6"])
        func once() throws -> (xruns: Int, talkers: [Double], beams: [Double], log: String) {
            let r = try roomd(["--board", board, "--duration", "8", "--json", "--stats-interval", "0.1",
                               "--far-end", dir + "/far.wav", "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                              env: ["ROOMSIM_CONFIG": dir + "/room.conf"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let lines = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let summary = lines.last { $0["summary"] != nil } ?? [:]
            let xruns = E2E.xruns(summary)
            let talkers = r.stderr.split(separator: "\n").compactMap { line -> Double? in
                guard let at = line.range(of: "talker at ") else { return nil }
                return Double(line[at.upperBound...].prefix { $0 != "°" })
            }
            let beams = lines.compactMap { $0["beam_azimuth_deg"] as? Double }
            return (xruns, talkers, beams, r.stderr)
        }
        let run = try Disturbance.rerun("testTheSpeakersEchoDoesNotSteerTheBeamInDoubleTalk", disturbed: { $0.xruns > 0 }, once)
        XCTAssertEqual(run.xruns, 0, "xruns in all three runs (machine busy?)")
        XCTAssertFalse(run.talkers.isEmpty, "the talker was never found: \(run.log)")
        for t in run.talkers { XCTAssertEqual(t, -90, accuracy: 20, "a talker found at \(t)°, the talker sits at −90° (the speaker at 0°)") }
        XCTAssertFalse(run.beams.isEmpty, "no status line says where the beam points")
        // the beam nearest the talker or a neighbour (15° apart): the first lock is taken in double
        // talk, and a held direction does not follow while the far end plays
        XCTAssertEqual(run.beams.last ?? 0, -90, accuracy: 15.01, "the beam at the end: \(run.beams.suffix(5))")
        XCTAssertFalse(run.beams.contains { abs($0) < 30 }, "the beam turned to the speaker: \(run.beams)")
    }

    /// board/sim's simulated LED ring shows the talker: a talker on the board's -y side (mic3
    /// hears it first, mic1 last) lights LED 9 of 12 (270°) in `$ROOMD_SIM_GPIO_DIR/ring`.
    func testLEDRingShowsWhereTheTalkerIs() throws {
        let dir = SimCard.scratch("ring")
        SimCard.writeWAV(dir + "/talk.wav", SimCard.speechLike(seconds: 3, seed: 0.4))
        SimCard.useRoom(dir, ["input": dir + "/talk.wav", "input_mic_delays": "4 9 4 0"])
        let r = try roomd(["--board", board, "--duration", "3", "--stats-interval", "0",
                           "--config", "none", "--state-dir", "none", "--control-socket", "none"],
                          env: ["ROOMSIM_CONFIG": dir + "/room.conf", "ROOMD_SIM_GPIO_DIR": dir + "/gpio"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let ring = try String(contentsOfFile: dir + "/gpio/ring", encoding: .utf8)
        let leds = ring.split(separator: "\n").first?.split(separator: " ").map(String.init) ?? []
        XCTAssertEqual(leds.count, 12, ring)
        let brightest = leds.indices.max { (leds[$0].split(separator: ",").compactMap { Int($0) }.reduce(0, +)) < (leds[$1].split(separator: ",").compactMap { Int($0) }.reduce(0, +)) }
        XCTAssertEqual(brightest, 9, "ring: \(ring); log: \(r.stderr.split(separator: "\n").filter { $0.contains("talker") })")
    }

    /// Switching the audio profile and running a self-test happen inside the loop too: counted
    /// by the same probe, they allocate nothing either.
    func testProfileSwitchAndSelfTestAllocateNothing() throws {
        let dir = SimCard.scratch("allocs2")
        SimCard.writeWAV(dir + "/mic.wav", SimCard.speechLike(seconds: 4, seed: 2.2, level: 0.1))
        SimCard.useRoom(dir, ["input": dir + "/mic.wav", "input_end": "loop"])
        let socket = dir + "/ctl.sock"
        let p = try launch(try executable("roomd"),
                           ["--board", board, "--loopback", "--duration", "12", "--json", "--stats-interval", "0",
                            "--control-socket", socket, "--state-dir", "none", "--config", "none"],
                           env: ["LD_PRELOAD": SimCard.buildDirectory + "/libroomallocprobe.so", "ROOMSIM_CONFIG": dir + "/room.conf"],
                           log: dir + "/roomd.log")
        waitForSocket(socket)
        let roomctl = try executable("roomctl")
        Thread.sleep(forTimeInterval: 1.5)  // past the warm-up periods
        XCTAssertEqual(try run(roomctl, ["--socket", socket, "profile", "music"]).status, 0)
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(try run(roomctl, ["--socket", socket, "profile", "speech"]).status, 0)
        Thread.sleep(forTimeInterval: 1)
        let selftest = try run(roomctl, ["--socket", socket, "selftest"])
        XCTAssertNotEqual(selftest.status, 69, selftest.out)
        p.waitUntilExit()
        let log = try String(contentsOfFile: dir + "/roomd.log", encoding: .utf8)
        let line = try XCTUnwrap(log.split(separator: "\n").last { $0.contains("\"summary\"") }, log)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(summary["alloc_probe_verified"] as? Bool, true)
        XCTAssertGreaterThan(summary["steady_periods"] as? Int ?? 0, 500)
        XCTAssertEqual(summary["steady_allocs"] as? Int, 0, "heap allocations in the loop across profile switches and a self-test")
    }

    /// `--log-level` takes the names `log.level` takes, no more (it took "warn" and "err"), and
    /// a refusal names the option and the choices, as the file's does.
    func testLogLevelOptionTakesTheConfigKeysNamesOnly() throws {
        for alias in ["warn", "err"] {
            let r = try roomd(["--board", board, "--loopback", "--duration", "1", "--log-level", alias])
            XCTAssertEqual(r.status, 2, "--log-level \(alias): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("--log-level: \"\(alias)\" is not error, warning, notice, info or debug"), r.stderr)
        }
        let dir = SimCard.scratch("loglevel")
        try "[log]\nlevel = warn\n".write(toFile: dir + "/roomd.conf", atomically: true, encoding: .utf8)
        let file = try roomd(["--board", board, "--loopback", "--duration", "1", "--config", dir + "/roomd.conf"])
        XCTAssertEqual(file.status, 78, file.stderr)
        XCTAssertTrue(file.stderr.contains("roomd.conf:2: log.level: \"warn\" is not error, warning, notice, info or debug"), file.stderr)
    }

    func testBoardFileWithAWrongFieldNamesIt() throws {
        let dir = SimCard.scratch("badboard")
        let text = try String(contentsOfFile: board + "/board.conf", encoding: .utf8)
            .replacingOccurrences(of: "rate = 48000", with: "rate = 44100")
        try text.write(toFile: dir + "/board.conf", atomically: true, encoding: .utf8)
        let r = try roomd(["--board", dir, "--duration", "1"])
        XCTAssertEqual(r.status, 78)
        XCTAssertTrue(r.stderr.contains("audio.rate"), r.stderr)
        XCTAssertTrue(r.stderr.contains("board.conf:"), "names the file and line: \(r.stderr)")
    }

    func testMissingBoardFileIsAClearError() throws {
        let r = try roomd(["--board", "/nonexistent/board"])
        XCTAssertEqual(r.status, 78)
        XCTAssertTrue(r.stderr.contains("/nonexistent/board/board.conf"), r.stderr)
    }

    func testMalformedFarEndWAVIsAClearError() throws {
        let dir = SimCard.scratch("badwav")
        try Data("RIFF\u{10}\0\0\0WAVEjunk".utf8).write(to: URL(fileURLWithPath: dir + "/bad.wav"))
        let r = try roomd(["--board", board, "--far-end", dir + "/bad.wav", "--duration", "1"])
        XCTAssertEqual(r.status, 66)
        XCTAssertTrue(r.stderr.contains("--far-end") && r.stderr.contains("bad.wav"), r.stderr)
    }

    /// Issue 10 (7): an unwritable --record path ran the whole session and failed at its end,
    /// the recording lost; `--server 127.0.0.1:0` was retried forever where the configuration
    /// file refused it. Both now fail at once, naming what is wrong.
    func testUnwritableRecordingAndPortZeroFailAtStart() throws {
        let start = Date()
        let r = try roomd(["--board", board, "--loopback", "--record", "/nonexistent-dir/out.wav", "--duration", "20", "--stats-interval", "0"])
        XCTAssertEqual(r.status, 73, r.stderr)
        XCTAssertTrue(r.stderr.contains("/nonexistent-dir/out.wav"), r.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10, "refused at start, not after the 20 s session")
        let s = try roomd(["--server", "127.0.0.1:0", "--token", "t"])
        XCTAssertEqual(s.status, 2)
        XCTAssertTrue(s.stderr.contains("--server 127.0.0.1:0"), s.stderr)
    }

    /// The TLS options are checked with the others, naming the option (issue 11).
    func testTLSOptionsAreCheckedAtStart() throws {
        let pin = try roomd(["--server", "127.0.0.1:7700", "--token", "t", "--tls-pin", "sha1/abc"])
        XCTAssertEqual(pin.status, 2)
        XCTAssertTrue(pin.stderr.contains("--tls-pin") && pin.stderr.contains("sha256/"), pin.stderr)
        let both = try roomd(["--server", "127.0.0.1:7700", "--token", "t", "--plaintext-signalling", "--tls-ca-file", "ca.pem"])
        XCTAssertEqual(both.status, 2)
        XCTAssertTrue(both.stderr.contains("--plaintext-signalling"), both.stderr)
        let name = try roomd(["--server", "127.0.0.1:7700", "--token", "t", "--tls-server-name", "not a name"])
        XCTAssertEqual(name.status, 2)
        XCTAssertTrue(name.stderr.contains("--tls-server-name"), name.stderr)
        let host = try roomd(["--server", "rooms_example:7700", "--token", "t"])
        XCTAssertEqual(host.status, 2)
        XCTAssertTrue(host.stderr.contains("--server rooms_example:7700"), host.stderr)
    }

    /// The recording is written as it comes: a complete WAV at the end, no `.partial` left.
    func testRecordingIsStreamedToAWholeFile() throws {
        let dir = SimCard.scratch("record")
        let r = try roomd(["--board", board, "--loopback", "--record", dir + "/out.wav", "--duration", "1.5", "--stats-interval", "0"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let wav = try SimCard.readWAV(dir + "/out.wav")
        XCTAssertEqual(Double(wav.floatSamples.count), 1.5 * 48000, accuracy: 4800)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out.wav.partial"))
    }

    /// An empty ROOMD_CONTROL_SOCKET counts as unset, as it does for roomctl (roomd took the
    /// empty string for a path and exited 71).
    func testEmptyControlSocketVariableCountsAsUnset() throws {
        let r = try roomd(["--board", board, "--loopback", "--duration", "0.5", "--stats-interval", "0"],
                          env: ["ROOMD_CONTROL_SOCKET": ""])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    func testMissingAudioDeviceIsAClearError() throws {
        let dir = SimCard.scratch("nodevice")
        let text = try String(contentsOfFile: board + "/board.conf", encoding: .utf8)
            .replacingOccurrences(of: "capture_device = roomsim", with: "capture_device = hw:CARD=NoSuchCard")
            .replacingOccurrences(of: "alsa_config = asound.conf", with: "")
        try text.write(toFile: dir + "/board.conf", atomically: true, encoding: .utf8)
        let r = try roomd(["--board", dir, "--duration", "1"])
        XCTAssertEqual(r.status, 69)
        XCTAssertTrue(r.stderr.contains("hw:CARD=NoSuchCard"), r.stderr)
    }
}

/// roomd under systemd: the unit verifies, and READY / WATCHDOG reach a fake NOTIFY_SOCKET.
final class RoomdSystemdTests: ProcessTestCase {
    /// Both units verify, with the binaries just built and the man pages of this tree: verify
    /// runs `man` for every man: page in Documentation=, so MANPATH points at docs/man laid out
    /// as man sections.
    func testUnitFilesVerify() throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else { throw XCTSkip("systemd-analyze not installed") }
        let dir = SimCard.scratch("unit")
        let pages = SimCard.repoRoot + "/docs/man"
        for page in try FileManager.default.contentsOfDirectory(atPath: pages) {
            guard let section = page.split(separator: ".").last, section.allSatisfy(\.isNumber) else { continue }
            try FileManager.default.createDirectory(atPath: "\(dir)/man/man\(section)", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "\(pages)/\(page)", toPath: "\(dir)/man/man\(section)/\(page)")
        }
        for program in ["roomd", "roomserver"] {
            // verify checks that ExecStart= exists: point it at the binary just built.
            let unit = try String(contentsOfFile: SimCard.repoRoot + "/systemd/\(program).service", encoding: .utf8)
                .replacingOccurrences(of: "/usr/bin/\(program) ", with: try executable(program) + " ")
            try unit.write(toFile: dir + "/\(program).service", atomically: true, encoding: .utf8)
            let r = try runSeparated(analyze, ["verify", dir + "/\(program).service"], env: ["MANPATH": dir + "/man"])
            XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
            XCTAssertFalse((r.stdout + r.stderr).contains("\(program).service:"), "no warnings about the unit: \(r.stdout + r.stderr)")
        }
    }

    func testReadyAndWatchdogReachNotifySocket() throws {
        let roomd = try executable("roomd")
        let dir = SimCard.scratch("notify")
        SimCard.useRoom(dir, ["echo": "off"])
        let path = dir + "/notify.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        XCTAssertEqual(bound, 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let p = try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--duration", "2", "--stats-interval", "0",
                                   "--control-socket", "none"],
                           env: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000", "ROOMSIM_CONFIG": dir + "/room.conf"],
                           log: dir + "/roomd.log")
        var messages: [String] = []
        let deadline = Date().addingTimeInterval(4)
        var buffer = [UInt8](repeating: 0, count: 512)
        while Date() < deadline {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            if !p.isRunning && n <= 0 { break }
        }
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        let ready = messages.firstIndex { $0.contains("READY=1") }
        XCTAssertNotNil(ready, "READY=1 expected: \(messages)")
        let watchdogs = messages.filter { $0.contains("WATCHDOG=1") }.count
        XCTAssertGreaterThan(watchdogs, 5, "a WATCHDOG=1 every 100 ms for 2 s: \(messages.count) messages")
        XCTAssertTrue(messages.contains { $0.contains("STOPPING=1") }, "STOPPING=1 on the way out")
    }
}

/// Issue 10 (11): a user who may not open the control socket was told "roomd is not reachable …
/// Permission denied" (exit 69, as if roomd were down). roomctl now names the group to join and
/// exits 77 (EX_NOPERM). Runs roomctl as `nobody` against a root-owned 0660 socket.
final class RoomctlPermissionTests: ProcessTestCase {
    func testPermissionDeniedNamesTheGroupAndExits77() throws {
        guard getuid() == 0, access("/usr/sbin/runuser", X_OK) == 0 else { throw XCTSkip("needs root and runuser") }
        let roomctl = try executable("roomctl")
        let dir = SimCard.scratch("noperm")
        chmod(dir, 0o755)
        let path = dir + "/control.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd); unlink(path) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(fd, 4), 0)
        XCTAssertEqual(chmod(path, 0o660), 0)
        let r = try runSeparated("/usr/sbin/runuser", ["-u", "nobody", "--", roomctl, "--socket", path, "status"])
        if r.stderr.contains("Permission denied") && r.stderr.contains("exec") { throw XCTSkip("nobody cannot run \(roomctl)") }
        XCTAssertEqual(r.status, Roomctl.Exit.noPermission, r.stderr)
        XCTAssertTrue(r.stderr.contains("add yourself to group root"), r.stderr)
    }
}
