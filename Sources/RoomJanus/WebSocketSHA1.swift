import CLibcrypto

extension WebSocketClient {
    /// SHA-1 from OpenSSL's libcrypto, for the handshake's accept key (RFC 6455 §4.2.2).
    public static let sha1: SHA1 = { input in
        var out = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = input.withUnsafeBytes { i in
            out.withUnsafeMutableBytes { o in
                EVP_Digest(i.baseAddress, i.count, o.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, EVP_sha1(), nil)
            }
        }
        return out
    }
}
