@testable import RoomSettings
import XCTest

/// roomd.conf's `[sip]` section (issue 29): the account, and every refusal naming its key and line.
final class SIPSettingsTests: XCTestCase {
    private func parse(_ text: String) throws -> ApplianceConfiguration {
        try ApplianceConfiguration.parse(text: text, file: "/etc/roomd/roomd.conf", directory: "/etc/roomd")
    }

    func testAFullAccountAndTheDefaults() throws {
        let c = try parse("""
            [sip]
            registrar = pbx.example.org:5060
            user = room-4
            auth_user = 4711
            password_file = sip.password
            transport = udp
            media_encryption = optional
            codecs = g722, PCMU
            auto_answer = yes
            auto_answer_from = reception, desk@example.org
            ring_level_db = -20
            register_expires = 300
            """)
        let s = try XCTUnwrap(c.sip)
        XCTAssertEqual(s.registrar, "pbx.example.org:5060")
        XCTAssertEqual(s.domain, "pbx.example.org")
        XCTAssertEqual(s.authUser, "4711")
        XCTAssertEqual(s.passwordFile, "/etc/roomd/sip.password")
        XCTAssertEqual(s.mediaEncryption, .optional)
        XCTAssertEqual(s.codecs, ["g722", "pcmu"])
        XCTAssertEqual(s.autoAnswerFrom, ["reception", "desk@example.org"])
        XCTAssertEqual(s.ringLevelDB, -20)
        XCTAssertEqual(s.registerExpires, 300)

        let d = try XCTUnwrap(try parse("[sip]\nregistrar = 10.0.0.1:5060\nuser = a\ntransport = udp\n").sip)
        XCTAssertEqual(d.domain, "10.0.0.1")
        XCTAssertEqual(d.authUser, "a")
        XCTAssertEqual(d.mediaEncryption, .required, "SRTP unless configured otherwise")
        XCTAssertEqual(d.codecs, ["opus", "g722", "pcmu", "pcma"])
        XCTAssertFalse(d.autoAnswer)
        XCTAssertNil(try parse("[audio]\nprofile = speech\n").sip, "no [sip]: no SIP")
        XCTAssertEqual(s.transport, .udp)
        XCTAssertNil(s.caFile)
    }

    func testTLSIsTheDefaultWithItsCAAndName() throws {
        let plain = try XCTUnwrap(try parse("[sip]\nregistrar = pbx.example.org:5061\nuser = a\n").sip)
        XCTAssertEqual(plain.transport, .tls, "TLS unless configured otherwise")
        XCTAssertNil(plain.caFile, "the system's trust store")
        XCTAssertNil(plain.tlsServerName, "the registrar's host")
        let s = try XCTUnwrap(try parse("[sip]\nregistrar = 10.0.0.1:5061\nuser = a\ntransport = tls\nca_file = pbx-ca.pem\ntls_server_name = pbx.example.org\n").sip)
        XCTAssertEqual(s.caFile, "/etc/roomd/pbx-ca.pem")
        XCTAssertEqual(s.tlsServerName, "pbx.example.org")
    }

    func testErrorsNameTheKeyAndLine() {
        let account = "[sip]\nregistrar = pbx.example.org:5060\nuser = a\ntransport = udp\n"
        let cases: [(String, Int, String, String)] = [
            ("[sip]\nuser = a\n", 2, "sip.user", "needs sip.registrar"),
            ("[sip]\nregistrar = pbx.example.org\nuser = a\n", 2, "sip.registrar", "host:port"),
            ("[sip]\nregistrar = pbx.example.org:5060\n", 0, "sip.user", "missing"),
            ("[sip]\nregistrar = pbx.example.org:5060\nuser = a b\n", 3, "sip.user", "not a SIP user name"),
            ("[sip]\nregistrar = pbx.example.org:5060\nuser = a\ntransport = tcp\n", 4, "sip.transport", "tls"),
            (account + "ca_file = ca.pem\n", 5, "sip.ca_file", "is for transport = tls"),
            (account + "tls_server_name = pbx.example.org\n", 5, "sip.tls_server_name", "is for transport = tls"),
            ("[sip]\nregistrar = pbx.example.org:5061\nuser = a\ntls_server_name = a b\n", 4, "sip.tls_server_name", "not a host name"),
            (account + "codecs = opus, gsm\n", 5, "sip.codecs", "\"gsm\" is not one of"),
            (account + "codecs = opus, opus\n", 5, "sip.codecs", "twice"),
            (account + "auto_answer = yes\n", 5, "sip.auto_answer", "needs sip.auto_answer_from"),
            (account + "auto_answer_from = a b\n", 5, "sip.auto_answer_from", "not user or user@domain"),
            (account + "ring_level_db = 3\n", 5, "sip.ring_level_db", "out of range"),
            (account + "media_encryption = maybe\n", 5, "sip.media_encryption", "required, optional or off"),
            (account + "register_expires = 5\n", 5, "sip.register_expires", "out of range"),
            (account + "pasword_file = x\n", 5, "sip.pasword_file", "did you mean \"password_file\""),
        ]
        for (text, line, key, fragment) in cases {
            do {
                _ = try parse(text)
                XCTFail("accepted: \(text)")
            } catch let e as ConfigError {
                XCTAssertEqual(e.key, key, text)
                if line > 0 { XCTAssertEqual(e.line, line, text) }
                XCTAssertTrue(e.message.contains(fragment), "\(e) should say \(fragment)")
            } catch {
                XCTFail("\(error)")
            }
        }
    }
}
