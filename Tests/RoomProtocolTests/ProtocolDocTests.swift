import FoundationEssentials
import RoomModel
import RoomProtocol
import XCTest

/// docs/protocol.md is the contract other implementations follow: every message type and
/// error code the code knows must appear in it.
final class ProtocolDocTests: XCTestCase {
    func testEveryTypeAndCodeIsDocumented() throws {
        let docURL = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/protocol.md")
        guard let data = try? Data(contentsOf: docURL) else { throw XCTSkip("docs/protocol.md not found at \(docURL.path)") }
        let doc = String(decoding: data, as: UTF8.self)
        XCTAssertTrue(doc.contains("protocol 1"))
        for name in SignalMessage.Body.allTypeNames {
            XCTAssertTrue(doc.contains("| `\(name)` |"), "message type \(name) has no table row")
        }
        let codes: [ErrorCode] = [
            .unsupportedVersion, .badSignature, .tokenExpired, .tokenNotYetValid, .wrongRoom, .unknownKey,
            .missingGrant, .malformedToken, .malformedMessage, .unknownType, .invalidField, .unexpectedMessage,
            .notJoined, .alreadyJoined, .notModerator, .unknownParticipant, .invalidState, .speakerLimit,
            .attributeLimit, .roomClosed, .rateLimited, .internalError,
        ]
        for code in codes {
            XCTAssertTrue(doc.contains("`\(code.rawValue)`"), "error code \(code) undocumented")
        }
    }
}
