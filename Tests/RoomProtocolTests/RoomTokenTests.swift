import FoundationEssentials
import RoomBase
import RoomModel
import RoomProtocol
import XCTest

final class RoomTokenTests: XCTestCase {
    let secret = Array("development secret, not for production".utf8)
    let now = 1_800_000_000

    func claims(room: String = "standup", publish: Bool = true, moderate: Bool = false, nbf: Int? = nil, exp: Int? = nil) -> RoomTokenClaims {
        RoomTokenClaims(
            app: "acme", room: room, sub: "u-alice", name: "Alice",
            grants: RoomGrants(publish: publish, moderate: moderate),
            exp: exp ?? now + 3600, nbf: nbf ?? now - 60, iat: now - 60)
    }

    func verifier(at time: Int? = nil) -> RoomTokenVerifier {
        let fixed = time ?? now
        return RoomTokenVerifier(keys: ["k1": secret, "k2": Array("other".utf8)], clock: { fixed })
    }

    private func assertRefused(
        _ token: String, room: String = "standup", role: RoomRole = .audience, moderator: Bool = false,
        at time: Int? = nil, _ expected: TokenError, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try verifier(at: time).verify(token, room: room, wantsRole: role, wantsModerator: moderator), file: file, line: line) {
            XCTAssertEqual($0 as? TokenError, expected, file: file, line: line)
        }
    }

    private func assertMalformed(_ token: String, contains: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try verifier().verify(token, room: "standup", wantsRole: .audience), file: file, line: line) {
            guard case let .malformed(reason) = $0 as? TokenError else { return XCTFail("\($0)", file: file, line: line) }
            XCTAssertTrue(reason.contains(contains), "reason: \(reason)", file: file, line: line)
        }
    }

    /// A token with arbitrary header and payload JSON, correctly signed with `secret`.
    private func forge(header: String, payload: String, key: [UInt8]? = nil) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        return input + "." + Base64URL.encode(RoomToken.signature(signingInput: input, secret: key ?? secret))
    }

    private func payloadJSON(_ claims: RoomTokenClaims) -> String {
        String(decoding: try! JSONEncoder().encode(claims), as: UTF8.self)
    }

    // RFC 7515 appendix A.1: the HS256 example. The key is the JWK "k" value; the expected
    // signature bytes are printed in A.1.1. This pins HMAC-SHA256 and base64url together.
    func testRFC7515AppendixA1Signature() throws {
        let key = try XCTUnwrap(
            Base64URL.decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"))
        XCTAssertEqual(key.count, 64)
        let header = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
        XCTAssertEqual(Base64URL.decode(header), Array("{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}".utf8))
        let payload = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        let signature = RoomToken.signature(signingInput: header + "." + payload, secret: key)
        XCTAssertEqual(
            signature,
            [
                116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37, 77, 105, 214,
                191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
            ])
        XCTAssertEqual(Base64URL.encode(signature), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")

        // The RFC's token has no kid and none of our claims: it must be refused, as malformed.
        let rfcToken = header + "." + payload + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let verifier = RoomTokenVerifier(keys: ["k": key], clock: { 1_300_819_000 })
        XCTAssertThrowsError(try verifier.verify(rfcToken, room: "r", wantsRole: .audience)) {
            XCTAssertEqual($0 as? TokenError, .malformed("header has no kid"))
        }
    }

    func testMintAndVerify() throws {
        let token = RoomToken.mint(claims: claims(), keyID: "k1", secret: secret)
        XCTAssertEqual(token.split(separator: ".").count, 3)
        XCTAssertFalse(token.contains("="), "base64url without padding")
        let header = try XCTUnwrap(Base64URL.decode(token.split(separator: ".")[0]))
        XCTAssertEqual(String(decoding: header, as: UTF8.self), #"{"alg":"HS256","kid":"k1","typ":"JWT"}"#)
        XCTAssertEqual(try verifier().verify(token, room: "standup", wantsRole: .streamer), claims())
        XCTAssertEqual(try verifier().verify(token, room: "standup", wantsRole: .audience).sub, "u-alice")
    }

    func testDistinctRefusals() {
        let good = RoomToken.mint(claims: claims(), keyID: "k1", secret: secret)
        assertRefused(RoomToken.mint(claims: claims(), keyID: "k9", secret: secret), .unknownKey("k9"))
        assertRefused(RoomToken.mint(claims: claims(), keyID: "k2", secret: secret), .badSignature)
        assertRefused(good, room: "retro", .wrongRoom(expected: "retro", got: "standup"))
        assertRefused(
            RoomToken.mint(claims: claims(publish: false), keyID: "k1", secret: secret), role: .streamer,
            .missingGrant(.publish))
        assertRefused(good, moderator: true, .missingGrant(.moderate))
        XCTAssertNoThrow(
            try verifier().verify(
                RoomToken.mint(claims: claims(publish: false, moderate: true), keyID: "k1", secret: secret),
                room: "standup", wantsRole: .audience, wantsModerator: true))
        XCTAssertEqual(TokenError.badSignature.code, .badSignature)
        XCTAssertEqual(TokenError.expired(at: 1).code.rawValue, "token_expired")
        XCTAssertEqual(TokenError.notYetValid(until: 1).code.rawValue, "token_not_yet_valid")
        XCTAssertEqual(TokenError.wrongRoom(expected: "a", got: "b").code.rawValue, "wrong_room")
        XCTAssertEqual(TokenError.unknownKey("k").code.rawValue, "unknown_key")
        XCTAssertEqual(TokenError.missingGrant(.publish).code.rawValue, "missing_grant")
        XCTAssertEqual(TokenError.malformed("x").code.rawValue, "malformed_token")
    }

    func testTamperingIsDetected() throws {
        let token = RoomToken.mint(claims: claims(publish: false), keyID: "k1", secret: secret)
        let parts = token.split(separator: ".").map(String.init)
        // Grant oneself publish, keep the old signature.
        let elevated = Base64URL.encode(Array(payloadJSON(claims(publish: true)).utf8))
        assertRefused(parts[0] + "." + elevated + "." + parts[2], role: .streamer, .badSignature)
        // Swap the signature's last character for another with the same significant bits:
        // a strict decoder refuses the second spelling instead of accepting it.
        var signature = Array(parts[2].utf8)
        let last = signature.removeLast()
        signature.append(last == UInt8(ascii: "A") ? UInt8(ascii: "B") : last ^ 1)
        XCTAssertThrowsError(
            try verifier().verify(parts[0] + "." + parts[1] + "." + String(decoding: signature, as: UTF8.self), room: "standup", wantsRole: .audience))
    }

    func testTimeChecksWithLeeway() {
        let leeway = RoomTokenVerifier.defaultLeeway
        XCTAssertEqual(leeway, 30)
        let expiring = RoomToken.mint(claims: claims(exp: now + 100), keyID: "k1", secret: secret)
        XCTAssertNoThrow(try verifier(at: now + 100 + leeway - 1).verify(expiring, room: "standup", wantsRole: .audience))
        assertRefused(expiring, at: now + 100 + leeway, .expired(at: now + 100))
        assertRefused(expiring, at: now + 10_000, .expired(at: now + 100))

        let future = RoomToken.mint(claims: claims(nbf: now + 100), keyID: "k1", secret: secret)
        XCTAssertNoThrow(try verifier(at: now + 100 - leeway).verify(future, room: "standup", wantsRole: .audience))
        assertRefused(future, at: now + 100 - leeway - 1, .notYetValid(until: now + 100))
    }

    func testAlgorithmConfusionIsRefused() {
        let payload = payloadJSON(claims())
        // "none" with an empty signature: the classic JWT bypass.
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"k1"}"#.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "."
        assertMalformed(none, contains: "alg \"none\"")
        assertMalformed(forge(header: #"{"alg":"HS512","kid":"k1"}"#, payload: payload), contains: "HS512")
        assertMalformed(forge(header: #"{"alg":"hs256","kid":"k1"}"#, payload: payload), contains: "hs256")
        assertMalformed(forge(header: #"{"kid":"k1"}"#, payload: payload), contains: "alg: missing")
        assertMalformed(forge(header: #"{"alg":"HS256","kid":"k1","crit":["b64"]}"#, payload: payload), contains: "crit")
        assertMalformed(forge(header: #"{"alg":"HS256","kid":"k1","typ":"JOSE+JSON"}"#, payload: payload), contains: "typ")
        // typ is optional.
        XCTAssertNoThrow(try verifier().verify(forge(header: #"{"alg":"HS256","kid":"k1"}"#, payload: payload), room: "standup", wantsRole: .audience))
    }

    func testStructuralGarbage() {
        assertMalformed("", contains: "3 dot-separated parts")
        assertMalformed("a.b", contains: "3 dot-separated parts")
        assertMalformed("a.b.c.d", contains: "found 4")
        assertMalformed("!!.e30.AA", contains: "header is not base64url")
        assertMalformed("e30.e30=.AA", contains: "payload is not base64url")
        assertMalformed(Base64URL.encode(Array("not json".utf8)) + ".e30.AA", contains: "header:")
        assertMalformed(forge(header: #"{"alg":"HS256","kid":"k1"}"#, payload: "{}").dropLast(3) + "", contains: "signature")
        assertMalformed(String(repeating: "A", count: 5000), contains: "longer than")
    }

    func testClaimsAreValidatedAfterTheSignature() {
        let header = #"{"alg":"HS256","kid":"k1"}"#
        assertMalformed(
            forge(header: header, payload: #"{"app":"a","room":"standup","sub":"u","name":"n","grants":{"publish":true,"moderate":false},"nbf":1,"iat":1}"#),
            contains: "claims: exp: missing")
        assertMalformed(
            forge(header: header, payload: #"{"app":"a","room":"standup","sub":"u","name":"n","grants":{"publish":"yes","moderate":false},"exp":1,"nbf":1,"iat":1}"#),
            contains: "grants.publish")
        assertMalformed(
            forge(header: header, payload: #"{"app":"a","room":"standup","sub":"","name":"n","grants":{"publish":true,"moderate":false},"exp":1,"nbf":1,"iat":1}"#),
            contains: "sub: empty")
        assertMalformed(
            forge(header: header, payload: #"{"app":"a","room":"standup","sub":"u","name":"n","grants":{"publish":true,"moderate":false},"exp":1.5,"nbf":1,"iat":1}"#),
            contains: "exp")
        // Claims under a bad signature are not even parsed: the error is the signature.
        assertRefused(forge(header: header, payload: "{}", key: Array("wrong".utf8)), .badSignature)
    }

    /// Issue 27: a token with `grants` twice was accepted, meaning whichever the decoder kept.
    /// A key twice in one object is refused, also when spelled with escapes; the same key in
    /// two different objects is fine.
    func testAKeyTwiceInOneObjectIsRefused() {
        let header = #"{"alg":"HS256","kid":"k1"}"#
        let now = 1_700_000_000
        let body = #""app":"a","room":"standup","sub":"u","name":"n","exp":\#(now + 60),"nbf":1,"iat":1"#
        assertMalformed(forge(header: header, payload: #"{\#(body),"grants":{"publish":false,"moderate":false},"grants":{"publish":true,"moderate":true}}"#),
                        contains: #"claims: key "grants" twice"#)
        assertMalformed(forge(header: header, payload: #"{\#(body),"grants":{"publish":true,"moderate":false,"publish":false}}"#),
                        contains: #"key "publish" twice"#)
        assertMalformed(forge(header: header, payload: #"{\#(body),"grants":{"publish":true,"moderate":false},"grants":{"publish":true,"moderate":false}}"#),
                        contains: #"key "grants" twice"#)
        assertMalformed(forge(header: #"{"alg":"HS256","kid":"k1","kid":"k2"}"#, payload: "{}"), contains: #"header: key "kid" twice"#)
        XCTAssertNoThrow(try RoomTokenVerifier(keys: ["k1": secret], clock: { now }).verify(
            forge(header: header, payload: #"{\#(body),"grants":{"publish":true,"moderate":false}}"#), room: "standup", wantsRole: .streamer),
            "the same keys in two objects")
    }

    func testRandomTokensNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        let good = Array(RoomToken.mint(claims: claims(), keyID: "k1", secret: secret).utf8)
        for _ in 0 ..< 5000 {
            var bytes = good
            for _ in 0 ..< Int.random(in: 1 ... 3, using: &generator) {
                bytes[Int.random(in: 0 ..< bytes.count, using: &generator)] = UInt8.random(in: 0x20 ... 0x7E, using: &generator)
            }
            let token = String(decoding: bytes, as: UTF8.self)
            if token == String(decoding: good, as: UTF8.self) { continue }
            // Any change to a canonical token is refused (base64url is strict, so no
            // second spelling of the same bytes survives).
            XCTAssertThrowsError(try verifier().verify(token, room: "standup", wantsRole: .audience), token)
        }
    }
}
