import CLibcrypto

/// SRTP with AEAD_AES_128_GCM written from the RFCs with OpenSSL's EVP, sharing no code with
/// roomd's wrapper or libsrtp2 (which Debian builds on NSS): whatever it decrypts is standard
/// SRTP that any implementation with the keys (Wireshark, a WebRTC stack) can read.
///
/// - Session keys: RFC 3711 §4.3.1 with the AES-CM PRF (§4.3.3), key derivation rate 0, as RFC
///   7714 §11 keeps for GCM; its 96-bit master salt takes the place of RFC 3711's 112-bit one,
///   left-aligned (the last two octets zero), which is how libsrtp and WebRTC stacks read it.
/// - Packets: RFC 7714 §8 — IV = (0x0000 ‖ SSRC ‖ ROC ‖ SEQ) XOR session salt, the RTP header
///   (extension included) as associated data, the payload encrypted, a 16-octet tag appended.
enum ReferenceSRTP {
    static let labelEncryption: UInt8 = 0x00
    static let labelAuthentication: UInt8 = 0x01
    static let labelSalt: UInt8 = 0x02

    /// One AES-128 block.
    static func aes(key: [UInt8], block: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && block.count == 16)
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 32)
        var n: Int32 = 0
        precondition(EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nil, key, nil) == 1)
        EVP_CIPHER_CTX_set_padding(ctx, 0)
        precondition(EVP_EncryptUpdate(ctx, &out, &n, block, 16) == 1 && n == 16)
        return Array(out[0 ..< 16])
    }

    /// The AES-CM key derivation: `length` octets for `label` (index 0, rate 0).
    static func derive(masterKey: [UInt8], masterSalt: [UInt8], label: UInt8, length: Int) -> [UInt8] {
        var x = masterSalt + [UInt8](repeating: 0, count: 14 - masterSalt.count)   // 112 bits
        x[7] ^= label                                // key_id = label ‖ r (r = 0), right-aligned
        var out: [UInt8] = []
        var counter: UInt16 = 0
        while out.count < length {
            out += aes(key: masterKey, block: x + [UInt8(counter >> 8), UInt8(counter & 0xFF)])   // x · 2¹⁶ + i
            counter += 1
        }
        return Array(out[0 ..< length])
    }

    struct SessionKeys {
        let key: [UInt8]
        let salt: [UInt8]
    }

    /// RTP session key and salt from a 28-octet master key ‖ master salt (the `welcome` fields).
    static func sessionKeys(master: [UInt8]) -> SessionKeys {
        let key = Array(master[0 ..< 16]), salt = Array(master[16 ..< 28])
        return SessionKeys(key: derive(masterKey: key, masterSalt: salt, label: labelEncryption, length: 16),
                           salt: derive(masterKey: key, masterSalt: salt, label: labelSalt, length: 12))
    }

    /// Length of the RTP header including CSRCs and extension, or nil when it runs past the end.
    static func headerLength(_ packet: [UInt8]) -> Int? {
        guard packet.count >= 12 else { return nil }
        var n = 12 + 4 * Int(packet[0] & 0x0F)
        if packet[0] & 0x10 != 0 {
            guard packet.count >= n + 4 else { return nil }
            n += 4 + 4 * (Int(packet[n + 2]) << 8 | Int(packet[n + 3]))
        }
        return n <= packet.count ? n : nil
    }

    static func iv(salt: [UInt8], ssrc: UInt32, roc: UInt32, sequence: UInt16) -> [UInt8] {
        var iv: [UInt8] = [0, 0]
        for shift in stride(from: 24, through: 0, by: -8) { iv.append(UInt8(truncatingIfNeeded: ssrc >> UInt32(shift))) }
        for shift in stride(from: 24, through: 0, by: -8) { iv.append(UInt8(truncatingIfNeeded: roc >> UInt32(shift))) }
        iv += [UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        return zip(iv, salt).map { $0 ^ $1 }
    }

    /// The RTP packet inside `srtp`, or nil when the tag does not verify.
    static func decrypt(_ srtp: [UInt8], keys: SessionKeys, roc: UInt32 = 0) -> [UInt8]? {
        guard let h = headerLength(srtp), srtp.count >= h + 16 else { return nil }
        let ssrc = UInt32(srtp[8]) << 24 | UInt32(srtp[9]) << 16 | UInt32(srtp[10]) << 8 | UInt32(srtp[11])
        let sequence = UInt16(srtp[2]) << 8 | UInt16(srtp[3])
        let nonce = iv(salt: keys.salt, ssrc: ssrc, roc: roc, sequence: sequence)
        let header = Array(srtp[0 ..< h]), body = Array(srtp[h ..< srtp.count - 16])
        var tag = Array(srtp[srtp.count - 16 ..< srtp.count])
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var n: Int32 = 0, total = 0
        guard EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_set_ivlen, 12, nil) == 1,
              EVP_DecryptInit_ex(ctx, nil, nil, keys.key, nonce) == 1,
              EVP_DecryptUpdate(ctx, nil, &n, header, Int32(header.count)) == 1,
              EVP_DecryptUpdate(ctx, &out, &n, body, Int32(body.count)) == 1
        else { return nil }
        total = Int(n)
        guard EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_set_tag, 16, &tag) == 1 else { return nil }
        let verified = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress! + total, &n) }
        guard verified == 1 else { return nil }
        return header + Array(out[0 ..< total])
    }

    /// `rtp` protected (for the known-answer test of this reference against RFC 7714).
    static func encrypt(_ rtp: [UInt8], keys: SessionKeys, roc: UInt32 = 0) -> [UInt8] {
        let h = headerLength(rtp)!
        let ssrc = UInt32(rtp[8]) << 24 | UInt32(rtp[9]) << 16 | UInt32(rtp[10]) << 8 | UInt32(rtp[11])
        let sequence = UInt16(rtp[2]) << 8 | UInt16(rtp[3])
        let nonce = iv(salt: keys.salt, ssrc: ssrc, roc: roc, sequence: sequence)
        let header = Array(rtp[0 ..< h]), body = Array(rtp[h...])
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var tag = [UInt8](repeating: 0, count: 16)
        var n: Int32 = 0
        precondition(EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nil, nil, nil) == 1)
        precondition(EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_set_ivlen, 12, nil) == 1)
        precondition(EVP_EncryptInit_ex(ctx, nil, nil, keys.key, nonce) == 1)
        precondition(EVP_EncryptUpdate(ctx, nil, &n, header, Int32(header.count)) == 1)
        precondition(EVP_EncryptUpdate(ctx, &out, &n, body, Int32(body.count)) == 1)
        let written = Int(n)
        _ = out.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx, $0.baseAddress! + written, &n) }
        precondition(EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_get_tag, 16, &tag) == 1)
        return header + Array(out[0 ..< written]) + tag
    }
}

func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\n") })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0 ..< $0 + 2], as: UTF8.self), radix: 16)! }
}
