import CLibcrypto

extension STUNMessage {
    /// HMAC-SHA1 from OpenSSL's libcrypto: MESSAGE-INTEGRITY with ICE's short-term credentials
    /// (RFC 8489 §14.5). Allocates its 20-byte result; the agent runs on the event loop, never
    /// the audio thread.
    public static let hmacSHA1: STUNIntegrity = { key, data in
        var out = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { k in
            out.withUnsafeMutableBytes { o in
                HMAC(EVP_sha1(), k.baseAddress, Int32(k.count), data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count,
                     o.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
            }
        }
        return out
    }
}
