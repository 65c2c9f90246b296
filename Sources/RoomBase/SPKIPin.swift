/// The spelling of a pinned server key: "sha256/" and the base64 of the SHA-256 of the
/// certificate's DER SubjectPublicKeyInfo, as HPKP (RFC 7469) wrote it. Checked where a pin is
/// configured (roomd.conf, --tls-pin) so a typo is an error naming the field, not a refused
/// server later.
public enum SPKIPin {
    /// Why `text` is not a pin, or nil when it is one ("sha256/" and 44 characters of padded
    /// base64: 32 bytes).
    public static func problem(_ text: String) -> String? {
        guard text.hasPrefix("sha256/") else {
            return "\"\(text)\" is not a pin: it must start with sha256/ (roomserver --print-spki-pin CERT prints one)"
        }
        let body = Array(text.utf8.dropFirst(7))
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        guard body.count == 44, body[43] == UInt8(ascii: "="), body[42] != UInt8(ascii: "="),
              body[0 ..< 43].allSatisfy({ alphabet.contains($0) })
        else { return "\"\(text)\" is not a pin: after sha256/ come 44 characters of base64 (a SHA-256)" }
        return nil
    }
}
