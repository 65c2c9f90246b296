import RoomCrypto
import XCTest

/// Ed25519 through libcrypto against RFC 8032's published vector, and the key files an installer
/// makes with openssl: what placement in the token rests on.
final class Ed25519Tests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }
    /// RFC 8032 §7.1 TEST 1's secret key as `openssl genpkey` writes it (PKCS #8), and its public
    /// key as `openssl pkey -pubout` does.
    static let privatePEM = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n"
    static let publicPEM = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n"

    func testRFC8032Test1() throws {
        let key = try Ed25519PrivateKey(pem: Self.privatePEM)
        XCTAssertEqual(hex(key.publicKey.raw), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let signature = key.sign([])
        XCTAssertEqual(hex(signature), "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        let publicKey = try Ed25519PublicKey(pem: Self.publicPEM)
        XCTAssertEqual(publicKey, key.publicKey)
        XCTAssertTrue(publicKey.verify(signature: signature, message: []))
    }

    func testAChangedMessageOrSignatureOrKeyDoesNotVerify() throws {
        let key = try Ed25519PrivateKey(pem: Self.privatePEM)
        let message = Array("room standup on 127.0.0.1:7700".utf8)
        let signature = key.sign(message)
        XCTAssertTrue(key.publicKey.verify(signature: signature, message: message))
        var changed = message
        changed[changed.count - 1] ^= 1
        XCTAssertFalse(key.publicKey.verify(signature: signature, message: changed))
        var badSignature = signature
        badSignature[10] ^= 0x40
        XCTAssertFalse(key.publicKey.verify(signature: badSignature, message: message))
        XCTAssertFalse(key.publicKey.verify(signature: Array(signature.dropLast()), message: message))
        // RFC 8032 §7.1 TEST 2's public key: another signer.
        let other = try Ed25519PublicKey(raw: [
            0x3d, 0x40, 0x17, 0xc3, 0xe8, 0x43, 0x89, 0x5a, 0x92, 0xb7, 0x0a, 0xa7, 0x4d, 0x1b, 0x7e, 0xbc,
            0x9c, 0x98, 0x2c, 0xcf, 0x2e, 0xc4, 0x96, 0x8c, 0xc0, 0xcd, 0x55, 0xf1, 0x2a, 0xf4, 0x66, 0x0c,
        ])
        XCTAssertFalse(other.verify(signature: signature, message: message))
    }

    func testKeyFilesOfTheWrongKindAreRefusedWithWhatToRun() {
        XCTAssertThrowsError(try Ed25519PublicKey(pem: Self.privatePEM)) {
            XCTAssertTrue("\($0)".contains("openssl pkey -in KEY -pubout"), "\($0)")
        }
        XCTAssertThrowsError(try Ed25519PrivateKey(pem: Self.publicPEM)) {
            XCTAssertTrue("\($0)".contains("openssl genpkey -algorithm ed25519"), "\($0)")
        }
        XCTAssertThrowsError(try Ed25519PublicKey(pem: "not a key"))
        XCTAssertThrowsError(try Ed25519PublicKey(raw: [1, 2, 3]))
    }
}
