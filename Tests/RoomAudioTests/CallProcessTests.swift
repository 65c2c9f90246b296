import Foundation
import RoomDSP
import RoomTestSupport
import XCTest

/// Issue 29's acceptance, first part, with real processes: baresip (Debian's) calls roomd through
/// kamailio, both registered with digest authentication — roomd over TLS (its default
/// transport, kamailio's certificate made for the test and checked against its CA), baresip
/// over UDP, so kamailio carries the call from one to the other. The call rings (the ring on the
/// simulated speaker, the hand and stage LEDs flashing on the simulated GPIO), a press of the
/// hand button answers, speech crosses both ways, DTMF from roomctl reaches baresip as the right
/// digits, and a long press hangs up on both sides.
final class CallProcessTests: ProcessTestCase {
    func testACallRingsIsAnsweredWithTheButtonCarriesSpeechAndDigitsAndHangsUpWithALongPress() throws {
        guard Kamailio.isInstalled, Baresip.isInstalled else { throw XCTSkip("kamailio or baresip missing: scripts/setup installs them") }
        let roomd = try executable("roomd"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("call-process")
        let gpio = dir + "/gpio"
        try FileManager.default.createDirectory(atPath: gpio, withIntermediateDirectories: true)
        // Two talkers: the appliance's (the sentence) and the far end's (the sentence reversed:
        // the same voice and level, another envelope, so each is told from the other).
        let near = try SpeechMatch.sentence(dir + "/near.wav", leadIn: 4)
        let farSpeech = Array(try SpeechMatch.sentence(dir + "/far-forward.wav", leadIn: 0).reversed())
        // baresip's file source must match the codec's format: Opus is 48 kHz stereo.
        // baresip ends the call when its file ends: silence after the speech, past the call's end.
        let farFile = [Float](repeating: 0, count: 48_000) + farSpeech + [Float](repeating: 0, count: 48_000 * 20)
        SimCard.writeWAV(dir + "/far.wav", farFile.flatMap { [$0, $0] }, channels: 2)

        let certificates = try TestCertificates()
        try certificates.issue()
        let kamailio = try Kamailio(tls: (certificates.path("server.pem"), certificates.path("server.key")))
        defer { kamailio.stop() }
        let tlsPort = try XCTUnwrap(kamailio.tlsPort)
        let far = try Baresip(account: "<sip:far@127.0.0.1:\(kamailio.port);transport=udp>;auth_pass=far-secret;regint=60",
                              source: "aufile," + dir + "/far.wav", recordCalls: true)
        defer { far.stop() }

        try "room-secret\n".write(toFile: dir + "/sip.password", atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(dir + "/sip.password", 0o600), 0)
        try """
            [sip]
            registrar = 127.0.0.1:\(tlsPort)
            user = room
            password_file = sip.password
            ca_file = \(certificates.path("ca.pem"))
            media_encryption = optional
            ring_level_db = -12

            """.write(toFile: dir + "/roomd.conf", atomically: true, encoding: .utf8)
        try "input = \(dir)/near.wav\noutput = \(dir)/speaker.wav\n".write(toFile: dir + "/room.conf", atomically: true, encoding: .utf8)
        let daemon = try launch(roomd, ["--config", dir + "/roomd.conf", "--board", SimCard.repoRoot + "/board/sim", "--duration", "40",
                           "--stats-interval", "0", "--control-socket", dir + "/r.sock", "--state-dir", dir + "/state"],
                   env: ["ROOMSIM_CONFIG": dir + "/room.conf", "ROOMD_SIM_GPIO_DIR": gpio], log: dir + "/roomd.log")
        waitForSocket(dir + "/r.sock")
        func status() throws -> [String: Any] {
            let r = try runSeparated(roomctl, ["--socket", dir + "/r.sock", "--json", "status"])
            let result = (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])?["result"] as? [String: Any]
            return result?["call"] as? [String: Any] ?? [:]
        }
        func until(_ seconds: Double, _ what: String, _ condition: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if try condition() { return }
                far.poll()
                Thread.sleep(forTimeInterval: 0.05)
            }
            XCTFail("\(what) within \(seconds) s; roomd: \(tail(dir + "/roomd.log")); baresip: \(far.log())")
            throw XCTSkip("stopped: \(what)")
        }
        func leds() -> String { ((try? String(contentsOfFile: gpio + "/leds", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        func press(_ button: String, seconds: Double = 0.15) throws {
            for (word, wait) in [("press", seconds), ("release", 0.15)] {
                let h = try XCTUnwrap(FileHandle(forWritingAtPath: gpio + "/" + button), "no FIFO for \(button) in \(gpio)")
                h.write(Data((word + "\n").utf8))
                try h.close()
                Thread.sleep(forTimeInterval: wait)
            }
        }

        try until(10, "roomd registered") { try status()["registration"] as? String == "registered" }
        try until(10, "baresip registered") { far.registered }

        // The call rings: the hand and stage LEDs flash together (both states seen), the ring plays.
        far.command("dial", "sip:room@127.0.0.1:\(kamailio.port)")
        try until(5, "the call rings") { try status()["state"] as? String == "ringing" }
        var seen = Set<String>()
        for _ in 0..<20 { seen.insert(leds()); Thread.sleep(forTimeInterval: 0.03) }
        XCTAssertTrue(seen.contains("mute=0 hand=1 stage=1") && seen.contains("mute=0 hand=0 stage=0"), "LEDs while ringing: \(seen)")
        let ringing = try runSeparated(roomctl, ["--socket", dir + "/r.sock", "--json", "status"]).stdout
        let speaker = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(ringing.utf8)) as? [String: Any])?["result"] as? [String: Any])["speaker_dbfs"] as? Double
        XCTAssertGreaterThan(speaker ?? -100, -40, "the ring plays on the speaker")

        // The hand button answers.
        try press("hand")
        try until(5, "the call is up") { try status()["state"] as? String == "active" }
        try until(5, "baresip sees the call established") { !far.events("CALL_ESTABLISHED").isEmpty }
        XCTAssertEqual(try status()["codec"] as? String, "opus")
        XCTAssertEqual(leds(), "mute=0 hand=0 stage=0", "the LEDs stop flashing")

        // Speech both ways (the far end's sentence starts 1 s into the call, the appliance's 4 s
        // after roomd started), then DTMF, then a long press on the hand button hangs up.
        Thread.sleep(forTimeInterval: 10.5)
        XCTAssertEqual(try runSeparated(roomctl, ["--socket", dir + "/r.sock", "dtmf", "12#"]).status, 0)
        try until(3, "baresip received the digits") { far.receivedDigits == "12#" }
        try press("hand", seconds: 1.8)
        try until(5, "the call ended here") { try status()["state"] as? String == "idle" }
        try until(5, "baresip sees the call closed") { !far.events("CALL_CLOSED").isEmpty }
        XCTAssertEqual(try status()["reason"] as? String, "hung up by us")

        // What each side heard: the other's talker, at a speech level (the files are complete
        // once each program closed them).
        far.stop(graceful: true)
        daemon.terminate()
        daemon.waitUntilExit()
        let heardByFar = try mono48k(try SimCard.readWAV(try XCTUnwrap(far.recording, "baresip recorded nothing: \(far.log())")))
        let heardByRoom = try mono48k(try SimCard.readWAV(dir + "/speaker.wav"))
        let nearSpeech = Array(near.dropFirst(4 * 48_000))   // without its lead-in (before the call)
        let atFar = try XCTUnwrap(SpeechMatch.locate(nearSpeech, in: heardByFar), "the far end's recording is shorter than the talker")
        let atRoom = try XCTUnwrap(SpeechMatch.locate(farSpeech, in: heardByRoom), "the speaker recorded nothing")
        print("call: the far end heard the appliance's talker with envelope correlation \(atFar.correlation) (\(atFar.levelChangeDB) dB); the appliance's speaker the far end's with \(atRoom.correlation) (\(atRoom.levelChangeDB) dB)")
        XCTAssertGreaterThan(atFar.correlation, 0.8, "the far end hears the appliance's talker")
        XCTAssertGreaterThan(atRoom.correlation, 0.8, "the appliance's speaker plays the far end's talker")
    }

    private func tail(_ path: String) -> String {
        String(((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(3000))
    }

    /// A recording as mono 48 kHz (baresip writes what its decoder makes: Opus in stereo at
    /// 48 kHz, G.722 at 16 kHz); channel 0, held for lower rates (envelopes only need that).
    private func mono48k(_ w: WAVAudio) throws -> [Float] {
        let channels = max(1, w.channels)
        let first = stride(from: 0, to: w.samples.count, by: channels).map { Float(w.samples[$0]) / 32768 }
        guard w.sampleRate != 48_000 else { return first }
        guard w.sampleRate > 0, 48_000 % w.sampleRate == 0 else { throw XCTSkip("recording at \(w.sampleRate) Hz") }
        return first.flatMap { [Float](repeating: $0, count: 48_000 / w.sampleRate) }
    }
}
