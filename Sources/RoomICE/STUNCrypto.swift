import RoomCrypto

extension STUNMessage {
    /// HMAC-SHA1 (RoomCrypto): MESSAGE-INTEGRITY with ICE's short-term credentials (RFC 8489
    /// §14.5). Allocates its 20-byte result; the agent runs on the event loop, never the audio
    /// thread.
    public static let hmacSHA1: STUNIntegrity = { key, data in HMAC.sha1(key: key, data: data) }
}
