import XCTest
@testable import RoomSIP

/// The stream framing of SIP over TLS: messages split across reads and several in one read,
/// keep-alives between them, and the errors that lose a stream's framing for good.
final class SIPStreamFramerTests: XCTestCase {
    static let body = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\n"
    static let invite = "INVITE sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.1:5061;branch=z9hG4bK1\r\n"
        + "Content-Type: application/sdp\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
    static let options = "OPTIONS sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.1:5061;branch=z9hG4bK2\r\nl: 0\r\n\r\n"

    func messages(_ items: [SIPStreamFramer.Item]) -> [String] {
        items.compactMap { if case .message(let b) = $0 { String(decoding: b, as: UTF8.self) } else { nil } }
    }

    func testMessageSplitAtEveryByte() throws {
        var framer = SIPStreamFramer()
        var got: [String] = []
        for byte in Array(Self.invite.utf8) { got += messages(try framer.append([byte])) }
        XCTAssertEqual(got, [Self.invite])
        XCTAssertEqual(framer.bufferedByteCount, 0)
    }

    func testCoalescedMessagesAndKeepAlives() throws {
        var framer = SIPStreamFramer()
        let items = try framer.append(Array((Self.invite + "\r\n\r\n" + Self.options + "\r\n" + Self.invite.prefix(30)).utf8))
        XCTAssertEqual(items.count, 4)
        XCTAssertEqual(messages(items), [Self.invite, Self.options], "compact l: counts as Content-Length")
        XCTAssertEqual(items[1], .ping)
        XCTAssertEqual(items[3], .pong)
        XCTAssertEqual(messages(try framer.append(Array(Self.invite.dropFirst(30).utf8))), [Self.invite])
    }

    func testPingSplitInTheMiddleIsOnePing() throws {
        var framer = SIPStreamFramer()
        XCTAssertEqual(try framer.append(Array("\r\n\r".utf8)), [])
        XCTAssertEqual(try framer.append(Array("\n".utf8)), [.ping])
    }

    func testMissingContentLengthLosesTheFraming() throws {
        var framer = SIPStreamFramer()
        let bare = "OPTIONS sip:room@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TLS 127.0.0.1\r\n\r\n"
        XCTAssertThrowsError(try framer.append(Array(bare.utf8))) { XCTAssertEqual($0 as? SIPStreamFramer.FramingError, .missingContentLength) }
        // Nothing after it is taken: the stream must be closed.
        XCTAssertThrowsError(try framer.append(Array(Self.options.utf8)))
        framer.reset()
        XCTAssertEqual(messages(try framer.append(Array(Self.options.utf8))), [Self.options])
    }

    func testBadAndConflictingContentLengths() {
        for value in ["-1", "12a", "", "99999999999", "0x10"] {
            var framer = SIPStreamFramer()
            let text = "OPTIONS sip:a@b SIP/2.0\r\nContent-Length: \(value)\r\n\r\n"
            XCTAssertThrowsError(try framer.append(Array(text.utf8)), value) {
                guard case .badContentLength = $0 as? SIPStreamFramer.FramingError else { return XCTFail("\(value): \($0)") }
            }
        }
        var framer = SIPStreamFramer()
        XCTAssertThrowsError(try framer.append(Array("OPTIONS sip:a@b SIP/2.0\r\nContent-Length: 0\r\nl: 5\r\n\r\n".utf8)))
    }

    func testOversizeHeaderAndBodyAreRefusedBeforeTheyArrive() {
        var framer = SIPStreamFramer(headerLimit: 1024, bodyLimit: 2048)
        // A header that never ends: refused once it passes the budget, not buffered on.
        let endless = "OPTIONS sip:a@b SIP/2.0\r\n" + String(repeating: "X-Pad: 0123456789\r\n", count: 60)
        XCTAssertThrowsError(try framer.append(Array(endless.utf8))) { XCTAssertEqual($0 as? SIPStreamFramer.FramingError, .headerTooLong(limit: 1024)) }
        XCTAssertEqual(framer.bufferedByteCount, 0)
        // A body announced over the budget: refused at its header, before any of it comes.
        var second = SIPStreamFramer(headerLimit: 1024, bodyLimit: 2048)
        XCTAssertThrowsError(try second.append(Array("MESSAGE sip:a@b SIP/2.0\r\nContent-Length: 2049\r\n\r\n".utf8))) {
            XCTAssertEqual($0 as? SIPStreamFramer.FramingError, .bodyTooLong(length: 2049, limit: 2048))
        }
    }

    func testFoldedLineAndLowerCaseNamesAreRead() throws {
        var framer = SIPStreamFramer()
        let text = "OPTIONS sip:a@b SIP/2.0\r\nSubject: a\r\n content-length: 9\r\ncontent-LENGTH : 2\r\n\r\nok"
        XCTAssertEqual(messages(try framer.append(Array(text.utf8))), [text], "a folded line is not a header of its own")
    }
}
