import RoomBase
import RoomJSON


/// roomctl's human-readable output: results as `key  value` lines and tables, events as one
/// line each. Everything from other people's tokens and clients goes through `inertText`.
extension Roomctl {
    /// A result object as text: "key  value" lines (nested objects as a.b), arrays of
    /// objects as tables; an empty result as "ok".
    public static func formatHuman(_ result: [String: JSONValue]) -> String {
        if result.isEmpty { return "ok" }
        var pairs: [(String, String)] = []
        var tables: [(String, [[String: JSONValue]])] = []
        func flatten(_ prefix: String, _ o: [String: JSONValue]) {
            for key in o.keys.sorted() {
                let name = inertText(prefix.isEmpty ? key : "\(prefix).\(key)")
                switch o[key]! {
                case .object(let inner) where !inner.isEmpty: flatten(name, inner)
                case .array(let items) where !items.isEmpty && items.allSatisfy({ $0.objectValue != nil }):
                    tables.append((name, items.compactMap(\.objectValue)))
                case let value: pairs.append((name, cell(value)))
                }
            }
        }
        flatten("", result)
        var lines: [String] = []
        let width = pairs.map(\.0.count).max() ?? 0
        for (k, v) in pairs { lines.append("\(k.padded(to: width))  \(v)") }
        for (name, rows) in tables {
            if !lines.isEmpty { lines.append("") }
            lines.append("\(name):")
            lines.append(formatTable(rows))
        }
        return lines.joined(separator: "\n")
    }

    static let preferredColumns = ["id", "name", "role", "stage", "muted", "speaking", "volume_db",
                                   "mic", "level_dbfs", "peak_dbfs", "noise_floor_dbfs", "snr_db", "delay_ms", "correlation", "clipped"]

    public static func formatTable(_ rows: [[String: JSONValue]]) -> String {
        var keys = Set<String>()
        for r in rows { keys.formUnion(r.keys) }
        let columns = preferredColumns.filter(keys.contains) + keys.subtracting(preferredColumns).sorted()
        let cells = rows.map { r in columns.map { r[$0].map(cell) ?? "-" } }
        let widths = columns.indices.map { i in max(inertText(columns[i]).count, cells.map { $0[i].count }.max() ?? 0) }
        func line(_ items: [String]) -> String {
            var text = zip(items, widths).map { $0.padded(to: $1) }.joined(separator: "  ")
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }
        return ([line(columns.map { inertText($0.uppercased()) })] + cells.map(line)).joined(separator: "\n")
    }

    static func cell(_ value: JSONValue) -> String {
        switch value {
        case .null: "-"
        case .bool(let b): b ? "yes" : "no"
        case .int(let i): "\(i)"
        case .double(let d): formatNumber(d)
        case .string(let s): inertText(s)   // names from tokens: no escape sequences on the terminal
        case .array(let a) where a.allSatisfy({ $0.objectValue == nil && $0.arrayValue == nil }): a.map(cell).joined(separator: ",")
        default: value.jsonText
        }
    }

    /// "event_name key=value key=value"
    public static func formatEvent(_ event: ControlEvent) -> String {
        ([inertText(event.name)] + event.fields.keys.sorted().map { key in
            let v = cell(event.fields[key]!)
            return "\(inertText(key))=\(v.contains(" ") ? "\"\(v)\"" : v)"
        }).joined(separator: " ")
    }

    static func formatNumber(_ d: Double) -> String { shortestNumberText(d) }
}

extension String {
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
