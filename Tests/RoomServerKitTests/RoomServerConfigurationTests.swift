import RoomCrypto
import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

final class RoomServerConfigurationTests: XCTestCase {
    /// The shipped example parses and has the documented values.
    func testExampleFileParses() throws {
        let path = Self.packageRoot + "/docs/roomserver.conf.example"
        let config = try RoomServerConfiguration.load(path: path)
        XCTAssertEqual(config.listen.map(\.description), ["127.0.0.1:7700"])
        XCTAssertEqual(config.media.description, "127.0.0.1:7701")
        XCTAssertEqual(config.logLevel, .info)
        XCTAssertEqual(config.keys["dev"]?.appID, "roomd-dev")
        XCTAssertEqual(config.keys["dev"]?.secret, SecretBytes(Array(0 ..< 32)))
        XCTAssertEqual(config.room.policy, .open)
        XCTAssertEqual(config.room.speakerLimit, 6)
        XCTAssertEqual(config.room.topN, 3)
        XCTAssertEqual(config.maxParticipants, 50)
        XCTAssertTrue(config.srtp, "the example encrypts media")
    }

    /// `[public_keys]` (EdDSA tokens' keys, files relative to the configuration) and
    /// `[placement]` (room → instance for mint-token): read, and every wrong row named.
    func testPublicKeysAndPlacement() throws {
        let directory = NSTemporaryDirectory() + "roomserver-placement-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n"
        try pem.write(toFile: directory + "/service.pub", atomically: true, encoding: .utf8)
        try "not a key\n".write(toFile: directory + "/notes.txt", atomically: true, encoding: .utf8)
        let base = "[server]\nplain_listen = 127.0.0.1:7702\n"
        let config = try RoomServerConfiguration.parse(text: base + """
            [public_keys]
            svc = acme:service.pub
            [placement]
            standup = roomserver rooms-b.example.org:7700
            1234 = janus 10.0.0.5:8188
            """, file: directory + "/t.conf")
        XCTAssertEqual(config.publicKeys["svc"]?.appID, "acme")
        XCTAssertEqual(config.publicKeys["svc"]?.key, try Ed25519PublicKey(pem: pem))
        XCTAssertEqual(config.placement["standup"], RoomPlacementEntry(backend: .roomserver, server: "rooms-b.example.org:7700"))
        XCTAssertEqual(config.placement["1234"], RoomPlacementEntry(backend: .janus, server: "10.0.0.5:8188"))

        func refused(_ text: String, _ words: String, line: UInt = #line) {
            XCTAssertThrowsError(try RoomServerConfiguration.parse(text: base + text, file: directory + "/t.conf"), line: line) {
                XCTAssertTrue("\($0)".contains(words), "\($0)", line: line)
            }
        }
        refused("[public_keys]\nsvc = acme:missing.pub\n", "public_keys.svc: cannot read")
        refused("[public_keys]\nsvc = service.pub\n", "expected APP_ID:FILE")
        refused("[public_keys]\nsvc = acme:notes.txt\n", "not a PEM Ed25519 public key")
        refused("[keys]\nsvc = a:hex:\(String(repeating: "00", count: 32))\n[public_keys]\nsvc = acme:service.pub\n", "also in [keys]")
        refused("[placement]\nstandup = sfu 10.0.0.2:7700\n", "placement.standup: \"sfu\" is not roomserver or janus")
        refused("[placement]\nstandup = roomserver\n", "expected \"roomserver HOST:PORT\"")
        refused("[placement]\nstandup = roomserver 10.0.0.2\n", "is not host:port")
        refused("[placement]\nstandup = janus 10.0.0.5:8188\n", "AudioBridge room number")
    }

