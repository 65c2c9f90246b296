import RoomBase
import RoomCrypto
import RoomModel
import RoomProtocol
import XCTest

/// Placement claims as an appliance reads them: believed only under the service's EdDSA
/// signature, every refusal naming what is wrong (docs/scaling.md, "Placement in the token").
final class TokenPlacementTests: XCTestCase {
    let now = 1_800_000_000
    /// RFC 8032 §7.1 TEST 1's key, and TEST 2's public key standing for "another service".
    let serviceKey = try! Ed25519PrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n")
    let otherPublicKey = try! Ed25519PublicKey(raw: [
        0x3d, 0x40, 0x17, 0xc3, 0xe8, 0x43, 0x89, 0x5a, 0x92, 0xb7, 0x0a, 0xa7, 0x4d, 0x1b, 0x7e, 0xbc,
        0x9c, 0x98, 0x2c, 0xcf, 0x2e, 0xc4, 0x96, 0x8c, 0xc0, 0xcd, 0x55, 0xf1, 0x2a, 0xf4, 0x66, 0x0c,
    ])

    func claims(room: String = "standup", backend: String? = "roomserver", server: String? = "10.0.0.2:7700") -> RoomTokenClaims {
        RoomTokenClaims(app: "acme", room: room, sub: "board-7", name: "Board 7", grants: RoomGrants(publish: true, moderate: false),
                        exp: now + 3600, nbf: now - 60, iat: now - 60, backend: backend, server: server)
    }

    func verifier(_ key: Ed25519PublicKey?) -> PlacementVerifier {
        let fixed = now
        return PlacementVerifier(key: key, clock: { fixed })
    }

