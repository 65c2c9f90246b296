import Foundation
@testable import RoomBase
@testable import RoomSettings
import XCTest

/// The man pages in docs/man against what the programs and the key tables say (docs/man/README.md):
/// - every `--option` of `roomd --help`, `roomserver --help`, `roomserver mint-token --help`,
///   `roomctl --help` and `roomctl SUBCOMMAND --help` is the tag of an entry in its page, with
///   its argument as the help writes it (`--config PATH`), and every option a page documents
///   is one the program knows;
/// - every roomctl subcommand has an entry in COMMANDS whose tag is its usage line from
///   `roomctl SUBCOMMAND --help`, word for word, and COMMANDS has no other entry;
/// - every exit status of `roomctl --help` is an entry of roomctl(1)'s EXIT STATUS;
/// - every key of roomd.conf (`ApplianceConfiguration.schema`, docs/roomd.conf.example) is an
///   entry of roomd.conf(5), and the run-time settings' keys are named there; the same for
///   roomserver's keys (its table in RoomServerConfiguration.swift, docs/roomserver.conf.example)
///   in roomserver(8);
/// - each page's .TH names the page and the current version, its NAME line is what
///   apropos reads, it is ASCII, options are written with `\-`, and groff renders it without a
///   warning (`groff -man -Tutf8 -ww -z`; Debian package groff-base).
final class ManPageTests: ProcessTestCase {
    static let pages = ["roomd.8", "roomctl.1", "roomd.conf.5", "roomserver.8"]

    // MARK: options and commands

    func testRoomdPageDocumentsEveryOption() throws {
        let help = try helpText("roomd", ["--help"])
        let page = try ManPage.load("roomd.8")
        checkOptions(help: help, helpName: "roomd --help", page: page)
        checkNoStaleOptions(page: page, sections: ["OPTIONS"], known: ManPage.longOptions(in: help), helpName: "roomd --help")
    }

    func testRoomserverPageDocumentsEveryOption() throws {
        let help = try helpText("roomserver", ["--help"])
        let mintHelp = try helpText("roomserver", ["mint-token", "--help"])
        let page = try ManPage.load("roomserver.8")
        checkOptions(help: help, helpName: "roomserver --help", page: page)
        checkOptions(help: mintHelp, helpName: "roomserver mint-token --help", page: page)
        checkNoStaleOptions(page: page, sections: ["OPTIONS"],
                            known: ManPage.longOptions(in: help).union(ManPage.longOptions(in: mintHelp)),
                            helpName: "roomserver --help")
    }

    func testRoomctlPageDocumentsEveryOptionCommandAndExitStatus() throws {
        let help = try helpText("roomctl", ["--help"])
        let page = try ManPage.load("roomctl.1")
        checkOptions(help: help, helpName: "roomctl --help", page: page)

        let subcommands = ManPage.block(in: help, after: "Subcommands:").compactMap { $0.split(separator: " ").first.map(String.init) }
        XCTAssertGreaterThan(subcommands.count, 20, "no subcommand list found in roomctl --help:\n\(help)")
        let commandTags = page.tags(in: ["COMMANDS"])
        var known = ManPage.longOptions(in: help)
        for name in subcommands {
            let subHelp = try helpText("roomctl", [name, "--help"])
            let usage = subHelp.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertTrue(usage.hasPrefix("usage: roomctl "), "roomctl \(name) --help: no usage line:\n\(subHelp)")
            let synopsis = ManPage.squeezed(String(usage.dropFirst("usage: roomctl ".count)))
            XCTAssertTrue(commandTags.contains(synopsis),
                          "roomctl.1: COMMANDS has no entry tagged \"\(synopsis)\" (the usage line of `roomctl \(name) --help`)")
            checkOptions(help: subHelp, helpName: "roomctl \(name) --help", page: page)
            known.formUnion(ManPage.longOptions(in: subHelp))
        }
        for tag in commandTags {
            let name = tag.split(separator: " ").first.map(String.init) ?? ""
            XCTAssertTrue(subcommands.contains(name), "roomctl.1: COMMANDS documents \"\(name)\", which roomctl --help does not list")
        }
        checkNoStaleOptions(page: page, sections: ["OPTIONS", "COMMANDS"], known: known, helpName: "roomctl --help")

        // "Exit status: 0 ok, 1 refused by roomd (...), 2 usage, ... 69 roomd not reachable."
        let statusText = help.components(separatedBy: "Exit status:").dropFirst().first ?? ""
        let codes = statusText.replacingOccurrences(of: "\n", with: " ").split(separator: ",")
            .compactMap { $0.split(separator: " ").first.flatMap { Int($0) } }
        XCTAssertTrue(codes.contains(0) && codes.count >= 4, "no exit statuses found in roomctl --help:\n\(help)")
        let statusTags = page.tags(in: ["EXIT STATUS"])
        for code in codes {
            XCTAssertTrue(statusTags.contains(String(code)), "roomctl.1: EXIT STATUS has no entry for \(code) (roomctl --help lists it)")
        }
    }

