import RoomSystem
import XCTest

/// The one option parser (issue 28): GNU conventions, errors that name the option.
final class CommandLineParserTests: XCTestCase {
    let table = [
        CommandOption("--loss", "PCT", help: "drop PCT %"),
        CommandOption("--gain", "DB", help: "gain"),
        CommandOption("--json", help: "JSON output"),
        CommandOption("--help", aliases: ["-h"], help: "help"),
    ]

    private func parse(_ args: [String], operands: Bool = false) throws(CommandLineUsageError) -> ParsedCommandLine {
        try CommandLineParser.parse(args, options: table, operands: operands)
    }

    func testBothSpellingsOfAValueFlagsAndTheEndOfOptions() throws {
        let p = try parse(["--loss", "10", "--gain=-3", "--json", "-h", "--", "--loss", "x"], operands: true)
        XCTAssertEqual(p.options.map(\.name), ["--loss", "--gain", "--json", "--help"])
        XCTAssertEqual(p.options.map(\.value), ["10", "-3", nil, nil])
        XCTAssertEqual(p.operands, ["--loss", "x"], "after --, nothing is an option")
        XCTAssertEqual(try parse(["--gain", "-3"]).options.first?.value, "-3", "a value may start with a dash")
        XCTAssertEqual(try parse(["--loss="]).options.first?.value, "", "an empty value is the option's to judge")
    }

    func testUsageErrorsNameTheOption() {
        func message(_ args: [String], operands: Bool = false) -> String? {
            do { _ = try parse(args, operands: operands); return nil } catch { return error.message }
        }
        XCTAssertEqual(message(["--los", "1"]), "unknown option '--los'")
        XCTAssertEqual(message(["--los=1"]), "unknown option '--los'")
        XCTAssertEqual(message(["--loss"]), "--loss needs PCT")
        XCTAssertEqual(message(["--json=yes"]), "--json takes no value")
        XCTAssertEqual(message(["stray"]), "unexpected argument 'stray'")
        XCTAssertNil(message(["stray", "-"], operands: true))
        XCTAssertEqual(CommandLineUsageError("--loss needs PCT").text(program: "roomproxy"),
                       "roomproxy: --loss needs PCT\nTry 'roomproxy --help' for the options.")
        XCTAssertEqual(CommandLineUsageError.exitCode, 2)
    }

    func testHelpComesFromTheTable() {
        let text = CommandLineParser.help(table, column: 14)
        XCTAssertEqual(text.split(separator: "\n").first, "  --loss PCT  drop PCT %")
        XCTAssertTrue(text.contains("  --json      JSON output"))
        let long = CommandLineParser.help([CommandOption("--a-very-long-option", "VALUE", help: "x\ny")], column: 10)
        XCTAssertEqual(long, "  --a-very-long-option VALUE\n          x\n          y", "a long head puts the help under it")
    }
}
