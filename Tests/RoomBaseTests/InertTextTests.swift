import RoomBase
import XCTest

/// Names and ids from tokens reach log lines and terminals: they must not forge a line or
/// drive the terminal (issue 11: a display name with `\n<0>…` forged an emergency-priority
/// log line; ANSI escapes reached the operator's terminal).
final class InertTextTests: XCTestCase {
    func testLineBreaksAndEscapesBecomeVisible() {
        XCTAssertEqual(inertText("Eve\n<0>root logged in"), "Eve\\n<0>root logged in")
        XCTAssertEqual(inertText("a\r\nb"), "a\\r\\nb")
        XCTAssertEqual(inertText("\u{1B}[31mred\u{1B}[0m"), "\\x1B[31mred\\x1B[0m")
        XCTAssertEqual(inertText("bell\u{07}del\u{7F}"), "bell\\x07del\\x7F")
        XCTAssertEqual(inertText("nul\u{0}"), "nul\\x00")
        // C1 controls (CSI as one character), Unicode line separators, bidirectional overrides.
        XCTAssertEqual(inertText("\u{9B}31m"), "\\u{009B}31m")
        XCTAssertEqual(inertText("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}")
        XCTAssertEqual(inertText("admin\u{202E}txt.exe"), "admin\\u{202E}txt.exe")
        XCTAssertEqual(inertText("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}")
        for forged in ["x\ny", "\u{1B}]0;title\u{07}", "a\u{85}b"] {
            let safe = inertText(forged)
            XCTAssertFalse(safe.unicodeScalars.contains { $0.value < 0x20 || ($0.value >= 0x7F && $0.value < 0xA0) }, safe)
        }
    }

    func testOrdinaryTextPassesUnchanged() {
        for text in ["Meeting Room 3", "Jürgen Groß", "会议室", "Zoë 👋", "tab\tseparated", "", "back\\slash"] {
            XCTAssertEqual(inertText(text), text)
        }
    }
}
