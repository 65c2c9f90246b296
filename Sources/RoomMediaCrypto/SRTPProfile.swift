/// The SRTP protection profiles roomd speaks. Rooms use AEAD_AES_128_GCM alone (the server's
/// `welcome` keys, DTLS-SRTP with Janus); a SIP call keys SRTP by SDES and takes what the far
/// end offers among these — most phones and PBXes offer only the AES-CM suites (RFC 4568 §6.2).
public enum SRTPProfile: String, Sendable, CaseIterable {
    case aeadAES128GCM = "AEAD_AES_128_GCM"
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    case aesCM128HMACSHA1_32 = "AES_CM_128_HMAC_SHA1_32"

    /// The suite's name in SDES's `a=crypto` line.
    public var sdesName: String { rawValue }

    /// Master key plus master salt, the bytes of an SDES inline key: 16 + 12 for GCM
    /// (RFC 7714 §12), 16 + 14 for AES-CM (RFC 3711 §8.2).
    public var keyAndSaltLength: Int { self == .aeadAES128GCM ? 28 : 30 }

    /// How much longer a protected RTP packet is than the packet: the tag.
    public var rtpOverhead: Int {
        switch self {
        case .aeadAES128GCM: 16
        case .aesCM128HMACSHA1_80: 10
        case .aesCM128HMACSHA1_32: 4
        }
    }
}
