@testable import RoomBase
import XCTest

final class Base64Tests: XCTestCase {
    // RFC 4648 §10 test vectors.
    let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    func testStandardVectors() {
        for (plain, encoded) in vectors {
            XCTAssertEqual(Base64.encode(Array(plain.utf8)), encoded)
            XCTAssertEqual(Base64.decode(encoded), Array(plain.utf8), encoded)
        }
    }

    func testURLVectorsHaveNoPadding() {
        for (plain, encoded) in vectors {
            let unpadded = encoded.replacingOccurrences(of: "=", with: "")
            XCTAssertEqual(Base64URL.encode(Array(plain.utf8)), unpadded)
            XCTAssertEqual(Base64URL.decode(unpadded), Array(plain.utf8), unpadded)
        }
    }

    func testURLAlphabetUsesDashAndUnderscore() {
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF]), "-_8")
        XCTAssertEqual(Base64.encode([0xFB, 0xFF]), "+/8=")
        XCTAssertEqual(Base64URL.decode("-_8"), [0xFB, 0xFF])
        XCTAssertNil(Base64URL.decode("+/8"), "standard alphabet is not base64url")
        XCTAssertNil(Base64.decode("-_8="), "base64url alphabet is not standard base64")
    }

    func testRoundTripEveryLength() {
        var generator = SystemRandomNumberGenerator()
        for length in 0 ... 70 {
            let bytes = (0 ..< length).map { _ in UInt8.random(in: 0 ... 255, using: &generator) }
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes)
        }
    }

    func testStrictDecodingRefusesNonCanonicalInput() {
        XCTAssertNil(Base64URL.decode("Zg=="), "padding is not allowed in base64url")
        XCTAssertNil(Base64URL.decode("Zh"), "non-zero leftover bits: a second spelling of \"f\"")
        XCTAssertNil(Base64.decode("Zh=="))
        XCTAssertNil(Base64URL.decode("Z"), "one lone character cannot hold a byte")
        XCTAssertNil(Base64URL.decode("Zm9v YmFy"), "whitespace")
        XCTAssertNil(Base64URL.decode("Zm9v\n"))
        XCTAssertNil(Base64URL.decode("Zm9*"))
        XCTAssertNil(Base64.decode("Zg"), "standard base64 needs its padding")
        XCTAssertNil(Base64.decode("Zg="))
        XCTAssertNil(Base64.decode("Z==="))
        XCTAssertNil(Base64.decode("=Zg="), "padding only at the end")
    }
}
