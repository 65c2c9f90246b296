/// Text from outside (display names and user ids from tokens, app messages, attribute values,
/// file contents in error messages) made inert for a log line or a terminal: control characters
/// become visible escapes, so a name cannot end a log line and forge the next one (`\n<0>…`
/// read as an emergency by journald), and a terminal interprets no escape sequence (ANSI
/// colours, cursor moves, title changes) or bidirectional override that reorders what the
/// operator reads. The JSON API carries the raw value; only what a person or a line-based
/// reader sees goes through this (issue 11).
///
/// Escaped: C0 controls except tab (`\n`, `\r`, others `\xNN`), DEL, C1 controls (`\u{0085}`
/// style), the Unicode line and paragraph separators and the bidirectional embedding, override
/// and isolate characters. Everything else, other languages included, passes unchanged.
public func inertText(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: needsEscape) else { return text }
    var out = ""
    out.reserveCapacity(text.utf8.count + 8)
    for scalar in text.unicodeScalars {
        guard needsEscape(scalar) else { out.unicodeScalars.append(scalar); continue }
        switch scalar.value {
        case 0x0A: out += "\\n"
        case 0x0D: out += "\\r"
        case 0..<0x80: out += "\\x" + hexDigits(scalar.value, width: 2)
        default: out += "\\u{" + hexDigits(scalar.value, width: 4) + "}"
        }
    }
    return out
}

@inline(__always)
private func needsEscape(_ s: Unicode.Scalar) -> Bool {
    switch s.value {
    case 0x09: return false
    case 0..<0x20, 0x7F, 0x80..<0xA0: return true
    case 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
    default: return false
    }
}
