import RoomBase

/// Typed, validated reading of the entries of one INI-style file.
///
/// Each file type (board profile, later the daemon's settings) declares its sections and
/// keys and reads them through here, so every file gets the same checks and the same
/// error wording: unknown names with a "did you mean", values naming the allowed range.
public struct ConfigValues: Sendable {
    public let file: String
    public let entries: [INIEntry]
    private let byKey: [String: INIEntry]

    public init(entries: [INIEntry], file: String) {
        self.file = file
        self.entries = entries
        var byKey: [String: INIEntry] = [:]
        for e in entries { byKey[e.qualifiedKey] = e }
        self.byKey = byKey
    }

    /// Rejects, in file order, the first entry whose section or key is not known.
    /// `dynamicKey` accepts families of keys that cannot be listed (e.g. `mic0`, `mic1`, …).
    public func checkNames(sections: [(name: String, keys: [String])],
                           dynamicKey: (INIEntry) -> Bool = { _ in false }) throws(ConfigError) {
        for e in entries {
            guard let section = sections.first(where: { $0.name == e.section }) else {
                let hint = Self.suggestion(for: e.section, among: sections.map(\.name))
                throw ConfigError(file: file, line: e.sectionLine, key: nil,
                                  message: "unknown section [\(e.section)]\(hint) (known: \(sections.map { "[\($0.name)]" }.joined(separator: " ")))")
            }
            if section.keys.contains(e.key) || dynamicKey(e) { continue }
            let hint = Self.suggestion(for: e.key, among: section.keys)
            throw ConfigError(file: file, line: e.line, key: e.qualifiedKey,
                              message: "unknown key\(hint) (known in [\(e.section)]: \(section.keys.joined(separator: ", ")))")
        }
    }

    public func entry(_ key: String) -> INIEntry? { byKey[key] }

    /// An error about `key`, located at its line when the key is present.
    public func error(_ key: String, _ message: String) -> ConfigError {
        ConfigError(file: file, line: byKey[key]?.line, key: key, message: message)
    }

    /// A non-empty string, or nil when the key is absent.
    public func string(_ key: String) throws(ConfigError) -> String? {
        guard let e = byKey[key] else { return nil }
        guard !e.value.isEmpty else { throw error(key, "empty value") }
        return e.value
    }

    public func requiredString(_ key: String) throws(ConfigError) -> String {
        guard let s = try string(key) else { throw error(key, "missing (required)") }
        return s
    }

    /// A whole number in `range`, or nil when absent.
    public func int(_ key: String, in range: ClosedRange<Int>) throws(ConfigError) -> Int? {
        guard let e = byKey[key] else { return nil }
        guard let v = Int(e.value) else { throw error(key, "\"\(e.value)\" is not a whole number") }
        guard range.contains(v) else {
            throw error(key, "\(v) is out of range (\(range.lowerBound)..\(range.upperBound))")
        }
        return v
    }

    /// A whole number from a fixed set, or nil when absent.
    public func int(_ key: String, oneOf allowed: [Int]) throws(ConfigError) -> Int? {
        guard let e = byKey[key] else { return nil }
        guard let v = Int(e.value) else { throw error(key, "\"\(e.value)\" is not a whole number") }
        guard allowed.contains(v) else {
            throw error(key, "\(v) is not supported (\(choiceList(allowed.map { "\($0)" })))")
        }
        return v
    }

    /// A name from a fixed set, or nil when absent.
    public func string(_ key: String, oneOf allowed: [String]) throws(ConfigError) -> String? {
        guard let v = try string(key) else { return nil }
        guard allowed.contains(v) else { throw error(key, "\"\(v)\" is not \(choiceList(allowed))") }
        return v
    }

    /// One of a string enum's cases (by raw value, listed in case order when refused), or nil
    /// when absent.
    public func value<T: RawRepresentable & CaseIterable>(_ key: String, as type: T.Type) throws(ConfigError) -> T?
    where T.RawValue == String {
        guard let v = try string(key, oneOf: T.allCases.map(\.rawValue)) else { return nil }
        return T(rawValue: v)
    }

    /// A finite number in `range`, or nil when absent.
    public func double(_ key: String, in range: ClosedRange<Double>) throws(ConfigError) -> Double? {
        guard let text = try string(key) else { return nil }
        guard let v = Double(text), v.isFinite else { throw error(key, "\"\(text)\" is not a number") }
        guard range.contains(v) else {
            throw error(key, "\(text) is out of range (\(shortestNumberText(range.lowerBound))..\(shortestNumberText(range.upperBound)))")
        }
        return v
    }

    /// `yes` or `no`, or nil when absent. Only these two words, so a typo is never read as "no".
    public func yesNo(_ key: String) throws(ConfigError) -> Bool? {
        guard let e = byKey[key] else { return nil }
        switch e.value {
        case "yes": return true
        case "no": return false
        default: throw error(key, "\"\(e.value)\" is not yes or no")
        }
    }

    /// ` (did you mean "x"?)` when one known name is within a small edit distance.
    static func suggestion(for name: String, among known: [String]) -> String {
        let limit = max(1, min(2, name.count / 3))
        var best: (name: String, distance: Int)?
        for k in known {
            let d = editDistance(name, k)
            if d <= limit && (best == nil || d < best!.distance) { best = (k, d) }
        }
        return best.map { " (did you mean \"\($0.name)\"?)" } ?? ""
    }

    /// Levenshtein distance; names are short, so the quadratic table is fine.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased().unicodeScalars), b = Array(b.lowercased().unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