    // MARK: configuration keys

    func testRoomdConfPageDocumentsEveryKey() throws {
        let page = try ManPage.load("roomd.conf.5")
        let schema = ApplianceConfiguration.schema.flatMap { s in s.keys.map { s.name + "." + $0 } }
        XCTAssertGreaterThan(schema.count, 10)
        let example = try INIParser.parse(text: String(contentsOfFile: SimCard.repoRoot + "/docs/roomd.conf.example", encoding: .utf8),
                                          file: "docs/roomd.conf.example").map(\.qualifiedKey)
        let tags = page.tags(in: ["KEYS"]).map { $0.split(separator: " ").first.map(String.init) ?? "" }
        for key in schema {
            XCTAssertTrue(tags.contains(key), "roomd.conf.5: KEYS has no entry for \(key) (ApplianceConfiguration.schema)")
        }
        for key in example {
            XCTAssertTrue(tags.contains(key), "roomd.conf.5: KEYS has no entry for \(key) (docs/roomd.conf.example)")
        }
        for tag in tags {
            XCTAssertTrue(schema.contains(tag), "roomd.conf.5: KEYS documents \(tag), which ApplianceConfiguration.schema does not have")
        }
        for key in RuntimeSettings.schema.flatMap({ s in s.keys.map { s.name + "." + $0 } }) {
            XCTAssertTrue(ManPage.contains(page.text, term: key), "roomd.conf.5: the run-time settings' key \(key) is not named (RuntimeSettings.schema)")
        }
    }