    /// `[media] srtp`: yes by default; `no` only when written; anything else names the key.
    func testMediaEncryptionSwitch() throws {
        // A plain listener only, so no [tls] section is needed for these.
        let base = "[server]\nplain_listen = 127.0.0.1:7702\n"
        XCTAssertTrue(try RoomServerConfiguration.parse(text: base, file: "t.conf").srtp)
        XCTAssertFalse(try RoomServerConfiguration.parse(text: base + "[media]\nsrtp = no\n", file: "t.conf").srtp)
        XCTAssertTrue(try RoomServerConfiguration.parse(text: base + "[media]\nsrtp = yes\n", file: "t.conf").srtp)
        XCTAssertThrowsError(try RoomServerConfiguration.parse(text: base + "[media]\nsrtp = off\n", file: "t.conf")) {
            XCTAssertTrue("\($0)".contains("media.srtp"), "\($0)")
            XCTAssertTrue("\($0)".contains("yes or no"), "\($0)")
        }
        XCTAssertThrowsError(try RoomServerConfiguration.parse(text: base + "[media]\nsrtp_profile = x\n", file: "t.conf"))
    }

    func testWorkers() throws {
        let base = "[server]\nplain_listen = 127.0.0.1:7702\n"
        XCTAssertNil(try RoomServerConfiguration.parse(text: base, file: "t.conf").workers, "auto by default")
        XCTAssertNil(try RoomServerConfiguration.parse(text: base + "workers = auto\n", file: "t.conf").workers)
        XCTAssertEqual(try RoomServerConfiguration.parse(text: base + "workers = 3\n", file: "t.conf").workers, 3)
    }

    func testDefaultsAndLists() throws {
        let b64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
        let config = try RoomServerConfiguration.parse(text: """
            [server]
            listen = 127.0.0.1:7700, [::1]:7700
            [keys]
            a = app1:base64:\(b64)
            [rooms]
            policy = moderated
            [tls]
            cert_file = tls/server.pem
            key_file = /etc/roomserver/server.key
            """, file: "/etc/rs/t.conf")
        XCTAssertEqual(config.listen.count, 2)
        XCTAssertEqual(config.plainListen, [])
        XCTAssertEqual(config.tls, RoomServerTLSFiles(certFile: "/etc/rs/tls/server.pem", keyFile: "/etc/roomserver/server.key"),
                       "relative to the file's directory")
        XCTAssertEqual(config.media.port, 7701)
        XCTAssertEqual(config.keys["a"]?.secret, SecretBytes(Array(0 ..< 32)))
        XCTAssertEqual(config.room.policy, .moderated)
        XCTAssertEqual(config.room.topN, 3)
        XCTAssertEqual(config.maxParticipants, 50)
        XCTAssertEqual(config.room.reconnectGraceMs, 20_000, "protocol.md's 20 s")
        let short = try RoomServerConfiguration.parse(text: "[server]\nplain_listen = 127.0.0.1:7702\n[rooms]\nreconnect_grace_ms = 1000\n", file: "t.conf")
        XCTAssertEqual(short.room.reconnectGraceMs, 1000)
        XCTAssertEqual(short.listen, [], "only plain_listen: no TLS listener, no [tls] needed")
        XCTAssertEqual(short.plainListen.map(\.description), ["127.0.0.1:7702"])
    }

    /// TLS is the default and needs its files; plain signalling only when asked for.
    func testTLSListenersNeedTheCertificateAndKey() {
        let cases: [(String, String, String)] = [
            ("[rooms]\npolicy = open\n", "server.listen", "is TLS and needs [tls] cert_file and key_file"),
            ("[server]\nlisten = 127.0.0.1:7700\n[tls]\ncert_file = a.pem\n", "tls.cert_file", "needs tls.key_file"),
            ("[server]\nlisten = 127.0.0.1:7700\n[tls]\nkey_file = a.key\n", "tls.key_file", "needs tls.cert_file"),
            ("[server]\nlisten = 127.0.0.1:7700\nplain_listen = 127.0.0.1:7700\n[tls]\ncert_file = a\nkey_file = b\n",
             "server.plain_listen", "also in server.listen"),
            ("[server]\nplain_listen = nowhere\n", "server.plain_listen", "not an address"),
            ("[tls]\ncert_fil = a\n", "tls.cert_fil", "did you mean"),
        ]
        for (text, key, fragment) in cases {
            XCTAssertThrowsError(try RoomServerConfiguration.parse(text: text, file: "rs.conf"), text) {
                XCTAssertTrue("\($0)".contains(key) && "\($0)".contains(fragment), "\($0)")
            }
        }
    }

