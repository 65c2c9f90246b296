import FoundationEssentials

/// A JSON value as the control API sees it. Integers and fractional numbers are kept apart
/// (`7` is `.int`, `7.5` is `.double`) so argument validation can say "integer expected".
public enum JSONValue: Sendable, Equatable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int.self) { self = .int(i); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        self = .object(try c.decode([String: JSONValue].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        // JSON has no NaN or infinity: they become null rather than failing the whole line.
        case .double(let d): if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Parses one JSON text (RFC 8259), strictly: a key twice in one object, invalid UTF-8, a
    /// number beyond a Double, or nesting deeper than `StrictJSON.maxDepth` is an error naming
    /// where (`JSONParseError`). A number with a fraction or exponent is `.double` even when
    /// whole (`2.0`, `2e0`), so "integer expected" catches it.
    ///
    /// Why not JSONDecoder: it let the first of two duplicate keys win
    /// (`{"cmd":"status","cmd":"mute"}` ran status), read `2.0` as an integer, and explained
    /// invalid UTF-8 or `1e309` in words that did not name the problem.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = StrictJSON(Array(bytes))
        return try parser.document()
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Compact JSON text with sorted keys (deterministic bytes, easy to diff and grep).
    public var jsonText: String {
        String(decoding: jsonBytes, as: UTF8.self)
    }

    public var jsonBytes: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only non-finite doubles could fail, and they are encoded as null above.
        return (try? Array(encoder.encode(self))) ?? Array("null".utf8)
    }

    public var description: String { jsonText }

    /// The name used in error messages: "integer", "number", "string", …
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var intValue: Int? { if case .int(let i) = self { return i }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    /// Integers and fractional numbers alike.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
}

public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    /// The key, when the text was refused for having it twice in one object: the error wire
    /// messages and tokens report in their own words.
    public let duplicateKey: String?
    public var description: String { message }

    init(message: String, duplicateKey: String? = nil) {
        self.message = message
        self.duplicateKey = duplicateKey
    }
}

/// Why `JSONValue.decodeStrictly` refused a text.
public enum StrictDecodingError: Error {
    /// A key twice in one object.
    case duplicateKey(String)
    /// What JSONDecoder refused, with its own error (the messages peers have always seen).
    case decoding(any Error)
    /// What JSONDecoder would take but the strict reader does not (nesting deeper than
    /// `StrictJSON.maxDepth`, an unpaired surrogate, ...): nothing the strict reader refuses is
    /// ever accepted.
    case refused(JSONParseError)
}

extension JSONValue {
    /// Decodes `T` with JSONDecoder from a text that the strict reader accepts too, for wire
    /// messages and tokens that want Codable's field mapping but not its leniency: JSONDecoder
    /// keeps one of two equal keys silently, so `{"grants": …, "grants": …}` would mean whatever
    /// it picked (issue 27). Keys are compared as decoded (`"a"` and `"\u0061"` are one key).
    public static func decodeStrictly<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(StrictDecodingError) -> T {
        var strictError: JSONParseError?
        do {
            _ = try parse(bytes)
        } catch {
            if let key = error.duplicateKey { throw .duplicateKey(key) }
            strictError = error
        }
        let value: T
        do {
            value = try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw .decoding(error)
        }
        if let strictError { throw .refused(strictError) }
        return value
    }
}

/// The one JSON reader (`JSONValue.parse`, and `decodeStrictly`'s check): recursive descent
/// over bytes, one pass, errors with the byte offset. Signalling's steady-state messages have a
/// narrower fast path of their own (RoomProtocol's `SignalFastPath`), which hands anything but
/// their plainest form to the strict path.
struct StrictJSON {
    /// Deeper nesting is refused: requests are two levels deep; a line of 64 KiB of `[` must
    /// not exhaust the stack.
    static let maxDepth = 64

    private let b: [UInt8]
    private var i = 0
    private var depth = 0

    init(_ bytes: [UInt8]) { b = bytes }

    private func fail(_ what: String) -> JSONParseError { JSONParseError(message: "\(what) at byte \(i)") }

    mutating func document() throws(JSONParseError) -> JSONValue {
        skipSpace()
        let v = try value()
        skipSpace()
        if i < b.count { throw fail("unexpected \(describe(b[i])) after the JSON value") }
        return v
    }

    private mutating func skipSpace() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { i += 1 }
    }

    private func describe(_ c: UInt8) -> String {
        c >= 0x21 && c < 0x7F ? "'\(Character(UnicodeScalar(c)))'" : "byte 0x\(String(c, radix: 16))"
    }

    private mutating func value() throws(JSONParseError) -> JSONValue {
        guard i < b.count else { throw fail("unexpected end of input") }
        switch b[i] {
        case 0x7B: return try object()
        case 0x5B: return try array()
        case 0x22: return .string(try string())
        case 0x74: try literal("true"); return .bool(true)
        case 0x66: try literal("false"); return .bool(false)
        case 0x6E: try literal("null"); return .null
        case 0x2D, 0x30...0x39: return try number()
        default: throw fail("unexpected \(describe(b[i]))")
        }
    }

    private mutating func literal(_ word: String) throws(JSONParseError) {
        let w = Array(word.utf8), n = w.count
        guard i + n <= b.count, (0..<n).allSatisfy({ b[i + $0] == w[$0] }) else {
            throw fail("unexpected \(describe(b[i]))")
        }
        i += n
    }

