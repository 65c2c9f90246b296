import RoomSettings
import XCTest

final class INIParserTests: XCTestCase {
    func testEntriesWithLineNumbersCommentsAndSections() throws {
        let text = """
        # leading comment
        ; another comment

        [one]
        a = 1
          b=two words   # trailing comment
        c = x;y ; semicolon inside a word stays, after a blank it starts a comment

        [ two ]
        a =
        """
        let entries = try INIParser.parse(text: text, file: "t.conf")
        XCTAssertEqual(entries, [
            INIEntry(section: "one", key: "a", value: "1", line: 5, sectionLine: 4),
            INIEntry(section: "one", key: "b", value: "two words", line: 6, sectionLine: 4),
            INIEntry(section: "one", key: "c", value: "x;y", line: 7, sectionLine: 4),
            INIEntry(section: "two", key: "a", value: "", line: 10, sectionLine: 9),
        ])
        XCTAssertEqual(entries[1].qualifiedKey, "one.b")
    }

    func testCRLFAndBOM() throws {
        let entries = try INIParser.parse(text: "\u{FEFF}[s]\r\nk = v\r\n", file: "f")
        XCTAssertEqual(entries, [INIEntry(section: "s", key: "k", value: "v", line: 2, sectionLine: 1)])
    }

    private func assertError(_ text: String, line: Int?, key: String?, contains fragment: String,
                             file: StaticString = #filePath, sourceLine: UInt = #line) {
        do {
            _ = try INIParser.parse(text: text, file: "x.conf")
            XCTFail("expected an error", file: file, line: sourceLine)
        } catch {
            XCTAssertEqual(error.file, "x.conf", file: file, line: sourceLine)
            XCTAssertEqual(error.line, line, file: file, line: sourceLine)
            XCTAssertEqual(error.key, key, file: file, line: sourceLine)
            XCTAssertTrue(error.message.contains(fragment), "\"\(error.message)\" lacks \"\(fragment)\"", file: file, line: sourceLine)
        }
    }

    func testSyntaxErrors() {
        assertError("k = v", line: 1, key: "k", contains: "outside of any section")
        assertError("[s]\n[broken", line: 2, key: nil, contains: "malformed section header")
        assertError("[]", line: 1, key: nil, contains: "invalid section name")
        assertError("[s]\njust words", line: 2, key: nil, contains: "expected \"key = value\"")
        assertError("[s]\n= v", line: 2, key: nil, contains: "missing key")
        assertError("[s]\nbad key = v", line: 2, key: nil, contains: "invalid key name \"bad key\"")
    }

    func testDuplicateKeyNamesFirstLine() {
        assertError("[s]\na = 1\n[t]\na = 2\n[s]\na = 3", line: 6, key: "s.a", contains: "duplicate key (first set on line 2)")
    }

    func testConfigErrorDescription() {
        let e = ConfigError(file: "board/sim/board.conf", line: 14, key: "audio.rate",
                            message: "44100 is not supported (8000, 16000, 32000 or 48000)")
        XCTAssertEqual(e.description, "board/sim/board.conf:14: audio.rate: 44100 is not supported (8000, 16000, 32000 or 48000)")
        XCTAssertEqual(ConfigError(file: "f", line: nil, key: "board.name", message: "missing (required)").description,
                       "f: board.name: missing (required)")
        XCTAssertEqual(ConfigError(file: "f", line: 3, key: nil, message: "m").description, "f:3: m")
    }
}
