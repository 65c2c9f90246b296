import RoomBase
import RoomCrypto

/// The per-participant secret the server hands out in `welcome`, authenticating UDP binding
/// datagrams (see `BindingDatagram`): whoever can produce a valid binding for a participant
/// can redirect that participant's media, so it must be unguessable — 128 bits from
/// libcrypto's CSPRNG.
///
/// `description` is redacted so that logging a `welcome` does not leak the key.
public struct MediaKey: Sendable, Hashable, CustomStringConvertible {
    public static let size = 16
    public let bytes: [UInt8]

    /// Nil unless exactly `MediaKey.size` bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == MediaKey.size else { return nil }
        self.bytes = bytes
    }

    /// A fresh random key (server side, one per participant session).
    public static func random() -> MediaKey {
        MediaKey(bytes: SecureRandom.bytes(size))!
    }

    /// Standard padded base64, the spelling used in JSON.
    public var base64: String { Base64.encode(bytes) }

    /// Nil unless `text` is canonical padded base64 of exactly 16 bytes.
    public init?(base64 text: String) {
        guard let decoded = Base64.decode(text) else { return nil }
        self.init(bytes: decoded)
    }

    public var description: String { "MediaKey(<redacted>)" }
}
