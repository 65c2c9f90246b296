import Foundation
import RoomCrypto
import RoomModel
import RoomProtocol
import XCTest

/// Key material in locked memory (docs/security.md, "Secrets in memory").
final class SecretBytesTests: XCTestCase {
    /// Locked memory of this process in kB (`VmLck` in /proc/self/status).
    static func lockedKB(pid: String = "self") throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmLck:") })
        return try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    func testTheBytesAreLockedWhileHeldAndReleasedAfter() throws {
        // Relative figures: other tests' servers in this process hold locked keys of their own.
        let before = try Self.lockedKB()
        var secret: SecretBytes? = SecretBytes([UInt8](repeating: 7, count: 32))
        let held = try Self.lockedKB()
        XCTAssertGreaterThanOrEqual(held - before, 4, "a page locked for the key")
        XCTAssertEqual(secret?.count, 32)
        secret = nil
        XCTAssertLessThanOrEqual(try Self.lockedKB(), held - 4, "unlocked (and wiped) when dropped")
    }

    func testComparedByContentAndNeverPrinted() {
        let a = SecretBytes(Array(0 ..< 32)), b = SecretBytes(Array(0 ..< 32)), c = SecretBytes(Array(1 ... 32))
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a, c)
        XCTAssertNotEqual(a, SecretBytes(Array(0 ..< 31)))
        XCTAssertEqual("\(a)", "SecretBytes(32 bytes)")
        XCTAssertEqual(a.withUnsafeBytes { Array($0) }, Array(0 ..< 32))
        var transient: [UInt8] = Array(1 ... 40)
        ConstantTime.wipe(&transient)
        XCTAssertEqual(transient, [UInt8](repeating: 0, count: 40))
    }

    /// A key minted and verified from locked memory gives the same token as from an array.
    func testTokensSignedWithALockedKeyAreTheSame() throws {
        let bytes = [UInt8](repeating: 3, count: 32)
        let claims = RoomTokenClaims(app: "a", room: "r", sub: "u", name: "u", grants: RoomGrants(publish: true, moderate: false),
                                     exp: 2_000_000_000, nbf: 0, iat: 0)
        let fromArray = RoomToken.mint(claims: claims, keyID: "k", secret: bytes)
        XCTAssertEqual(RoomToken.mint(claims: claims, keyID: "k", secret: SecretBytes(bytes)), fromArray)
        let verifier = RoomTokenVerifier(secretKeys: ["k": SecretBytes(bytes)], clock: { 1_000 })
        XCTAssertEqual(try verifier.verify(fromArray, room: "r", wantsRole: .streamer).sub, "u")
    }
}
