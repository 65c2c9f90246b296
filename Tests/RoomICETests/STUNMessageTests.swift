import XCTest
@testable import RoomICE

final class STUNMessageTests: XCTestCase {
    static func hex(_ s: String) -> [UInt8] {
        let digits = s.filter { $0.isHexDigit }
        var out: [UInt8] = []
        var i = digits.startIndex
        while i < digits.endIndex {
            let j = digits.index(i, offsetBy: 2)
            out.append(UInt8(digits[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// RFC 5769 §2.1, "Sample Request" (ICE attributes, USERNAME padded with spaces).
    static let rfc5769Request = hex("""
        00 01 00 58 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 10 53 54 55 4e 20 74 65 73 74 20 63 6c 69 65 6e 74
        00 24 00 04 6e 00 01 ff 80 29 00 08 93 2f f9 b1 51 26 3b 36
        00 06 00 09 65 76 74 6a 3a 68 36 76 59 20 20 20
        00 08 00 14 9a ea a7 0c bf d8 cb 56 78 1e f2 b5 b2 d3 f2 49 c1 b5 71 a2
        80 28 00 04 e5 7a 3b cf
        """)

    /// RFC 5769 §2.2, "Sample IPv4 Response": XOR-MAPPED-ADDRESS 192.0.2.1:32853.
    static let rfc5769Response = hex("""
        01 01 00 3c 21 12 a4 42 b7 e7 a7 01 bc 34 d6 86 fa 87 df ae
        80 22 00 0b 74 65 73 74 20 76 65 63 74 6f 72 20
        00 20 00 08 00 01 a1 47 e1 12 a6 43
        00 08 00 14 2b 91 f5 99 fd 9e 90 c3 8c 74 89 f9 2a f9 ba 53 f0 6b e7 d7
        80 28 00 04 c0 7d 4c 96
        """)

    func testCRC32IsTheISOHDLCOne() {
        XCTAssertEqual(Array("123456789".utf8).withUnsafeBytes { crc32Raw($0) }, 0xCBF4_3926)
    }

    func testRFC5769RequestParsesWithAValidFingerprint() throws {
        let (m, checks) = try STUNMessage.parse(Self.rfc5769Request)
        XCTAssertEqual(m.messageClass, .request)
        XCTAssertEqual(m.method, STUNMessage.bindingMethod)
        XCTAssertTrue(checks.hasFingerprint)
        XCTAssertTrue(checks.fingerprintValid)
        XCTAssertTrue(checks.hasIntegrity)
        XCTAssertFalse(checks.integrityValid, "no key given: not claimed valid")
        XCTAssertEqual(m.username, "evtj:h6vY")
        XCTAssertEqual(m.priority, 0x6E00_01FF)
        XCTAssertEqual(m.iceRole?.controlling, false)
        XCTAssertEqual(m.iceRole?.tieBreaker, 0x932F_F9B1_5126_3B36)
        XCTAssertEqual(m.attribute(.software).map { String(decoding: $0.value, as: UTF8.self) }, "STUN test client")
        XCTAssertTrue(Self.rfc5769Request.withUnsafeBytes { raw in STUNMessage.looksLikeSTUN(raw) })
    }

    func testRFC5769ResponseCarriesTheMappedAddress() throws {
        let (m, checks) = try STUNMessage.parse(Self.rfc5769Response)
        XCTAssertEqual(m.messageClass, .success)
        XCTAssertTrue(checks.fingerprintValid)
        XCTAssertEqual(m.xorMappedAddress, STUNAddress(ip: [192, 0, 2, 1], port: 32853))
    }

    /// RFC 5769's MESSAGE-INTEGRITY, with OpenSSL's HMAC-SHA1 and the vectors' password.
    func testRFC5769IntegrityVerifiesWithTheRealHMAC() throws {
        let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)
        for sample in [Self.rfc5769Request, Self.rfc5769Response] {
            let good = try STUNMessage.parse(sample, key: password, hmac: STUNMessage.hmacSHA1)
            XCTAssertTrue(good.checks.integrityValid)
            let bad = try STUNMessage.parse(sample, key: Array("VOkJxbRl1RmTxUk/WvJxBu".utf8), hmac: STUNMessage.hmacSHA1)
            XCTAssertFalse(bad.checks.integrityValid)
        }
        // What this codec signs from the request's attributes, the same HMAC verifies.
        let (again, _) = try STUNMessage.parse(Self.rfc5769Request)
        let bytes = again.serialize(key: password, hmac: STUNMessage.hmacSHA1)
        XCTAssertTrue(try STUNMessage.parse(bytes, key: password, hmac: STUNMessage.hmacSHA1).checks.integrityValid)
    }

    func testMessagesRoundTripAndTheFingerprintCatchesAnyFlippedBit() throws {
        let txid: [UInt8] = Array(1...12)
        let message = STUNMessage(class: .success, transactionID: txid, attributes: [
            .xorMappedAddress(STUNAddress(ip: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], port: 5000), transactionID: txid),
            .username("ab:cdefg"), .priority(ICEPriorityForTests.host), .iceControlling(42), .useCandidate,
        ])
        let bytes = message.serialize()
        XCTAssertEqual(bytes.count % 4, 0)
        let (parsed, checks) = try STUNMessage.parse(bytes)
        XCTAssertEqual(parsed, message)
        XCTAssertTrue(checks.fingerprintValid)
        XCTAssertEqual(parsed.xorMappedAddress?.description, "[2001:db8:0:0:0:0:0:1]:5000")
        XCTAssertTrue(parsed.useCandidate)
        XCTAssertEqual(parsed.iceRole?.controlling, true)

        for bit in stride(from: 20 * 8, to: (bytes.count - 8) * 8, by: 7) {
            var damaged = bytes
            damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            if let (_, c) = try? STUNMessage.parse(damaged) {
                XCTAssertFalse(c.fingerprintValid, "bit \(bit) flipped and the fingerprint still matched")
            }
        }
    }

    func testIntegrityUsesTheGivenHMACOverTheAdjustedHeader() throws {
        // A stand-in keyed function (not SHA-1): what is checked here is which bytes it covers —
        // the message up to MESSAGE-INTEGRITY with the length field counting it.
        let mac: STUNIntegrity = { key, data in
            var acc = [UInt8](repeating: 0, count: 20)
            for (i, b) in data.enumerated() { acc[i % 20] = acc[i % 20] &* 31 &+ b &+ key[i % key.count] }
            return acc
        }
        let message = STUNMessage(class: .request, transactionID: Array(repeating: 7, count: 12),
                                  attributes: [.username("x:y"), .priority(1), .iceControlled(9)])
        let key = Array("password-password-01".utf8)
        let bytes = message.serialize(key: key, hmac: mac)
        let good = try STUNMessage.parse(bytes, key: key, hmac: mac)
        XCTAssertTrue(good.checks.integrityValid)
        XCTAssertTrue(good.checks.fingerprintValid)
        let wrongKey = try STUNMessage.parse(bytes, key: Array("other".utf8), hmac: mac)
        XCTAssertFalse(wrongKey.checks.integrityValid)
        var tampered = bytes
        tampered[26] ^= 1   // inside USERNAME
        let t = try STUNMessage.parse(tampered, key: key, hmac: mac)
        XCTAssertFalse(t.checks.integrityValid)
    }

    func testMalformedDatagramsNameTheField() {
        func field(_ bytes: [UInt8]) -> String? {
            do { _ = try STUNMessage.parse(bytes); return nil }
            catch { return error.field }
        }
        XCTAssertEqual(field([0, 1, 0, 0]), "header")
        var noCookie = Self.rfc5769Response; noCookie[4] = 0
        XCTAssertEqual(field(noCookie), "magic cookie")
        XCTAssertEqual(field(Array(Self.rfc5769Response.dropLast(4))), "length")
        var overrun = Self.rfc5769Response; overrun[23] = 0xFF
        XCTAssertEqual(field(overrun), "attribute 0x8022")
        XCTAssertEqual(field([0x80] + Self.rfc5769Response.dropFirst()), "header")
        // Every prefix and every single-byte length corruption: refused or parsed, never a trap.
        for n in 0...Self.rfc5769Request.count { _ = field(Array(Self.rfc5769Request[0..<n])) }
        for i in 0..<Self.rfc5769Request.count { var b = Self.rfc5769Request; b[i] = 0xFF; _ = field(b) }
    }
}

enum ICEPriorityForTests { static let host: UInt32 = 2_130_706_431 }
