/// One `key = value` line of an INI-style file, with where it came from so later
/// validation can point at the exact line.
public struct INIEntry: Sendable, Equatable {
    public let section: String
    public let key: String
    public let value: String
    public let line: Int
    /// Line of the `[section]` header this entry is under, for errors about the section.
    public let sectionLine: Int

    public init(section: String, key: String, value: String, line: Int, sectionLine: Int = 0) {
        self.section = section
        self.key = key
        self.value = value
        self.line = line
        self.sectionLine = sectionLine
    }

    /// `section.key`, the name used in error messages and docs.
    public var qualifiedKey: String { section + "." + key }
}

/// Tokenizer for the INI-like files roomd reads (`[section]`, `key = value`).
///
/// It knows only syntax, not which sections or keys exist; each file type validates its own
/// schema on top (see `ConfigValues`). Rules, kept small so they are easy to document:
/// - blank lines and lines whose first non-blank character is `#` or `;` are comments;
/// - a `#` or `;` preceded by whitespace starts a trailing comment (so `rate = 16000 # Hz`
///   works); values therefore cannot contain " #" or " ;";
/// - section and key names are letters, digits, `_`, `-` and `.`; keys are case-sensitive;
/// - a key may appear only once per section, even if the section is opened twice;
/// - values are trimmed; there is no quoting or line continuation.
public enum INIParser {
    public static func parse(text: String, file: String) throws(ConfigError) -> [INIEntry] {
        var entries: [INIEntry] = []
        var firstLine: [String: Int] = [:]      // "section.key" → line, for duplicate errors
        var section: String?
        var sectionLine = 0
        var lineNumber = 0
        // "\r\n" is a single Character in Swift, so both line endings are separators.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = stripComment(trim(rawLine))
            if line.isEmpty { continue }
            if line.first == "[" {
                guard line.last == "]", line.count >= 2 else {
                    throw ConfigError(file: file, line: lineNumber, key: nil,
                                      message: "malformed section header \"\(shown(line))\" (expected \"[name]\")")
                }
                let name = String(trim(line.dropFirst().dropLast()))
                guard isName(name) else {
                    throw ConfigError(file: file, line: lineNumber, key: nil,
                                      message: "invalid section name \"\(name)\" (letters, digits, _ - . only)")
                }
                section = name
                sectionLine = lineNumber
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: lineNumber, key: nil,
                                  message: "expected \"key = value\" or \"[section]\", found \"\(shown(line))\"")
            }
            let key = String(trim(line[..<eq]))
            let value = String(trim(line[line.index(after: eq)...]))
            guard isName(key) else {
                throw ConfigError(file: file, line: lineNumber, key: nil,
                                  message: key.isEmpty ? "missing key before \"=\""
                                                       : "invalid key name \"\(shown(Substring(key)))\" (letters, digits, _ - . only)")
            }
            guard let section else {
                throw ConfigError(file: file, line: lineNumber, key: key,
                                  message: "key outside of any section (add a [section] line above it)")
            }
            let qualified = section + "." + key
            if let first = firstLine[qualified] {
                throw ConfigError(file: file, line: lineNumber, key: qualified,
                                  message: "duplicate key (first set on line \(first))")
            }
            firstLine[qualified] = lineNumber
            entries.append(INIEntry(section: section, key: key, value: value, line: lineNumber, sectionLine: sectionLine))
        }
        return entries
    }

    private static func isBlank(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\r" || c == "\u{FEFF}" }

    private static func trim(_ s: Substring) -> Substring {
        var s = s
        while let c = s.first, isBlank(c) { s = s.dropFirst() }
        while let c = s.last, isBlank(c) { s = s.dropLast() }
        return s
    }

    /// Drops a whole-line comment, or a trailing comment that follows whitespace.
    /// A malformed line as error messages show it: cut after 24 characters, because the line
    /// may be a secret written wrongly (a token without `key =`) and errors reach the journal
    /// and roomctl.
    static func shown(_ line: Substring) -> String {
        line.count > 24 ? String(line.prefix(24)) + "…" : String(line)
    }

    private static func stripComment(_ line: Substring) -> Substring {
        if let c = line.first, c == "#" || c == ";" { return "" }
        var previous: Character = "x"
        for i in line.indices {
            let c = line[i]
            if (c == "#" || c == ";") && isBlank(previous) { return trim(line[..<i]) }
            previous = c
        }
        return line
    }

    private static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.unicodeScalars.allSatisfy { u in
            (u >= "a" && u <= "z") || (u >= "A" && u <= "Z") || (u >= "0" && u <= "9") || u == "_" || u == "-" || u == "."
        }
    }
}