    func testErrorsNameFileLineAndKey() {
        let hex = String(repeating: "ab", count: 32)
        let cases: [(String, Int, String?, String)] = [
            ("[server]\nlisten = nowhere\n", 2, "server.listen", "not an address"),
            ("[server]\nmedia = 1.2.3.4\n", 2, "server.media", "not an address"),
            ("[server]\nlog_level = loud\n", 2, "server.log_level", "loud"),
            ("[server]\nlog_level = warn\n", 2, "server.log_level", "\"warn\" is not error, warning, notice, info or debug"),
            ("[server]\nlisten = 127.0.0.1:1,,127.0.0.1:2\n", 2, "server.listen", "empty"),
            ("[server]\nworkers = 0\n", 2, "server.workers", "\"0\" is not auto or a whole number from 1 to 64"),
            ("[server]\nworkers = all\n", 2, "server.workers", "\"all\" is not auto"),
            ("[server]\nworkers = 65\n", 2, "server.workers", "from 1 to 64"),
            ("[server]\nlisen = 127.0.0.1:1\n", 2, "server.lisen", "did you mean \"listen\""),
            ("\n[rooms]\npolicy = anarchy\n", 3, "rooms.policy", "open or moderated"),
            ("[rooms]\n\ntop_n = 0\n", 3, "rooms.top_n", "out of range"),
            ("[rooms]\nspeaker_limit = many\n", 2, "rooms.speaker_limit", "whole number"),
            ("[rooms]\nmax_participants = 0\n", 2, "rooms.max_participants", "out of range"),
            ("[rooms]\nreconnect_grace_ms = -1\n", 2, "rooms.reconnect_grace_ms", "out of range"),
            ("[rooms]\nreconnect_grace_ms = 1h\n", 2, "rooms.reconnect_grace_ms", "whole number"),
            ("[rooms]\nreconnect_grace_ms = 600001\n", 2, "rooms.reconnect_grace_ms", "out of range"),
            ("[keys]\nk = app:hex:abcd\n", 2, "keys.k", "at least 32"),
            ("[keys]\nk = \(hex)\n", 2, "keys.k", "APP_ID:hex:SECRET"),
            ("[keys]\nk = app:rot13:\(hex)\n", 2, "keys.k", "rot13"),
            ("[keys]\nk = app:hex:zz\(hex)\n", 2, "keys.k", "hexadecimal"),
            ("[keys]\nk = :hex:\(hex)\n", 2, "keys.k", "application id"),
            ("[keys]\nk = app:base64:!!!!\n", 2, "keys.k", "base64"),
        ]
        for (text, line, key, fragment) in cases {
            do {
                _ = try RoomServerConfiguration.parse(text: text, file: "rs.conf")
                XCTFail("accepted: \(text)")
            } catch {
                XCTAssertEqual(error.file, "rs.conf")
                XCTAssertEqual(error.line, line, "\(error)")
                XCTAssertEqual(error.key, key, "\(error)")
                XCTAssertTrue(error.description.contains(fragment), "\(error)")
                XCTAssertTrue(error.description.hasPrefix("rs.conf:\(line): "), "\(error)")
            }
        }
    }

    func testUnknownSectionAndMissingFile() {
        XCTAssertThrowsError(try RoomServerConfiguration.parse(text: "[romos]\npolicy = open\n", file: "x.conf")) {
            XCTAssertTrue("\($0)".contains("x.conf:1: unknown section [romos]"), "\($0)")
        }
        XCTAssertThrowsError(try RoomServerConfiguration.load(path: "/nonexistent/roomserver.conf")) {
            XCTAssertTrue("\($0)".hasPrefix("/nonexistent/roomserver.conf: cannot read"), "\($0)")
        }
    }

    static var packageRoot: String {
        var path = #filePath
        for _ in 0 ..< 3 { path = Files.directory(of: path) }
        return path
    }
}
