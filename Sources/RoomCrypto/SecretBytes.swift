import RoomSystem

/// Key material that must not outlive its use nor leave RAM: the server's token-signing
/// secrets. The bytes live in `LockedPages` (locked, out of core dumps, guard pages on both
/// sides, zeroed when the last reference goes).
///
/// Immutable after `init`, so sharing it across threads is safe (hence `@unchecked Sendable`:
/// the compiler cannot see through the raw pointer).
public final class SecretBytes: @unchecked Sendable, Equatable, CustomStringConvertible {
    private let pages: LockedPages
    public var count: Int { pages.count }

    /// Copies `bytes` into locked memory.
    public init(_ bytes: some Collection<UInt8>) {
        pages = LockedPages(count: bytes.count)
        var offset = 0
        for byte in bytes {
            pages.base.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
            offset += 1
        }
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pages.base, count: pages.count))
    }

    /// By content, in constant time.
    public static func == (a: SecretBytes, b: SecretBytes) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in ConstantTime.equal(x, y) } }
    }

    /// Never the bytes: a key printed in a log line is a key given away.
    public var description: String { "SecretBytes(\(count) bytes)" }
}
