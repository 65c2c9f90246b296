@testable import RoomSettings
import XCTest

final class ApplianceConfigurationTests: XCTestCase {
    private func parse(_ text: String) throws -> ApplianceConfiguration {
        try ApplianceConfiguration.parse(text: text, file: "/etc/roomd/roomd.conf", directory: "/etc/roomd")
    }

    private func error(_ text: String) -> ConfigError? {
        do { _ = try parse(text); return nil } catch { return error as? ConfigError }
    }

    func testFullFileReadsEveryKeyAndResolvesRelativePaths() throws {
        let c = try parse("""
        [board]
        path = /usr/share/roomd/board/rpi-respeaker4
        [room]
        server = 10.0.0.5:7700, 10.0.0.6:7700
        token_file = token
        role = audience
        [audio]
        profile = music
        volume_db = -6.5
        aec_suppression = high
        opus_frame_ms = 20
        [control]
        socket = control.sock
        group = roomctl
        [log]
        level = debug
        [state]
        directory = /var/lib/roomd
        """)
        XCTAssertEqual(c.boardPath, "/usr/share/roomd/board/rpi-respeaker4")
        XCTAssertEqual(c.servers, ["10.0.0.5:7700", "10.0.0.6:7700"])
        XCTAssertEqual(c.tokenFile, "/etc/roomd/token")
        XCTAssertEqual(c.role, "audience")
        XCTAssertEqual(c.profile, .music)
        XCTAssertEqual(c.volumeDB, -6.5)
        XCTAssertEqual(c.aecSuppression, 2)
        XCTAssertEqual(c.opusFrameMilliseconds, 20)
        XCTAssertEqual(c.controlSocket, "/etc/roomd/control.sock")
        XCTAssertEqual(c.controlGroup, "roomctl")
        XCTAssertEqual(c.logLevel, "debug")
        XCTAssertEqual(c.stateDirectory, "/var/lib/roomd")
    }

    func testEmptyFileIsAllDefaults() throws {
        XCTAssertEqual(try parse("# nothing set\n"), ApplianceConfiguration())
    }