    private mutating func object() throws(JSONParseError) -> JSONValue {
        depth += 1
        defer { depth -= 1 }
        if depth > Self.maxDepth { throw fail("nesting deeper than \(Self.maxDepth)") }
        i += 1
        var o: [String: JSONValue] = [:]
        skipSpace()
        if i < b.count, b[i] == 0x7D { i += 1; return .object(o) }
        while true {
            skipSpace()
            guard i < b.count, b[i] == 0x22 else { throw fail(i < b.count ? "expected a key string, got \(describe(b[i]))" : "unexpected end of input") }
            let keyAt = i
            let key = try string()
            skipSpace()
            guard i < b.count, b[i] == 0x3A else { throw fail("expected ':' after key \"\(key)\"") }
            i += 1
            skipSpace()
            let v = try value()
            if o.updateValue(v, forKey: key) != nil {
                throw JSONParseError(message: "duplicate key \"\(key)\" at byte \(keyAt)", duplicateKey: key)
            }
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input") }
            if b[i] == 0x2C { i += 1; continue }
            if b[i] == 0x7D { i += 1; return .object(o) }
            throw fail("expected ',' or '}', got \(describe(b[i]))")
        }
    }

    private mutating func array() throws(JSONParseError) -> JSONValue {
        depth += 1
        defer { depth -= 1 }
        if depth > Self.maxDepth { throw fail("nesting deeper than \(Self.maxDepth)") }
        i += 1
        var a: [JSONValue] = []
        skipSpace()
        if i < b.count, b[i] == 0x5D { i += 1; return .array(a) }
        while true {
            skipSpace()
            a.append(try value())
            skipSpace()
            guard i < b.count else { throw fail("unexpected end of input") }
            if b[i] == 0x2C { i += 1; continue }
            if b[i] == 0x5D { i += 1; return .array(a) }
            throw fail("expected ',' or ']', got \(describe(b[i]))")
        }
    }

    private mutating func number() throws(JSONParseError) -> JSONValue {
        let start = i
        if b[i] == 0x2D { i += 1 }
        guard i < b.count, (0x30...0x39).contains(b[i]) else { throw fail("a digit expected") }
        if b[i] == 0x30 {
            i += 1
            if i < b.count, (0x30...0x39).contains(b[i]) { throw fail("leading zero in a number") }
        } else {
            while i < b.count, (0x30...0x39).contains(b[i]) { i += 1 }
        }
        var integral = true
        if i < b.count, b[i] == 0x2E {
            integral = false
            i += 1
            guard i < b.count, (0x30...0x39).contains(b[i]) else { throw fail("a digit expected after '.'") }
            while i < b.count, (0x30...0x39).contains(b[i]) { i += 1 }
        }
        if i < b.count, b[i] == 0x65 || b[i] == 0x45 {
            integral = false
            i += 1
            if i < b.count, b[i] == 0x2B || b[i] == 0x2D { i += 1 }
            guard i < b.count, (0x30...0x39).contains(b[i]) else { throw fail("a digit expected in the exponent") }
            while i < b.count, (0x30...0x39).contains(b[i]) { i += 1 }
        }
        let text = String(decoding: b[start..<i], as: UTF8.self)
        if integral, let n = Int(text) { return .int(n) }
        guard let d = Double(text), d.isFinite else {
            throw JSONParseError(message: "number \(text.prefix(40)) at byte \(start) is out of range")
        }
        return .double(d)
    }

    /// A string at `i` (on its opening quote): escapes decoded, UTF-8 checked.
    private mutating func string() throws(JSONParseError) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < b.count else { throw fail("unterminated string") }
            let c = b[i]
            switch c {
            case 0x22:
                i += 1
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                i += 1
                guard i < b.count else { throw fail("unterminated string") }
                let e = b[i]
                i += 1
                switch e {
                case 0x22, 0x5C, 0x2F: out.append(e)
                case 0x62: out.append(0x08)
                case 0x66: out.append(0x0C)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x75:
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 1 < b.count, b[i] == 0x5C, b[i + 1] == 0x75 else { throw fail("unpaired surrogate \\u\(String(scalar, radix: 16))") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate \\u\(String(scalar, radix: 16))") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired surrogate \\u\(String(scalar, radix: 16))")
                    }
                    out.append(contentsOf: Array(String(Character(UnicodeScalar(scalar)!)).utf8))
                default:
                    i -= 1
                    throw fail("invalid escape \\\(describe(e))")
                }
            case 0x00...0x1F:
                throw fail("control character \(describe(c)) in a string (escape it)")
            case 0x00...0x7F:
                out.append(c)
                i += 1
            default:
                let n = try utf8Sequence()
                out.append(contentsOf: b[i..<(i + n)])
                i += n
            }
        }
    }

    private mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= b.count else { throw fail("\\u needs four hex digits") }
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = b[i + k]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: i += k; throw fail("\\u needs four hex digits")
            }
            v = v << 4 | d
        }
        i += 4
        return v
    }

    /// Length of the well-formed UTF-8 sequence at `i` (RFC 3629: no overlongs, surrogates or
    /// values above U+10FFFF), or an error naming the byte.
    private func utf8Sequence() throws(JSONParseError) -> Int {
        let c = b[i]
        func cont(_ k: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool { i + k < b.count && range.contains(b[i + k]) }
        switch c {
        case 0xC2...0xDF: if cont(1) { return 2 }
        case 0xE0: if cont(1, 0xA0...0xBF) && cont(2) { return 3 }
        case 0xE1...0xEC, 0xEE...0xEF: if cont(1) && cont(2) { return 3 }
        case 0xED: if cont(1, 0x80...0x9F) && cont(2) { return 3 }
        case 0xF0: if cont(1, 0x90...0xBF) && cont(2) && cont(3) { return 4 }
        case 0xF1...0xF3: if cont(1) && cont(2) && cont(3) { return 4 }
        case 0xF4: if cont(1, 0x80...0x8F) && cont(2) && cont(3) { return 4 }
        default: break
        }
        throw fail("invalid UTF-8 (byte 0x\(String(c, radix: 16)))")
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}
