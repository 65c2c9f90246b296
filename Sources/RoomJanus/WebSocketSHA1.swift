import RoomCrypto

extension WebSocketClient {
    /// SHA-1 (RoomCrypto), for the handshake's accept key (RFC 6455 §4.2.2).
    public static let sha1: SHA1 = { input in Digest.sha1(input) }
}