    func testErrorsNameFileLineAndKey() {
        let cases: [(String, Int, String, String)] = [
            ("[audio]\nvolume_db = loud\n", 2, "audio.volume_db", "is not a number"),
            ("[audio]\n\nvolume_db = 30\n", 3, "audio.volume_db", "out of range"),
            ("[audio]\nprofile = opera\n", 2, "audio.profile", "speech or music"),
            ("[room]\nserver = example_com:7700\ntoken = x\n", 2, "room.server", "host:port"),
            ("[room]\nserver = -example.com:7700\ntoken = x\n", 2, "room.server", "host:port"),
            ("[room]\nserver = example.com:7700\ntoken = x\ntls_pin = sha1/abc\n", 4, "room.tls_pin", "must start with sha256/"),
            ("[room]\nserver = example.com:7700\ntoken = x\ntls_pin = sha256/abc=\n", 4, "room.tls_pin", "44 characters"),
            ("[room]\nserver = example.com:7700\ntoken = x\ntls_server_name = a b\n", 4, "room.tls_server_name", "not a host name"),
            ("[room]\nserver = example.com:7700\ntoken = x\nplaintext_signalling = true\n", 4, "room.plaintext_signalling", "not yes or no"),
            ("[room]\nserver = example.com:7700\ntoken = x\ntls_ca_file = ca.pem\nplaintext_signalling = yes\n", 5, "room.plaintext_signalling", "room.tls_ca_file is set"),
            ("[room]\nserver = 10.0.0.1:99999\ntoken = x\n", 2, "room.server", "host:port"),
            ("[room]\nserver = 10.0.0.1:7700\n", 2, "room.server", "needs room.token_file"),
            ("[room]\ntoken = a\ntoken_file = b\n", 3, "room.token_file", "not both"),
            ("[room]\nplacement_key = service.pub\n", 2, "room.placement_key", "needs room.token_file"),
            ("[room]\nrole = speaker\n", 2, "room.role", "streamer or audience"),
            ("[log]\nlevel = loud\n", 2, "log.level", "debug"),
            ("[control]\ngroup = room ctl\n", 2, "control.group", "not a group"),
            ("[audio]\nopus_frame_ms = 40\n", 2, "audio.opus_frame_ms", "not supported"),
            ("[audio]\nprofle = speech\n", 2, "audio.profle", "did you mean \"profile\""),
            ("[room]\nbackend = sfu\n", 2, "room.backend", "roomserver or janus"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\njanus_room = 1\nstun_server = stun.example.org\n", 5, "room.stun_server", "not host:port"),
            ("[room]\nserver = 10.0.0.5:7700\ntoken = x\nstun_server = stun.example.org:3478\n", 4, "room.stun_server", "only for room.backend = janus"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\njanus_room = 1\n[audio]\nopus_frame_ms = 10\n", 6, "audio.opus_frame_ms", "every 20 ms"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\n", 2, "room.backend", "needs room.janus_room"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\njanus_room = abc\n", 4, "room.janus_room", "not a room number"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\njanus_room = 0\n", 4, "room.janus_room", "not a room number"),
            ("[room]\nserver = 10.0.0.5:7700\ntoken = x\njanus_room = 1234\n", 4, "room.janus_room", "only for room.backend = janus"),
            ("[room]\nserver = 10.0.0.5:7700\ntoken = x\njanus_secret = s\n", 4, "room.janus_secret", "only for room.backend = janus"),
            ("[room]\nbackend = janus\nserver = 10.0.0.5:8989\njanus_room = 1\ndisplay_name = a \"b\"\n", 5, "room.display_name", "no quotes"),
        ]
        for (text, line, key, fragment) in cases {
            guard let e = error(text) else { XCTFail("accepted: \(text)"); continue }
            XCTAssertEqual(e.file, "/etc/roomd/roomd.conf", text)
            XCTAssertEqual(e.line, line, text)
            XCTAssertEqual(e.key, key, text)
            XCTAssertTrue(e.message.contains(fragment), "\(e) should say \(fragment)")
        }
        XCTAssertTrue(error("[speakers]\nx = 1\n")?.message.contains("unknown section") == true)
    }

    func testChangedKeys() throws {
        let a = try parse("[audio]\nvolume_db = -3\n[room]\nserver = 127.0.0.1:7700\ntoken = t\n")
        let b = try parse("[audio]\nvolume_db = -3\n[room]\nserver = 127.0.0.1:7700\ntoken = u\n[log]\nlevel = debug\n")
        XCTAssertEqual(b.changedKeys(from: a), ["room.token", "log.level"])
        XCTAssertEqual(a.changedKeys(from: a), [])
    }

    func testSignallingKeys() throws {
        let pin = "sha256/" + String(repeating: "A", count: 43) + "="
        let c = try ApplianceConfiguration.parse(text: """
            [room]
            server = rooms.example.org:7700, 192.0.2.10:7700
            token_file = token
            tls_ca_file = room-ca.pem
            tls_pin = \(pin), \(pin.replacingOccurrences(of: "AAAA", with: "BBBB"))
            tls_server_name = rooms.example.org
            """, file: "/etc/roomd/roomd.conf", directory: "/etc/roomd")
        XCTAssertEqual(c.servers, ["rooms.example.org:7700", "192.0.2.10:7700"])
        XCTAssertEqual(c.tlsCAFile, "/etc/roomd/room-ca.pem")
        XCTAssertEqual(c.tlsPins.count, 2)
        XCTAssertEqual(c.tlsServerName, "rooms.example.org")
        XCTAssertNil(c.plaintextSignalling)
        var plain = ApplianceConfiguration()
        plain.servers = c.servers
        plain.plaintextSignalling = true
        XCTAssertEqual(plain.changedKeys(from: c), ["room.token_file", "room.tls_ca_file", "room.tls_pin", "room.tls_server_name",
                                                    "room.plaintext_signalling"])
    }

    /// Placement in the token: the service's public key, relative to the file; a token file and
    /// no server is a room placed by its token.
    func testPlacementKey() throws {
        let c = try ApplianceConfiguration.parse(text: "[room]\ntoken_file = token\nplacement_key = service.pub\n",
                                                 file: "/etc/roomd/roomd.conf", directory: "/etc/roomd")
        XCTAssertEqual(c.placementKey, "/etc/roomd/service.pub")
        XCTAssertEqual(c.servers, [])
        var without = c
        without.placementKey = nil
        XCTAssertEqual(c.changedKeys(from: without), ["room.placement_key"])
    }

    /// A Janus room: no token needed, the room number, PIN and secret read as written.
    func testJanusKeys() throws {
        let c = try parse("[room]\nbackend = janus\nserver = janus.example:8989\njanus_room = 1234\njanus_pin = 4711\njanus_secret = s3\ndisplay_name = Room 4.12\n")
        XCTAssertEqual(c.backend, .janus)
        XCTAssertEqual(c.janusRoom, 1234)
        XCTAssertEqual(c.janusPin, "4711")
        XCTAssertEqual(c.janusSecret, "s3")
        XCTAssertEqual(c.displayName, "Room 4.12")
        XCTAssertNil(c.token)
        let d = try parse("[room]\nbackend = janus\nserver = janus.example:8989\njanus_room = 5678\njanus_pin = 4711\njanus_secret = s3\ndisplay_name = Room 4.12\n")
        XCTAssertEqual(d.changedKeys(from: c), ["room.janus_room"])
    }

    func testHostPortRule() {
        for ok in ["127.0.0.1:7700", "[::1]:7700", "10.1.2.3:1", "host:7700", "room-1.example.org:7700"] {
            XCTAssertTrue(ApplianceConfiguration.isHostPort(ok), ok)
        }
        for bad in ["127.0.0.1", "1.2.3:7", "256.0.0.1:7", "[]:1", "1.2.3.4:0", ":7700", "ho_st:7700", "-a.b:1", "a..b:1"] {
            XCTAssertFalse(ApplianceConfiguration.isHostPort(bad), bad)
        }
    }
}

final class RuntimeSettingsTests: XCTestCase {
    func testRoundTrip() throws {
        let cases = [
            RuntimeSettings(),
            RuntimeSettings(volumeDB: -12.25, profile: .music, logLevel: "debug", muted: true),
            RuntimeSettings(volumeDB: 3, muted: false),
        ]
        for s in cases {
            XCTAssertEqual(try RuntimeSettings.parse(text: s.serialized(), file: "settings.conf"), s)
        }
        // The room listened to (issue 29), with and without its own server.
        for server in [nil, "10.0.0.5:7700"] as [String?] {
            var s = RuntimeSettings(muted: false)
            s.listen = RuntimeSettings.Listen(room: "second", server: server, token: "a.b.c", gainDB: -6.5)
            XCTAssertEqual(try RuntimeSettings.parse(text: s.serialized(), file: "settings.conf"), s)
            XCTAssertFalse(s.isEmpty)
        }
        var janus = RuntimeSettings()
        janus.listen = RuntimeSettings.Listen(room: "1234", server: "127.0.0.1:8188", token: nil, gainDB: 0, backend: .janus, pin: "4321")
        XCTAssertEqual(try RuntimeSettings.parse(text: janus.serialized(), file: "settings.conf"), janus, "a Janus room needs no token")
    }

