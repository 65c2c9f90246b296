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

    func testOptionsAndOperandsInAnyOrder() throws {
        let p = try parse(["a", "--loss", "1", "b", "--json", "c"], operands: true)
        XCTAssertEqual(p.options.map(\.name), ["--loss", "--json"])
        XCTAssertEqual(p.operands, ["a", "b", "c"])
        XCTAssertFalse(p.optionsEnded)
        XCTAssertTrue(try parse(["a", "--", "b"], operands: true).optionsEnded)
    }

    /// `volume 7 -6`: a number is an operand, minus and all (Python's argparse does the same),
    /// unless the table has an option that looks like a number.
    func testNumbersAreOperands() throws {
        XCTAssertEqual(try parse(["-6", "7", "-0.5", "-1e3"], operands: true).operands, ["-6", "7", "-0.5", "-1e3"])
        XCTAssertEqual(try parse(["--gain", "-6", "-6"], operands: true).operands, ["-6"], "the first -6 is --gain's value")
        do {
            _ = try parse(["-6"])
            XCTFail("no operands allowed")
        } catch {
            XCTAssertEqual(error.message, "unexpected argument '-6'")
        }
        let numbered = [CommandOption("--one", aliases: ["-1"], help: "")]
        XCTAssertEqual(try CommandLineParser.parse(["-1"], options: numbered, operands: true).options.map(\.name), ["--one"],
                       "a table with an option that looks like a number reads them as options")
        XCTAssertThrowsError(try CommandLineParser.parse(["-2"], options: numbered, operands: true)) { error in
            XCTAssertEqual((error as? CommandLineUsageError)?.message, "unknown option '-2'")
        }
    }

    /// A program with subcommands (roomctl): its global options, then the subcommand and what
    /// follows, unparsed, for the subcommand's own table.
    func testStopAtOperandLeavesTheRestUnparsed() throws {
        let p = try CommandLineParser.parse(["--json", "--loss=3", "kick", "--loss", "--because", "-6", "--", "x"], options: table, stopAtOperand: true)
        XCTAssertEqual(p.options.map(\.name), ["--json", "--loss"])
        XCTAssertEqual(p.operands, ["kick", "--loss", "--because", "-6", "--", "x"])
        XCTAssertFalse(p.optionsEnded, "the -- after the subcommand is the subcommand's")
        let ended = try CommandLineParser.parse(["--json", "--", "kick", "--loss"], options: table, stopAtOperand: true)
        XCTAssertEqual(ended.operands, ["kick", "--loss"])
        XCTAssertTrue(ended.optionsEnded, "a -- before the subcommand ends the options for its arguments too")
        XCTAssertEqual(try CommandLineParser.parse(["-h"], options: table, stopAtOperand: true).operands, [])
        XCTAssertThrowsError(try CommandLineParser.parse(["--bogus", "kick"], options: table, stopAtOperand: true)) { error in
            XCTAssertEqual((error as? CommandLineUsageError)?.message, "unknown option '--bogus'")
        }
    }

    func testHelpComesFromTheTable() {
        let text = CommandLineParser.help(table, column: 14)
        XCTAssertEqual(text.split(separator: "\n").first, "  --loss PCT  drop PCT %")
        XCTAssertTrue(text.contains("  --json      JSON output"))
        XCTAssertTrue(text.contains("  -h, --help  help"), "the aliases come first, from the table:\n\(text)")
        let long = CommandLineParser.help([CommandOption("--a-very-long-option", "VALUE", help: "x\ny")], column: 10)
        XCTAssertEqual(long, "  --a-very-long-option VALUE\n          x\n          y", "a long head puts the help under it")
    }
}
