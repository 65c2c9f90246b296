/// The UDP binding/keepalive datagram (docs/protocol.md, "Media over UDP"):
///
///     0       4                8                        16                      32
///     | "RMB1" | participant id | timestamp (ms)         | HMAC-SHA256[0..<16]  |
///              (UInt32 BE)      (UInt64 BE)               over bytes 0..<16, media key
///
/// It shares the media socket with RTP and is told apart by its first byte: RTP version 2
/// puts 0b10 in the top bits (0x80...0xBF), while "R" is 0x52. The client sends one before
/// any RTP so that NAT bindings exist when the server starts forwarding, then one every
/// `BindingDatagram.interval` seconds; the server authenticates it with the participant's
/// media key, learns the client's public address from it, and answers in the same format
/// with participant id 0 and the client's timestamp echoed, so the client knows the path
/// works both ways and can measure the round trip.
///
/// The MAC makes the datagram unforgeable without the media key; the timestamp, which must
/// grow (see `BindingReplayGuard`), stops a captured datagram from being replayed from
/// another address to steal a participant's media.
public struct BindingDatagram: Sendable, Hashable {
    public static let magic: [UInt8] = Array("RMB1".utf8)
    public static let size = 32
    public static let tagSize = 16
    static let authenticatedSize = 16
    /// Seconds between keepalives (NAT mappings commonly expire after 30 s or more).
    public static let interval = 5
    /// The participant id the server puts in its answers.
    public static let serverParticipantID: UInt32 = 0

    public var participantID: UInt32
    /// Sender's clock in milliseconds; any clock that only moves forward within a session.
    public var timestampMs: UInt64

    public init(participantID: UInt32, timestampMs: UInt64) {
        self.participantID = participantID
        self.timestampMs = timestampMs
    }

    /// True when the datagram starts like a binding datagram rather than RTP; the cheap
    /// first test on every datagram received on the media socket.
    public static func looksLikeBinding(_ datagram: UnsafeRawBufferPointer) -> Bool {
        datagram.count >= 1 && datagram[0] == magic[0]
    }

    /// Writes the datagram into the first `size` bytes of `buffer` and returns `size`.
    /// Does not allocate.
    @discardableResult
    public func write(into buffer: UnsafeMutableRawBufferPointer, key: MediaKey) throws(BindingError) -> Int {
        guard buffer.count >= Self.size else { throw .bufferTooSmall(needed: Self.size, available: buffer.count) }
        for i in 0 ..< 4 { buffer[i] = Self.magic[i] }
        for i in 0 ..< 4 { buffer[4 + i] = UInt8(truncatingIfNeeded: participantID >> (24 - 8 * UInt32(i))) }
        for i in 0 ..< 8 { buffer[8 + i] = UInt8(truncatingIfNeeded: timestampMs >> (56 - 8 * UInt64(i))) }
        Self.tag(UnsafeRawBufferPointer(rebasing: buffer[0 ..< Self.authenticatedSize]), key: key) { tag in
            for i in 0 ..< Self.tagSize { buffer[Self.authenticatedSize + i] = tag[i] }
        }
        return Self.size
    }

