/// Base64url without padding (RFC 4648 §5), as JWS compact serialisation requires
/// (RFC 7515 §2). Decoding is strict: no padding, no whitespace, no characters outside the
/// alphabet, and the unused low bits of the last character must be zero. Strictness matters
/// for tokens: a lenient decoder would accept several spellings of the same signature,
/// which makes tokens malleable (two different strings, both "valid").
public enum Base64URL {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Base64Codec.encode(Array(bytes), alphabet: Base64Codec.urlAlphabet, pad: false)
    }

    /// Nil for anything that is not canonical unpadded base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Base64Codec.decode(Array(text.utf8), url: true, padded: false)
    }
}

/// Standard base64 with padding (RFC 4648 §4), the usual spelling of binary values in JSON
/// (the `media_key` field). Decoding is as strict as `Base64URL`, with padding required.
public enum Base64 {
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Base64Codec.encode(Array(bytes), alphabet: Base64Codec.standardAlphabet, pad: true)
    }

    /// Nil for anything that is not canonical padded base64.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Base64Codec.decode(Array(text.utf8), url: false, padded: true)
    }
}

enum Base64Codec {
    static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            out.append(alphabet[Int(v & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let v = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            if pad { out.append(UInt8(ascii: "=")); out.append(UInt8(ascii: "=")) }
        case 2:
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            if pad { out.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func value(of c: UInt8, url: Bool) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "-") where url, UInt8(ascii: "+") where !url: return 62
        case UInt8(ascii: "_") where url, UInt8(ascii: "/") where !url: return 63
        default: return nil
        }
    }

    static func decode(_ input: [UInt8], url: Bool, padded: Bool) -> [UInt8]? {
        var chars = input[...]
        if padded {
            guard input.count % 4 == 0 else { return nil }
            var padding = 0
            while padding < 2, chars.last == UInt8(ascii: "=") {
                chars = chars.dropLast()
                padding += 1
            }
        }
        // A lone trailing character carries only 6 bits: never a whole byte.
        guard chars.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let v = value(of: c, url: url) else { return nil }
            acc = acc << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits must be zero, or two encodings would decode to the same bytes.
        guard acc == 0 else { return nil }
        return out
    }
}