    private func assertRefused(_ token: String, key: Ed25519PublicKey?? = nil, _ expected: PlacementError,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try verifier(key ?? serviceKey.publicKey).placement(of: token), file: file, line: line) {
            XCTAssertEqual($0 as? PlacementError, expected, file: file, line: line)
        }
    }

    func testSignedPlacementIsFollowed() throws {
        let token = RoomToken.mint(claims: claims(), keyID: "svc", signingKey: serviceKey)
        let placement = try XCTUnwrap(try verifier(serviceKey.publicKey).placement(of: token))
        XCTAssertEqual(placement.backend, .roomserver)
        XCTAssertEqual(placement.server, "10.0.0.2:7700")
        XCTAssertEqual(placement.room, "standup")
        XCTAssertNil(placement.janusRoom)

        let janus = RoomToken.mint(claims: claims(room: "5678", backend: "janus", server: "10.0.0.3:8188"), keyID: "svc", signingKey: serviceKey)
        let onJanus = try XCTUnwrap(try verifier(serviceKey.publicKey).placement(of: janus))
        XCTAssertEqual(onJanus.backend, .janus)
        XCTAssertEqual(onJanus.janusRoom, 5678)
    }

    /// Old tokens (HS256, no placement) keep the configuration's placement, with or without a key.
    func testTokensWithoutPlacementAreLeftToTheConfiguration() throws {
        let old = RoomToken.mint(claims: claims(backend: nil, server: nil), keyID: "k1", secret: Array(repeating: 7, count: 32))
        XCTAssertNil(try verifier(nil).placement(of: old))
        XCTAssertNil(try verifier(serviceKey.publicKey).placement(of: old))
    }

    /// Changing the server in the payload while keeping the signature: the attack placement
    /// signing is for. Refused with the reason, before any connection.
    func testTamperedServerClaimIsRefused() throws {
        let token = RoomToken.mint(claims: claims(), keyID: "svc", signingKey: serviceKey)
        let parts = token.split(separator: ".").map(String.init)
        var payload = try XCTUnwrap(Base64URL.decode(parts[1]))
        let text = String(decoding: payload, as: UTF8.self).replacing("10.0.0.2:7700", with: "10.6.6.6:7700")
        XCTAssertNotEqual(Array(text.utf8), payload)
        payload = Array(text.utf8)
        let tampered = parts[0] + "." + Base64URL.encode(payload) + "." + parts[2]
        assertRefused(tampered, .signature)
        XCTAssertEqual(PlacementError.signature.description, "token: placement signature does not verify against room.placement_key")
    }

    func testAnotherServicesKeyIsRefused() {
        let token = RoomToken.mint(claims: claims(), keyID: "svc", signingKey: serviceKey)
        assertRefused(token, key: .some(otherPublicKey), .signature)
    }

    func testPlacementNeedsAPublicKeySignatureAndAKey() {
        let hmac = RoomToken.mint(claims: claims(), keyID: "k1", secret: Array(repeating: 7, count: 32))
        assertRefused(hmac, .notPublicKeySigned(alg: "HS256"))
        let signed = RoomToken.mint(claims: claims(), keyID: "svc", signingKey: serviceKey)
        assertRefused(signed, key: .some(nil), .noKey)
        XCTAssertTrue(PlacementError.noKey.description.contains("room.placement_key is not set"))
    }

    func testMissingOrOddFieldsNameTheClaim() {
        func refused(_ c: RoomTokenClaims, _ claim: String, _ words: String, line: UInt = #line) {
            let token = RoomToken.mint(claims: c, keyID: "svc", signingKey: serviceKey)
            XCTAssertThrowsError(try verifier(serviceKey.publicKey).placement(of: token), line: line) {
                guard case let .claim(name, problem) = $0 as? PlacementError else { return XCTFail("\($0)", line: line) }
                XCTAssertEqual(name, claim, line: line)
                XCTAssertTrue(problem.contains(words), problem, line: line)
                XCTAssertTrue("\($0)".hasPrefix("token: claim \"\(claim)\": "), "\($0)", line: line)
            }
        }
        refused(claims(backend: "sfu"), "backend", "\"sfu\" is not roomserver or janus")
        refused(claims(backend: "Janus"), "backend", "is not roomserver or janus")
        refused(claims(backend: nil), "backend", "missing")
        refused(claims(server: nil), "server", "missing")
        refused(claims(server: ""), "server", "empty")
        refused(claims(server: String(repeating: "a", count: 400)), "server", "longer than")
        refused(claims(room: "standup", backend: "janus"), "room", "not an AudioBridge room number")
        refused(claims(room: "0", backend: "janus"), "room", "not an AudioBridge room number")
        refused(claims(room: "-5", backend: "janus"), "room", "not an AudioBridge room number")
    }

    /// A placement claim of the wrong JSON type is a malformed token, named as such.
    func testWrongTypesAndTimesAreTokenErrors() throws {
        let header = Base64URL.encode(Array(#"{"alg":"EdDSA","kid":"svc","typ":"JWT"}"#.utf8))
        let payload = #"{"app":"acme","room":"standup","sub":"b","name":"b","grants":{"publish":true,"moderate":false},"exp":1800003600,"nbf":1799999940,"iat":1799999940,"backend":7,"server":"10.0.0.2:7700"}"#
        let input = header + "." + Base64URL.encode(Array(payload.utf8))
        let token = input + "." + Base64URL.encode(serviceKey.sign(Array(input.utf8)))
        XCTAssertThrowsError(try verifier(serviceKey.publicKey).placement(of: token)) {
            guard case .token(.malformed(let reason)) = $0 as? PlacementError else { return XCTFail("\($0)") }
            XCTAssertTrue(reason.contains("backend"), reason)
        }
        var expired = claims()
        expired.exp = now - 3600
        assertRefused(RoomToken.mint(claims: expired, keyID: "svc", signingKey: serviceKey), .token(.expired(at: now - 3600)))
        assertRefused("a.b", .token(.malformed("expected 3 dot-separated parts, found 2")))
    }

    /// roomserver verifies EdDSA tokens with its `[public_keys]`, and keeps HS256 keys and public
    /// keys apart: a key id is looked up only in its algorithm's table.
    func testRoomserverVerifiesEitherAlgorithm() throws {
        let fixed = now
        let verifier = RoomTokenVerifier(keys: ["k1": Array(repeating: 7, count: 32)], clock: { fixed })
        let both = RoomTokenVerifier(secretKeys: verifier.keys, publicKeys: ["svc": serviceKey.publicKey], clock: { fixed })
        let signed = RoomToken.mint(claims: claims(), keyID: "svc", signingKey: serviceKey)
        XCTAssertEqual(try both.verify(signed, room: "standup", wantsRole: .streamer).server, "10.0.0.2:7700")
        XCTAssertThrowsError(try verifier.verify(signed, room: "standup", wantsRole: .streamer)) {
            XCTAssertEqual($0 as? TokenError, .unknownKey("svc"))
        }
        let underHMACName = RoomToken.mint(claims: claims(), keyID: "k1", signingKey: serviceKey)
        XCTAssertThrowsError(try both.verify(underHMACName, room: "standup", wantsRole: .streamer)) {
            XCTAssertEqual($0 as? TokenError, .unknownKey("k1"))
        }
    }
}