    /// The datagram as a new array (for tests and the rare caller without a buffer).
    public func encoded(key: MediaKey) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.size)
        out.withUnsafeMutableBytes { _ = try? write(into: $0, key: key) }
        return out
    }

    /// The participant id field before authentication, so the server can find which media
    /// key to verify with. Do not act on it until `parse` has succeeded.
    public static func claimedParticipantID(_ datagram: UnsafeRawBufferPointer) throws(BindingError) -> UInt32 {
        try checkShape(datagram)
        return readParticipantID(datagram)
    }

    /// Checks shape and MAC (in constant time) and returns the fields. Never traps.
    public static func parse(_ datagram: UnsafeRawBufferPointer, key: MediaKey) throws(BindingError) -> BindingDatagram {
        try checkShape(datagram)
        let valid = tag(UnsafeRawBufferPointer(rebasing: datagram[0 ..< authenticatedSize]), key: key) { tag in
            HMACSHA256.equal(
                UnsafeRawBufferPointer(rebasing: tag[0 ..< tagSize]),
                UnsafeRawBufferPointer(rebasing: datagram[authenticatedSize ..< size]))
        }
        guard valid else { throw .badTag }
        var timestamp: UInt64 = 0
        for i in 8 ..< 16 { timestamp = timestamp << 8 | UInt64(datagram[i]) }
        return BindingDatagram(participantID: readParticipantID(datagram), timestampMs: timestamp)
    }

    public static func parse(_ datagram: [UInt8], key: MediaKey) throws(BindingError) -> BindingDatagram {
        let result = datagram.withUnsafeBytes { bytes -> Result<BindingDatagram, BindingError> in
            do throws(BindingError) { return .success(try parse(bytes, key: key)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private static func checkShape(_ datagram: UnsafeRawBufferPointer) throws(BindingError) {
        guard datagram.count == size else { throw .wrongLength(datagram.count) }
        guard datagram[0] == magic[0], datagram[1] == magic[1], datagram[2] == magic[2], datagram[3] == magic[3]
        else { throw .badMagic }
    }

    private static func readParticipantID(_ datagram: UnsafeRawBufferPointer) -> UInt32 {
        var id: UInt32 = 0
        for i in 4 ..< 8 { id = id << 8 | UInt32(datagram[i]) }
        return id
    }

    /// The full 32-byte MAC in a stack buffer, handed to `body`.
    private static func tag<R>(
        _ message: UnsafeRawBufferPointer, key: MediaKey, _ body: (UnsafeMutableRawBufferPointer) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(byteCount: HMACSHA256.macSize, alignment: 8) { mac in
            key.bytes.withUnsafeBytes { k in HMACSHA256.authenticate(key: k, message: message, into: mac) }
            return body(mac)
        }
    }
}

/// Why a datagram that started like a binding datagram was dropped. The receiver counts
/// these; it never answers them (an answer would make us a reflector for spoofed traffic).
public enum BindingError: Error, Sendable, Equatable {
    case bufferTooSmall(needed: Int, available: Int)
    case wrongLength(Int)
    case badMagic
    /// Forged, corrupted, or made with another participant's key.
    case badTag
}

/// Accepts a binding timestamp only if it is newer than every one accepted before, so a
/// recorded datagram replayed later (from any address) is refused. One per participant,
/// reset when the participant's media key changes.
///
/// And never far ahead of the sender's clock as this side sees it run: the first accepted
/// timestamp anchors the sender's clock to the receiver's, and a later one may lead that
/// projection by at most `maxLeadMs`. Without the bound, one datagram with a huge timestamp
/// (2⁶⁴−1) made every later genuine one "old": the participant was locked out of its own media
/// for the session (issue 11). With it, a forged lead costs the real sender at most
/// `maxLeadMs` until its own clock passes it. (Forging needs the media key; that the key
/// travels in plaintext signalling is the larger problem, TLS's to solve.)
public struct BindingReplayGuard: Sendable {
    public private(set) var lastAccepted: UInt64?
    private var anchor: (timestampMs: UInt64, receiverMs: Int64)?
    /// The sender's clock may run ahead of the receiver's by this much over a session (clock
    /// rates differ by ppm; this is seconds), plus the network's delay variation.
    public static let maxLeadMs: UInt64 = 10_000

    public init() {}

    /// True (and remembered) when `timestampMs` is newer than the last accepted one and not
    /// more than `maxLeadMs` ahead of the sender's clock projected to `receiverNowMs` (any
    /// millisecond clock of the receiver's that only moves forward).
    public mutating func accept(_ timestampMs: UInt64, receiverNowMs: Int64) -> Bool {
        if let lastAccepted, timestampMs <= lastAccepted { return false }
        if let anchor {
            let elapsed = UInt64(max(0, receiverNowMs - anchor.receiverMs))
            let (limit, overflow) = anchor.timestampMs.addingReportingOverflow(elapsed &+ Self.maxLeadMs)
            if !overflow, timestampMs > limit { return false }
        } else {
            anchor = (timestampMs, receiverNowMs)
        }
        lastAccepted = timestampMs
        return true
    }
}
