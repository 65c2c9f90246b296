import RoomCrypto
import XCTest

/// Ed25519 through libcrypto against RFC 8032's published vector, and the key files an installer
/// makes with openssl: what placement in the token rests on.
final class Ed25519Tests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }
    private func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i ..< j], radix: 16)!)
            i = j
        }
        return out
    }

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
        let other = try Ed25519PublicKey(raw: bytes("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"))
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