    func testAListenedRoomNeedsItsToken() {
        XCTAssertThrowsError(try RuntimeSettings.parse(text: "[listen]\nroom = second\n", file: "s.conf")) { error in
            XCTAssertEqual((error as? ConfigError)?.description, "s.conf:2: listen.room: needs listen.token beside it")
        }
        XCTAssertThrowsError(try RuntimeSettings.parse(text: "[listen]\nroom = r\ntoken = t\ngain_db = 99\n", file: "s.conf")) { error in
            XCTAssertTrue("\(error)".contains("listen.gain_db"), "\(error)")
        }
    }

    func testBasisRoundTripsAndTellsWhatTheFileChanged() throws {
        var s = RuntimeSettings(volumeDB: -12, profile: .music, logLevel: "debug")
        var file = ApplianceConfiguration()
        file.volumeDB = -3
        s.rebase(on: file)
        XCTAssertEqual(s.basis, RuntimeSettings.Basis(volumeDB: .some(-3), profile: .some(nil), logLevel: .some(nil)))
        let back = try RuntimeSettings.parse(text: s.serialized(), file: "s")
        XCTAssertEqual(back, s)
        XCTAssertEqual(back.keysChanged(in: file), [])
        file.volumeDB = -6
        file.logLevel = "info"
        XCTAssertEqual(back.keysChanged(in: file), ["audio.volume_db", "log.level"])
        // No basis recorded (an older file): nothing is dropped.
        XCTAssertEqual(RuntimeSettings(volumeDB: 1).keysChanged(in: file), [])
    }

    func testEditedFileErrorsNameTheLine() {
        XCTAssertThrowsError(try RuntimeSettings.parse(text: "[room]\nmuted = maybe\n", file: "s.conf")) { error in
            XCTAssertEqual((error as? ConfigError)?.description, "s.conf:2: room.muted: \"maybe\" is not yes or no")
        }
    }

    func testForgetDropsOnlyChangedKeys() {
        var s = RuntimeSettings(volumeDB: -6, profile: .music, logLevel: "debug", muted: true)
        s.forget(changedConfigurationKeys: ["audio.volume_db", "room.server"])
        XCTAssertEqual(s, RuntimeSettings(profile: .music, logLevel: "debug", muted: true))
    }
}

final class ApplianceConfigurationExampleTests: XCTestCase {
    /// The example installers copy must stay valid as the schema changes.
    func testShippedExampleParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = root.appendingPathComponent("docs/roomd.conf.example").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let c = try ApplianceConfiguration.parse(text: text, file: path, directory: "/etc/roomd")
        XCTAssertEqual(c.boardPath, "/etc/roomd/board")
        XCTAssertEqual(c.tokenFile, "/etc/roomd/token")
        XCTAssertEqual(c.servers, ["192.0.2.10:7700"])
        XCTAssertEqual(c.controlGroup, "roomctl")
        XCTAssertEqual(c.tlsCAFile, "/etc/roomd/room-ca.pem")
        XCTAssertEqual(c.tlsServerName, "rooms.example.org")
        XCTAssertNil(c.plaintextSignalling, "TLS unless asked otherwise")
    }
}
