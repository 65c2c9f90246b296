/// Finds a key that occurs twice in one JSON object. Foundation's JSONDecoder keeps one of
/// them silently, so `{"grants": …, "grants": …}` meant whatever the decoder picked, and a
/// token, a signalling message or a peer's JSON could say one thing to a reader that keeps the
/// first and another to one that keeps the last (issue 27). Keys are compared as decoded
/// (`"a"` and `"\u0061"` are the same key). Meant for text that has already parsed as JSON:
/// on anything else it answers nil, never traps.
enum JSONDuplicateKeys {
    static func first(in bytes: some Collection<UInt8>) -> String? {
        let b = Array(bytes)
        var i = 0
        // One set of keys per object being read; arrays push nil.
        var scopes: [Set<String>?] = []
        var expectingKey = false
        while i < b.count {
            let c = b[i]
            switch c {
            case UInt8(ascii: "{"):
                scopes.append([])
                expectingKey = true
                i += 1
            case UInt8(ascii: "["):
                scopes.append(nil)
                expectingKey = false
                i += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !scopes.isEmpty { scopes.removeLast() }
                expectingKey = false
                i += 1
            case UInt8(ascii: ","):
                expectingKey = scopes.last.map { $0 != nil } ?? false
                i += 1
            case UInt8(ascii: "\""):
                guard let (text, next) = string(b, from: i) else { return nil }
                i = next
                if expectingKey, let last = scopes.last, var keys = last {
                    if !keys.insert(text).inserted { return text }
                    scopes[scopes.count - 1] = keys
                    expectingKey = false
                }
            default:
                i += 1
            }
        }
        return nil
    }

    /// The string starting at the quote `b[start]`, decoded, and the index after its closing quote.
    private static func string(_ b: [UInt8], from start: Int) -> (String, Int)? {
        var out: [UInt8] = []
        var i = start + 1
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") { return (String(decoding: out, as: UTF8.self), i + 1) }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            guard i + 1 < b.count else { return nil }
            let e = b[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "u"):
                guard i + 4 <= b.count, let v = UInt32(String(decoding: b[i ..< i + 4], as: UTF8.self), radix: 16) else { return nil }
                i += 4
                var scalar = v
                // A surrogate pair: the low half follows as another \uXXXX.
                if (0xD800 ... 0xDBFF).contains(v), i + 6 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u"),
                   let low = UInt32(String(decoding: b[i + 2 ..< i + 6], as: UTF8.self), radix: 16), (0xDC00 ... 0xDFFF).contains(low) {
                    scalar = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out += Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            default: out.append(e)   // \" \\ \/
            }
        }
        return nil
    }
}
