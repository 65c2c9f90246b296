import RoomBase

/// An SRTP master key and master salt (RFC 3711 §8.2) for AEAD_AES_128_GCM (RFC 7714 §12):
/// 16 bytes of key followed by 12 bytes of salt, the concatenation libsrtp2 takes and the
/// order Wireshark's and SDES's key parameters use. The server makes two per participant
/// session, one per direction (see `MediaEncryption`), from a CSPRNG (`random()`: RoomCrypto).
///
/// `description` is redacted so that logging a `welcome` does not leak it.
public struct SRTPMasterKey: Sendable, Hashable, CustomStringConvertible {
    public static let keySize = 16
    public static let saltSize = 12
    public static let size = keySize + saltSize
    /// The authentication tag every SRTP packet carries (AEAD_AES_128_GCM: 16 bytes).
    public static let tagSize = 16

    public let bytes: [UInt8]

    /// Nil unless exactly `SRTPMasterKey.size` bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.size else { return nil }
        self.bytes = bytes
    }


    public var key: ArraySlice<UInt8> { bytes[0 ..< Self.keySize] }
    public var salt: ArraySlice<UInt8> { bytes[Self.keySize ..< Self.size] }

    /// Standard padded base64 of key‖salt, the spelling used in JSON.
    public var base64: String { Base64.encode(bytes) }

    /// Nil unless `text` is canonical padded base64 of exactly 28 bytes.
    public init?(base64 text: String) {
        guard let decoded = Base64.decode(text) else { return nil }
        self.init(bytes: decoded)
    }

    public var description: String { "SRTPMasterKey(<redacted>)" }
}

/// How a participant's media is encrypted (the `welcome`'s `srtp_*` fields): one master key for
/// what it sends (the server unprotects with it) and one for what it receives (the server
/// protects every forwarded stream with it). Hop by hop: the server sees the audio
/// (docs/security.md, "Trust model").
public struct MediaEncryption: Sendable, Hashable {
    /// The only profile spoken: RFC 7714's AEAD_AES_128_GCM (the name RFC 7714 §14.2 registers).
    public static let profileName = "AEAD_AES_128_GCM"

    /// Client → server.
    public var uplink: SRTPMasterKey
    /// Server → client.
    public var downlink: SRTPMasterKey

    public init(uplink: SRTPMasterKey, downlink: SRTPMasterKey) {
        self.uplink = uplink
        self.downlink = downlink
    }

}
