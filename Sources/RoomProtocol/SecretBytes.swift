import CSodium

/// Key material that must not outlive its use nor leave RAM: the server's token-signing
/// secrets. The bytes live in libsodium's guarded allocation (`sodium_malloc`: locked with
/// mlock so they are never written to swap, guard pages on both sides, a canary checked on
/// free) and are overwritten when the last reference goes (`sodium_free`). A Swift array would
/// be copied on write, moved by the allocator and freed with the key still in it.
///
/// Immutable after `init`, so sharing it across threads is safe (hence `@unchecked Sendable`:
/// the compiler cannot see through the raw pointer). Each instance costs four pages of address
/// space (the guard pages), so this is for a handful of long-lived keys, not per-packet data.
public final class SecretBytes: @unchecked Sendable, Equatable, CustomStringConvertible {
    private let base: UnsafeMutableRawPointer
    public let count: Int

    /// Copies `bytes` into locked memory. Traps only when the process cannot map four pages.
    public init(_ bytes: some Collection<UInt8>) {
        _ = Sodium.initialized
        count = bytes.count
        guard let memory = sodium_malloc(max(count, 1)) else {
            fatalError("sodium_malloc(\(count)) failed: out of memory")
        }
        base = memory
        var offset = 0
        for byte in bytes {
            base.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
            offset += 1
        }
    }

    deinit { sodium_free(base) }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Constant-time (lengths are public).
    public static func == (a: SecretBytes, b: SecretBytes) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in HMACSHA256.equal(x, y) } }
    }

    /// Never the bytes: a key printed in a log or a test failure would be a leak.
    public var description: String { "SecretBytes(\(count) bytes)" }

    /// Overwrites `bytes` in place (libsodium's `sodium_memzero`, which the compiler may not
    /// drop as a dead store): for the transient arrays a secret passes through while it is
    /// parsed. It cannot reach copies the array's buffer was already copied into.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let b = $0.baseAddress { sodium_memzero(b, $0.count) } }
    }
}