    func testRoomserverPageDocumentsEveryConfigurationKey() throws {
        let page = try ManPage.load("roomserver.8")
        // RoomServerKit is not a dependency of this test target: read its key table from the source.
        let sourcePath = SimCard.repoRoot + "/Sources/RoomServerKit/RoomServerConfiguration.swift"
        let source = try String(contentsOfFile: sourcePath, encoding: .utf8)
        let table = source.components(separatedBy: "static let sections").dropFirst().first?.components(separatedBy: "\n    ]").first ?? ""
        var keys: [String] = []
        var sections: [String] = []
        for line in table.split(separator: "\n") {
            // ("server", ["listen", "media", "log_level", "token_leeway"]),
            let quoted = line.split(separator: "\"", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            guard let section = quoted.first else { continue }
            sections.append(section)
            keys += quoted.dropFirst().map { section + "." + $0 }
        }
        XCTAssertTrue(sections.contains("server") && keys.count > 5,
                      "could not read the key table (`static let sections`) of \(sourcePath); ManPageTests must learn its new shape")
        let example = try INIParser.parse(text: String(contentsOfFile: SimCard.repoRoot + "/docs/roomserver.conf.example", encoding: .utf8),
                                          file: "docs/roomserver.conf.example").filter { $0.section != "keys" }.map(\.qualifiedKey)
        let tags = page.tags(in: ["CONFIGURATION"]).map { $0.split(separator: " ").first.map(String.init) ?? "" }
        for key in keys + example {
            XCTAssertTrue(tags.contains(key), "roomserver.8: CONFIGURATION has no entry for \(key)")
        }
        for section in sections where !keys.contains(where: { $0.hasPrefix(section + ".") }) {
            // A section of free-form keys (`[keys]`: kid = APP:hex:SECRET).
            XCTAssertTrue(tags.contains { $0.hasPrefix(section + ".") }, "roomserver.8: CONFIGURATION has no entry for [\(section)]")
        }
        // Sections of free-form keys ([keys], [public_keys], [placement]) document one pattern each.
        let freeForm = sections.filter { section in !keys.contains(where: { $0.hasPrefix(section + ".") }) }
        for tag in tags where !freeForm.contains(where: { tag.hasPrefix($0 + ".") }) {
            XCTAssertTrue(keys.contains(tag), "roomserver.8: CONFIGURATION documents \(tag), which \(sourcePath) does not have")
        }
    }

    // MARK: form

    func testPagesHaveHeaderNameLineAndEscapedMinus() throws {
        for file in Self.pages {
            let page = try ManPage.load(file)
            let stem = String(file[..<file.lastIndex(of: ".")!])
            let section = String(file[file.index(after: file.lastIndex(of: ".")!)...])
            XCTAssertEqual(page.header.count, 5, "\(file): .TH needs NAME SECTION DATE SOURCE MANUAL")
            if page.header.count == 5 {
                XCTAssertEqual(page.header[0], stem.uppercased(), "\(file): .TH title")
                XCTAssertEqual(page.header[1], section, "\(file): .TH section")
                XCTAssertNotNil(page.header[2].wholeMatch(of: #/\d{4}-\d{2}-\d{2}/#), "\(file): .TH date is not YYYY-MM-DD")
                XCTAssertEqual(page.header[3], "roomd \(roomdVersion)", "\(file): .TH source must name the current version (Sources/RoomBase/Version.swift)")
            }
            // apropos/mandb read "name \- description" from the first line of NAME.
            let nameLine = page.rawLines.drop { $0 != ".SH NAME" }.dropFirst().first ?? ""
            XCTAssertTrue(nameLine.hasPrefix(stem + " \\- ") && nameLine.count > stem.count + 8,
                          "\(file): the NAME section must be one line \"\(stem) \\- description\", found \"\(nameLine)\"")
            XCTAssertTrue(page.source.utf8.allSatisfy { $0 < 0x80 }, "\(file): not ASCII (write \\(em, \\(lq ... instead)")
            for (number, line) in page.rawLines.enumerated() where !ManPage.isComment(line) {
                if let bad = ManPage.unescapedMinus(in: line) {
                    XCTFail("\(file):\(number + 1): write \\- for the minus of \"\(bad)\" (a bare - is a hyphen: copied options would not work)")
                }
            }
        }
    }

    func testPagesRenderWithoutWarnings() throws {
        guard let groff = ManPage.findInPath("groff") else {
            // Not a skip of the whole class: the checks above need no groff.
            FileHandle.standardError.write(Data("ManPageTests: groff not installed (Debian package groff-base); rendering not checked\n".utf8))
            return
        }
        for file in Self.pages {
            let path = ManPage.directory + "/" + file
            let r = try runSeparated(groff, ["-man", "-Tutf8", "-ww", "-z", path], env: ["LC_ALL": "C.UTF-8"])
            XCTAssertEqual(r.status, 0, "groff -man -Tutf8 -ww -z \(path) failed: \(r.stderr)")
            XCTAssertEqual(r.stderr, "", "groff -man -Tutf8 -ww -z \(path) warns")
        }
    }

    // MARK: helpers

    /// A program's help on stdout (status 0, nothing on stderr).
    private func helpText(_ program: String, _ arguments: [String]) throws -> String {
        let r = try runSeparated(try executable(program), arguments)
        XCTAssertEqual(r.status, 0, "\(program) \(arguments.joined(separator: " ")) exits \(r.status): \(r.stderr)")
        XCTAssertEqual(r.stderr, "", "\(program) \(arguments.joined(separator: " ")) writes to stderr")
        return r.stdout
    }

    /// Every `--option` of the help is in a tag of the page, every option line of the help
    /// (`  --config PATH   text`) is in a tag as written (`--config PATH`), and every alias
    /// (`-h`) is somewhere in the page.
    private func checkOptions(help: String, helpName: String, page: ManPage, file: StaticString = #filePath, line: UInt = #line) {
        let tags = page.tags(in: nil)
        let missing = ManPage.longOptions(in: help).filter { option in !tags.contains { ManPage.contains($0, term: option) } }
        for option in missing.sorted() {
            XCTFail("\(page.file): no entry for \(option) (from \(helpName))", file: file, line: line)
        }
        for spec in ManPage.optionSpecs(in: help) where !tags.contains(where: { ManPage.contains($0, term: spec) }) {
            // An option with no entry at all is reported once, above.
            if let option = spec.split(separator: " ").first, missing.contains(String(option)) { continue }
            XCTFail("\(page.file): no entry tagged \"\(spec)\" (from \(helpName))", file: file, line: line)
        }
        for alias in ManPage.aliases(in: help) where !ManPage.contains(page.text, term: alias) {
            XCTFail("\(page.file): never mentions \(alias) (from \(helpName))", file: file, line: line)
        }
    }

    /// Every long option in the tags of `sections` is one the program's help knows.
    private func checkNoStaleOptions(page: ManPage, sections: Set<String>, known: Set<String>, helpName: String) {
        for tag in page.tags(in: sections) {
            for option in ManPage.longOptions(in: tag) where !known.contains(option) {
                XCTFail("\(page.file): documents \(option), which \(helpName) does not know")
            }
        }
    }
}

/// A man(7) page read far enough for the checks: its .TH, its entry tags (the line after .TP,
/// or .IP's argument) by section, and its text with the roff escapes resolved.
struct ManPage {
    static var directory: String { SimCard.repoRoot + "/docs/man" }

    let file: String
    let source: String
    let rawLines: [String]
    private(set) var header: [String] = []
    /// (.SH section, tag as rendered text)
    private(set) var entries: [(section: String, tag: String)] = []
    /// Everything as rendered text, one line per input line.
    private(set) var text = ""

    static func load(_ file: String) throws -> ManPage {
        try ManPage(file: file, source: String(contentsOfFile: directory + "/" + file, encoding: .utf8))
    }

    init(file: String, source: String) {
        self.file = file
        self.source = source
        rawLines = source.components(separatedBy: "\n")
        var section = ""
        var tagNext = false
        var lines: [String] = []
        for raw in rawLines where !Self.isComment(raw) {
            var rendered: String
            if raw.hasPrefix(".") {
                let words = Self.arguments(String(raw.dropFirst()))
                guard let macro = words.first else { continue }
                let args = Array(words.dropFirst())
                switch macro {
                case "TH": header = args; continue
                case "SH": section = Self.render(args.joined(separator: " ")); rendered = section
                case "SS": rendered = Self.render(args.joined(separator: " "))
                case "TP": tagNext = true; continue
                case "IP":
                    if let tag = args.first { entries.append((section, Self.squeezed(Self.render(tag)))) }
                    continue
                case "B", "I", "SM", "SB": rendered = Self.render(args.joined(separator: " "))
                case "BR", "BI", "IB", "IR", "RB", "RI": rendered = Self.render(args.joined())
                default: continue  // .PP, .nf, .in, .br ...: no text
                }
            } else {
                rendered = Self.render(raw)
            }
            rendered = Self.squeezed(rendered)
            if tagNext {
                entries.append((section, rendered))
                tagNext = false
            }
            lines.append(rendered)
        }
        text = lines.joined(separator: "\n")
    }

    /// The tags of the entries in `sections` (all when nil).
    func tags(in sections: Set<String>?) -> [String] {
        entries.filter { sections?.contains($0.section) ?? true }.map(\.tag)
    }

    static func isComment(_ line: String) -> Bool { line.hasPrefix(".\\\"") || line.hasPrefix("'\\\"") || line == "." }

    /// A request's words: blanks separate them, except inside "double quotes" or after a backslash.
    static func arguments(_ line: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        var inWord = false
        for c in line {
            if escaped { current.append(c); escaped = false; continue }
            if c == "\\" { current.append(c); escaped = true; inWord = true; continue }
            if c == "\"" { quoted.toggle(); inWord = true; continue }
            if c == " " && !quoted {
                if inWord { words.append(current); current = ""; inWord = false }
                continue
            }
            current.append(c)
            inWord = true
        }
        if inWord { words.append(current) }
        return words
    }

    /// Roff text as a terminal shows it: fonts dropped, `\-` as "-", a few named characters.
    static func render(_ s: String) -> String {
        let named = ["em": "\u{2014}", "en": "\u{2013}", "lq": "\u{201C}", "rq": "\u{201D}", "aq": "'", "dq": "\"",
                     "bu": "\u{2022}", "mu": "\u{00D7}", "<=": "\u{2264}", ">=": "\u{2265}"]
        var out = ""
        var i = s.startIndex
        func next() -> Character? {
            guard i < s.endIndex else { return nil }
            defer { i = s.index(after: i) }
            return s[i]
        }
        func name() -> String {  // after \f, \( or \[: (xx, [name] or x
            guard let c = next() else { return "" }
            if c == "(" { return String([next(), next()].compactMap { $0 }) }
            if c == "[" {
                var n = ""
                while let d = next(), d != "]" { n.append(d) }
                return n
            }
            return String(c)
        }
        while let c = next() {
            guard c == "\\" else { out.append(c); continue }
            guard let e = next() else { break }
            switch e {
            case "f": _ = name()
            case "(": i = s.index(before: i); out += named[name()] ?? ""
            case "[": i = s.index(before: i); out += named[name()] ?? ""
            case "-": out.append("-")
            case "e": out.append("\\")
            case " ", "~": out.append(" ")
            case "&", "|", "^", "c", "%": break
            default: out.append(e)
            }
        }
        return out
    }

    static func squeezed(_ s: String) -> String {
        s.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    private static func isWordCharacter(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == "-" || c == "_" }

    /// Whether `term` occurs in `text` as a whole (not inside a longer option or word).
    static func contains(_ text: String, term: String) -> Bool {
        var searchFrom = text.startIndex
        while let range = text.range(of: term, range: searchFrom..<text.endIndex) {
            let before = range.lowerBound == text.startIndex ? nil : text[text.index(before: range.lowerBound)]
            let after = range.upperBound == text.endIndex ? nil : text[range.upperBound]
            let startsWord = !isWordCharacter(term.first!) || before.map { !isWordCharacter($0) } ?? true
            let endsWord = !isWordCharacter(term.last!) || after.map { !isWordCharacter($0) } ?? true
            if startsWord && endsWord { return true }
            searchFrom = text.index(after: range.lowerBound)
        }
        return false
    }

    /// Every `--name` in a text.
    static func longOptions(in text: String) -> Set<String> {
        var options = Set<String>()
        let chars = Array(text)
        var i = 0
        while i + 2 < chars.count {
            if chars[i] == "-", chars[i + 1] == "-", chars[i + 2].isLetter, i == 0 || !isWordCharacter(chars[i - 1]) {
                var j = i + 2
                while j < chars.count, chars[j].isLetter || chars[j].isNumber || chars[j] == "-" { j += 1 }
                options.insert(String(chars[i..<j]))
                i = j
            } else {
                i += 1
            }
        }
        return options
    }

    /// The left column of a help's option lines without the aliases before the name:
    /// `  -c, --config PATH     text` → "--config PATH" (a usage line, and so roomctl's COMMANDS
    /// tags, write the long name only).
    static func optionSpecs(in help: String) -> [String] {
        optionColumns(in: help).map { $0.last ?? "" }
    }

    /// The aliases in the left column of a help's option lines: `  -h, --help  text` → ["-h"].
    static func aliases(in help: String) -> [String] {
        optionColumns(in: help).flatMap { $0.dropLast() }
    }

    /// Each option line's left column split at ", ": `-h, --help` → ["-h", "--help"].
    private static func optionColumns(in help: String) -> [[String]] {
        help.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  -") else { return nil }
            let spec = line.dropFirst(2).components(separatedBy: "  ").first ?? ""
            return squeezed(spec).components(separatedBy: ", ")
        }
    }

    /// The lines after `title` up to the next blank line.
    static func block(in text: String, after title: String) -> [String] {
        let lines = text.components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: title) else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.trimmingCharacters(in: .whitespaces).isEmpty })
    }

    /// The first bare `-` that starts an option (`-h`, `--json`) in a source line, fonts aside.
    static func unescapedMinus(in line: String) -> String? {
        var s = line
        for font in ["\\fB", "\\fI", "\\fR", "\\fP"] { s = s.replacingOccurrences(of: font, with: " ") }
        let chars = Array(s)
        for i in chars.indices where chars[i] == "-" && i + 1 < chars.count && (chars[i + 1] == "-" || chars[i + 1].isLetter) {
            let before: Character = i == 0 ? " " : chars[i - 1]
            if " [(|".contains(before) || (before == "-" && (i < 2 || chars[i - 2] != "\\")) {
                return String(chars[i...].prefix { !$0.isWhitespace && $0 != "]" })
            }
        }
        return nil
    }

    static func findInPath(_ program: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(program)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
