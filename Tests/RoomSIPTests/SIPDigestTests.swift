import XCTest
@testable import RoomSIP

final class SIPDigestTests: XCTestCase {
    /// RFC 2617 §3.5's worked example (qop=auth), the one published answer to check against.
    func testRFC2617Example() throws {
        let challenge = SIPDigestChallenge(realm: "testrealm@host.com", nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093",
                                           opaque: "5ccc069c403ebaf9f0171e9517f40e41", qop: ["auth", "auth-int"])
        let value = try SIPDigest.authorization(challenge: challenge, method: "GET", uri: "/dir/index.html",
                                                user: "Mufasa", password: "Circle Of Life", cnonce: "0a4f113b", nonceCount: 1)
        XCTAssertTrue(value.contains(#"response="6629fae49393a05397450978507c4ef1""#), value)
        XCTAssertTrue(value.contains("qop=auth, nc=00000001, cnonce=\"0a4f113b\""), value)
        XCTAssertTrue(value.contains(#"opaque="5ccc069c403ebaf9f0171e9517f40e41""#), value)
    }

    /// Without qop (RFC 2069 form): response = MD5(HA1:nonce:HA2), checked against the same
    /// hashes computed step by step.
    func testWithoutQop() throws {
        let challenge = SIPDigestChallenge(realm: "r", nonce: "n")
        let value = try SIPDigest.authorization(challenge: challenge, method: "REGISTER", uri: "sip:r",
                                                user: "u", password: "p", cnonce: "c")
        let expected = SIPDigest.md5Hex(SIPDigest.md5Hex("u:r:p") + ":n:" + SIPDigest.md5Hex("REGISTER:sip:r"))
        XCTAssertTrue(value.contains("response=\"\(expected)\""), value)
        XCTAssertFalse(value.contains("qop="))
        XCTAssertEqual(SIPDigest.md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e")
    }

    func testRefusesWhatItCannotAnswer() {
        XCTAssertThrowsError(try SIPDigest.authorization(challenge: SIPDigestChallenge(realm: "r", nonce: "n", algorithm: "SHA-256"),
                                                         method: "REGISTER", uri: "sip:r", user: "u", password: "p", cnonce: "c"))
        XCTAssertThrowsError(try SIPDigest.authorization(challenge: SIPDigestChallenge(realm: "r", nonce: "n", qop: ["auth-int"]),
                                                         method: "REGISTER", uri: "sip:r", user: "u", password: "p", cnonce: "c"))
    }

    func testQuotesAreEscaped() {
        XCTAssertEqual(SIPDigest.quoted(#"a"b\c"#), #""a\"b\\c""#)
        XCTAssertEqual(SIPUserAgent.unquoted(#""a\"b""#), #"a"b"#)
        XCTAssertEqual(SIPUserAgent.unquoted("plain"), "plain")
    }

    func testAccountRefusesHeaderBreakingText() throws {
        let registrar = try SocketAddressForTests.loopback(5060)
        XCTAssertThrowsError(try SIPAccount(registrar: registrar, domain: "example.org", user: "room\r\nX-Evil: 1", password: "p"))
        XCTAssertThrowsError(try SIPAccount(registrar: registrar, domain: "exa mple.org", user: "room", password: "p"))
        XCTAssertThrowsError(try SIPAccount(registrar: registrar, domain: "example.org", user: "room", password: "p\n"))
        XCTAssertNoThrow(try SIPAccount(registrar: registrar, domain: "example.org", user: "room", password: "p w"))
    }
}

final class SIPTextTests: XCTestCase {
    func testDeltaSeconds() {
        XCTAssertEqual(SIPUserAgent.deltaSeconds(" 3600 "), 3600)
        XCTAssertEqual(SIPUserAgent.deltaSeconds("0"), 0)
        XCTAssertEqual(SIPUserAgent.deltaSeconds("0000045"), 45)
        XCTAssertEqual(SIPUserAgent.deltaSeconds("99999999999999999999999"), 86_400)
        XCTAssertNil(SIPUserAgent.deltaSeconds("-5"))
        XCTAssertNil(SIPUserAgent.deltaSeconds("+5"))
        XCTAssertNil(SIPUserAgent.deltaSeconds("5 5"))
        XCTAssertNil(SIPUserAgent.deltaSeconds(""))
    }
}
