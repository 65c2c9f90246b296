import CLibcrypto

/// Why a key file was not taken: what an installer reads next to the key's path.
public struct KeyFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An Ed25519 public key (RFC 8032): what an appliance holds to check that the room service,
/// and nobody with only a token file, chose where it joins. Public keys are not secrets, so
/// the 32 bytes live in an ordinary array.
public struct Ed25519PublicKey: Sendable, Hashable {
    public static let size = 32
    public static let signatureSize = 64
    public let raw: [UInt8]

    public init(raw: [UInt8]) throws(KeyFileError) {
        guard raw.count == Self.size else { throw KeyFileError("an Ed25519 public key is \(Self.size) bytes, not \(raw.count)") }
        self.raw = raw
    }

    /// From PEM text: `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo), what
    /// `openssl pkey -in KEY -pubout` writes.
    public init(pem: String) throws(KeyFileError) {
        guard let key = Ed25519PEM.read(pem, private: false) else {
            throw KeyFileError("not a PEM Ed25519 public key (-----BEGIN PUBLIC KEY-----; openssl pkey -in KEY -pubout)")
        }
        defer { EVP_PKEY_free(key) }
        try self.init(raw: try Ed25519PEM.rawKey(key, private: false))
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`. Any failure inside
    /// libcrypto (a malformed signature included) is "does not verify".
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == Self.signatureSize else { return false }
        guard let key = raw.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count) }) else {
            return false
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in
                EVP_DigestVerify(context, s.baseAddress, s.count, m.baseAddress, m.count) == 1
            }
        }
    }
}

/// An Ed25519 private key: the room service's, held by whoever mints tokens (never by an
/// appliance, nor by a roomserver that only verifies). Its 32-byte seed is kept in locked memory.
public final class Ed25519PrivateKey: Sendable {
    private let seed: SecretBytes
    public let publicKey: Ed25519PublicKey

    /// From PEM text: `-----BEGIN PRIVATE KEY-----` (PKCS #8), what
    /// `openssl genpkey -algorithm ed25519` writes.
    public init(pem: String) throws(KeyFileError) {
        guard let key = Ed25519PEM.read(pem, private: true) else {
            throw KeyFileError("not a PEM Ed25519 private key (-----BEGIN PRIVATE KEY-----; openssl genpkey -algorithm ed25519)")
        }
        defer { EVP_PKEY_free(key) }
        var raw = try Ed25519PEM.rawKey(key, private: true)
        defer { ConstantTime.wipe(&raw) }
        seed = SecretBytes(raw)
        publicKey = try Ed25519PublicKey(raw: try Ed25519PEM.rawKey(key, private: false))
    }

    /// The 64-byte Ed25519 signature of `message` (deterministic: the same message signs the same).
    public func sign(_ message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Ed25519PublicKey.signatureSize)
        let key = seed.withUnsafeBytes { EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }
        guard let key, let context = EVP_MD_CTX_new() else {
            // Only allocation can fail here for a key that loaded: a signature that is all zeros
            // verifies nowhere, so the failure shows at the verifier, never as a forged pass.
            fatalError("Ed25519: libcrypto could not allocate a signing context")
        }
        defer {
            EVP_MD_CTX_free(context)
            EVP_PKEY_free(key)
        }
        var length = signature.count
        let signed = EVP_DigestSignInit(context, nil, nil, nil, key) == 1 && signature.withUnsafeMutableBufferPointer { s in
            message.withUnsafeBufferPointer { m in EVP_DigestSign(context, s.baseAddress, &length, m.baseAddress, m.count) == 1 }
        }
        guard signed, length == Ed25519PublicKey.signatureSize else { fatalError("Ed25519: libcrypto refused to sign") }
        return signature
    }
}

/// PEM in, raw key bytes out, through libcrypto's own PEM and key readers.
private enum Ed25519PEM {
    static func read(_ pem: String, private isPrivate: Bool) -> OpaquePointer? {
        var bytes = Array(pem.utf8)
        defer { if isPrivate { ConstantTime.wipe(&bytes) } }
        let key: OpaquePointer? = bytes.withUnsafeBytes { b -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(b.baseAddress, Int32(b.count)) else { return nil }
            defer { BIO_free(bio) }
            return isPrivate ? PEM_read_bio_PrivateKey(bio, nil, nil, nil) : PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        // A PEM error is left on libcrypto's thread-local queue; nothing else reads it, but
        // a later, unrelated caller must not find it there.
        ERR_clear_error()
        guard let key else { return nil }
        guard EVP_PKEY_get_id(key) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(key)
            return nil
        }
        return key
    }

    static func rawKey(_ key: OpaquePointer, private isPrivate: Bool) throws(KeyFileError) -> [UInt8] {
        var raw = [UInt8](repeating: 0, count: Ed25519PublicKey.size)
        var length = raw.count
        let ok = raw.withUnsafeMutableBufferPointer { r in
            isPrivate ? EVP_PKEY_get_raw_private_key(key, r.baseAddress, &length) : EVP_PKEY_get_raw_public_key(key, r.baseAddress, &length)
        }
        guard ok == 1, length == Ed25519PublicKey.size else { throw KeyFileError("libcrypto could not read the Ed25519 key's bytes") }
        return raw
    }
}
