import CLibcrypto

/// roomd's one crypto library is OpenSSL's libcrypto: TLS, DTLS and SRTP's AES-GCM need it
/// anyway, and it has everything else roomd signs, checks and draws (SHA-1 for the WebSocket
/// handshake and STUN's MESSAGE-INTEGRITY, HMAC-SHA256 for room tokens and binding datagrams,
/// random keys). This module is the only Swift code that calls it for those; the wire modules
/// take the functions they need from here.
public enum Digest {
    /// SHA-1 (RFC 3174): the WebSocket handshake's accept key (RFC 6455 §4.2.2). Not for
    /// anything that must resist collisions.
    public static func sha1(_ input: [UInt8]) -> [UInt8] { digest(input, EVP_sha1(), size: 20) }

    /// MD5 (RFC 1321): SIP's digest authentication (RFC 2617), which registrars still ask for.
    /// Broken for collisions; never for anything of ours to rely on.
    public static func md5(_ input: [UInt8]) -> [UInt8] { digest(input, EVP_md5(), size: 16) }

    private static func digest(_ input: [UInt8], _ md: OpaquePointer?, size: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size)
        var length: UInt32 = 0
        _ = input.withUnsafeBytes { i in
            out.withUnsafeMutableBytes { o in
                EVP_Digest(i.baseAddress, i.count, o.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, md, nil)
            }
        }
        return out
    }
}

/// HMAC (RFC 2104) over SHA-1 and SHA-256, any key length (longer keys are hashed, shorter ones
/// padded), through libcrypto's one-shot `HMAC`. On the event loop only: libcrypto allocates its
/// context per call, which no audio-thread path may do.
public enum HMAC {
    public static let sha256Size = 32
    public static let sha1Size = 20

    /// HMAC-SHA1(key, data) → 20 bytes: STUN's MESSAGE-INTEGRITY with ICE's short-term
    /// credentials (RFC 8489 §14.5).
    public static func sha1(key: [UInt8], data: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: sha1Size)
        key.withUnsafeBytes { k in
            out.withUnsafeMutableBytes { o in compute(EVP_sha1(), key: k, message: data, into: o) }
        }
        return out
    }

    /// Writes HMAC-SHA256(key, message) into `out` (at least 32 bytes).
    public static func sha256(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        compute(EVP_sha256(), key: key, message: message, into: out)
    }

    /// HMAC-SHA256 as a new array: the token path, where a few small allocations do not matter.
    public static func sha256(key: UnsafeRawBufferPointer, message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: sha256Size)
        message.withUnsafeBytes { m in out.withUnsafeMutableBytes { o in sha256(key: key, message: m, into: o) } }
        return out
    }

    public static func sha256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { sha256(key: $0, message: message) }
    }

    /// The same with a key in locked memory (the server's `[keys]`).
    public static func sha256(key: SecretBytes, message: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { sha256(key: $0, message: message) }
    }

    private static func compute(_ md: OpaquePointer?, key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer,
                                into out: UnsafeMutableRawBufferPointer) {
        // An empty key or message is legal HMAC; libcrypto still wants pointers.
        var none: UInt8 = 0
        var length: UInt32 = 0
        withUnsafeMutablePointer(to: &none) { empty in
            let k = key.baseAddress ?? UnsafeRawPointer(empty)
            let m = message.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? UnsafePointer(empty)
            _ = CLibcrypto.HMAC(md, k, Int32(key.count), m, message.count,
                                out.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
        }
    }
}

/// Comparisons and wiping that the compiler may not shortcut.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes, in time independent of where they differ, so a
    /// forger cannot learn from response timing how many leading bytes of a guessed MAC were
    /// right. Unequal lengths compare unequal at once (lengths are public).
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0 else { return true }
        return CRYPTO_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
    }

    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in equal(x, y) } }
    }

    /// Overwrites `bytes` in place (OPENSSL_cleanse, which the optimiser may not remove): for
    /// a secret read into an ordinary array before it is copied into `SecretBytes`.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { OPENSSL_cleanse(b, $0.count) } }
    }
}

/// Random bytes from libcrypto's CSPRNG (seeded from the kernel's getrandom): keys, nonces.
public enum SecureRandom {
    /// Traps when the generator fails: a key that is not random must never be used, and
    /// libcrypto fails only when the kernel cannot seed it at all.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        guard RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            fatalError("RAND_bytes failed: no randomness to make a key from")
        }
    }

    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}
