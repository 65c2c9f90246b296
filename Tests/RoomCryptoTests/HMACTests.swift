import RoomCrypto
import RoomMedia
import XCTest

/// The crypto adapter against published test vectors, so a change of library (libsodium gave
/// way to libcrypto) or of its call shows here, not as tokens nobody can verify.
final class HMACTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }

    // RFC 4231 §4.2, test case 1.
    func testRFC4231Case1() {
        let mac = HMAC.sha256(key: [UInt8](repeating: 0x0B, count: 20), message: Array("Hi There".utf8))
        XCTAssertEqual(hex(mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    }

    // RFC 4231 §4.7, test case 6: a 131-byte key, longer than the hash block (hashed first).
    func testRFC4231Case6KeyLongerThanBlock() {
        let mac = HMAC.sha256(
            key: [UInt8](repeating: 0xAA, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        XCTAssertEqual(hex(mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    /// An empty key and an empty message are legal HMAC (the binding datagram path passes
    /// buffers that may be empty); the value is the well-known HMAC-SHA256("", "").
    func testEmptyKeyAndMessage() {
        XCTAssertEqual(hex(HMAC.sha256(key: [], message: [])), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    /// The in-place form the datagram path uses writes what the array form returns.
    func testInPlaceMatchesArrayForm() {
        let key: [UInt8] = Array(0 ..< 16), message: [UInt8] = Array(100 ..< 140)
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBytes { k in message.withUnsafeBytes { m in out.withUnsafeMutableBytes { HMAC.sha256(key: k, message: m, into: $0) } } }
        XCTAssertEqual(out, HMAC.sha256(key: key, message: message))
    }

    // RFC 2202 §3, HMAC-SHA1 test case 2 (STUN's MESSAGE-INTEGRITY).
    func testRFC2202SHA1Case2() {
        let mac = Array("what do ya want for nothing?".utf8).withUnsafeBytes { HMAC.sha1(key: Array("Jefe".utf8), data: $0) }
        XCTAssertEqual(hex(mac), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    }

    // RFC 6455 §1.3: the accept key's SHA-1 of the sample nonce and the GUID.
    func testSHA1OfTheWebSocketSample() {
        let input = Array("dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11".utf8)
        XCTAssertEqual(hex(Digest.sha1(input)), "b37a4f2cc0624f1690f64606cf385945b2bec4ea")
    }

    func testConstantTimeEquality() {
        XCTAssertTrue(ConstantTime.equal([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(ConstantTime.equal([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(ConstantTime.equal([1, 2, 3], [1, 2]))
        XCTAssertTrue(ConstantTime.equal([], []))
    }

    /// Keys differ from draw to draw and use every byte value over enough draws (a generator
    /// that never ran leaves zeros).
    func testRandomKeys() {
        let keys = (0 ..< 64).map { _ in SRTPMasterKey.random() }
        XCTAssertEqual(Set(keys).count, 64)
        XCTAssertGreaterThan(Set(keys.flatMap(\.bytes)).count, 200)
        XCTAssertNotEqual(MediaEncryption.random().uplink, MediaEncryption.random().uplink)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
