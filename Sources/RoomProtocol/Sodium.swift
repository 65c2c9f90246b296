import CSodium

/// libsodium must be initialised once before use. `sodium_init` is idempotent and
/// thread-safe, but it takes a lock on every call, so the result is cached in a lazily
/// initialised constant (Swift runs the initialiser exactly once, thread-safely): no mutable
/// global state, and hot paths (binding datagrams) pay nothing after the first call.
enum Sodium {
    /// True when `sodium_init` succeeded or had already run. The HMAC and random functions
    /// used here also work if it failed (libsodium falls back to its portable code), so
    /// callers only touch this to make sure initialisation has happened.
    static let initialized: Bool = sodium_init() >= 0
}

/// HMAC-SHA256 through libsodium's init/update/final API, because the one-shot
/// `crypto_auth_hmacsha256` insists on 32-byte keys while JWT secrets and media keys have
/// other lengths (RFC 2104 allows any: longer keys are hashed, shorter ones padded).
enum HMACSHA256 {
    static let macSize = Int(crypto_auth_hmacsha256_BYTES)

    /// Writes the 32-byte MAC of `message` into `out` (at least 32 bytes). Takes raw buffers
    /// and never allocates, so the media path can authenticate datagrams without touching the
    /// heap.
    static func authenticate(
        key: UnsafeRawBufferPointer,
        message: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    ) {
        _ = Sodium.initialized
        var state = crypto_auth_hmacsha256_state()
        if let keyBase = key.baseAddress, key.count > 0 {
            _ = crypto_auth_hmacsha256_init(&state, keyBase.assumingMemoryBound(to: UInt8.self), key.count)
        } else {
            // An empty key is legal HMAC (zero padding); libsodium still wants a pointer.
            var none: UInt8 = 0
            _ = crypto_auth_hmacsha256_init(&state, &none, 0)
        }
        if let base = message.baseAddress, message.count > 0 {
            _ = crypto_auth_hmacsha256_update(&state, base.assumingMemoryBound(to: UInt8.self), UInt64(message.count))
        }
        _ = crypto_auth_hmacsha256_final(&state, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
    }

    /// Convenience for the token path, where a few small allocations do not matter.
    static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { mac(key: $0, message: message) }
    }

    /// The same with a key in locked memory (the server's `[keys]`).
    static func mac(key: SecretBytes, message: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { mac(key: $0, message: message) }
    }

    private static func mac(key: UnsafeRawBufferPointer, message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: macSize)
        message.withUnsafeBytes { m in
            out.withUnsafeMutableBytes { o in authenticate(key: key, message: m, into: o) }
        }
        return out
    }

    /// Constant-time comparison, so that a forger cannot learn from response timing how many
    /// leading bytes of a guessed MAC were right. Unequal lengths compare unequal at once
    /// (lengths are public).
    static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0 else { return true }
        return sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
    }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in equal(x, y) } }
    }
}
