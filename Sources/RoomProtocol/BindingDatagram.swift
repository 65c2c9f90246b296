import RoomCrypto

/// The UDP binding/keepalive datagram (docs/protocol.md, "Binding/keepalive datagram"):
///
///     0       4                8                        16                      32            48
///     | "RMB1" | participant id | timestamp (ms)         | HMAC-SHA256[0..<16]  |
///     | "RMB2" | participant id | timestamp (ms)         | address cookie       | HMAC[0..<16] |
///     | "RMC1" | 0              | timestamp echoed       | address cookie       | HMAC[0..<16] |
///              (UInt32 BE)      (UInt64 BE)                                      over the bytes
///                                                                                 before it
///
/// It shares the media socket with RTP and is told apart by its first byte: RTP version 2
/// puts 0b10 in the top bits (0x80...0xBF), while "R" is 0x52. The client sends one before
/// any RTP so that NAT bindings exist when the server starts forwarding, then one every
/// `BindingDatagram.interval` seconds; the server authenticates it with the participant's
/// media key and answers with participant id 0 and the client's timestamp echoed, so the
/// client knows the path works both ways and can measure the round trip.
///
/// The MAC makes the datagram unforgeable without the media key; the timestamp, which must
/// grow (see `BindingReplayGuard`), stops a captured datagram from being replayed from
/// another address to steal a participant's media. The **address cookie** stops the key's own
/// holder from pointing its media at someone else (a binding with a spoofed source address
/// turned the server into an ~8900× amplifier: issue 27): the server moves a participant's
/// media to a new address only when the binding from there echoes the cookie the server sent
/// to that very address — a `challenge` (RMC1) answers a binding from an address not yet
/// proven, an ordinary answer (RMB2) carries the cookie too. A client that cannot receive
/// at an address never learns its cookie.
public struct BindingDatagram: Sendable, Hashable {
    public static let magic: [UInt8] = Array("RMB1".utf8)
    static let magicWithCookie: [UInt8] = Array("RMB2".utf8)
    static let challengeMagic: [UInt8] = Array("RMC1".utf8)
    /// Without a cookie (RMB1), and with one (RMB2, RMC1).
    public static let size = 32
    public static let sizeWithCookie = 48
    public static let tagSize = 16
    /// Seconds between keepalives (NAT mappings commonly expire after 30 s or more).
    public static let interval = 5
    /// The participant id the server puts in its answers.
    public static let serverParticipantID: UInt32 = 0

    public var participantID: UInt32
    /// Sender's clock in milliseconds; any clock that only moves forward within a session.
    public var timestampMs: UInt64
    /// The address cookie: from the server, the one for the address it answers; from a
    /// client, the last one the server sent it (nil: none yet).
    public var cookie: AddressCookie?
    /// A server's answer to a binding from an address it has not seen prove itself: nothing
    /// moved; the client sends its next binding with `cookie` at once.
    public var isChallenge: Bool

    public init(participantID: UInt32, timestampMs: UInt64, cookie: AddressCookie? = nil, isChallenge: Bool = false) {
        self.participantID = participantID
        self.timestampMs = timestampMs
        self.cookie = isChallenge ? cookie ?? AddressCookie(high: 0, low: 0) : cookie
        self.isChallenge = isChallenge
    }

    /// How many bytes `write` puts out.
    public var encodedSize: Int { cookie == nil ? Self.size : Self.sizeWithCookie }

    /// True when the datagram starts like a binding datagram rather than RTP; the cheap
    /// first test on every datagram received on the media socket.
    public static func looksLikeBinding(_ datagram: UnsafeRawBufferPointer) -> Bool {
        datagram.count >= 1 && datagram[0] == magic[0]
    }

    /// Writes the datagram into the first `encodedSize` bytes of `buffer` and returns that.
    /// Does not allocate.
    @discardableResult
    public func write(into buffer: UnsafeMutableRawBufferPointer, key: MediaKey) throws(BindingError) -> Int {
        let size = encodedSize
        guard buffer.count >= size else { throw .bufferTooSmall(needed: size, available: buffer.count) }
        let m = isChallenge ? Self.challengeMagic : cookie == nil ? Self.magic : Self.magicWithCookie
        for i in 0 ..< 4 { buffer[i] = m[i] }
        for i in 0 ..< 4 { buffer[4 + i] = UInt8(truncatingIfNeeded: participantID >> (24 - 8 * UInt32(i))) }
        for i in 0 ..< 8 { buffer[8 + i] = UInt8(truncatingIfNeeded: timestampMs >> (56 - 8 * UInt64(i))) }
        if let cookie {
            for i in 0 ..< 8 {
                buffer[16 + i] = UInt8(truncatingIfNeeded: cookie.high >> (56 - 8 * UInt64(i)))
                buffer[24 + i] = UInt8(truncatingIfNeeded: cookie.low >> (56 - 8 * UInt64(i)))
            }
        }
        let authenticated = size - Self.tagSize
        Self.tag(UnsafeRawBufferPointer(rebasing: buffer[0 ..< authenticated]), key: key) { tag in
            for i in 0 ..< Self.tagSize { buffer[authenticated + i] = tag[i] }
        }
        return size
    }

    /// The datagram as a new array (for tests and the rare caller without a buffer).
    public func encoded(key: MediaKey) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: encodedSize)
        out.withUnsafeMutableBytes { _ = try? write(into: $0, key: key) }
        return out
    }

    /// The participant id field before authentication, so the server can find which media
    /// key to verify with. Do not act on it until `parse` has succeeded.
    public static func claimedParticipantID(_ datagram: UnsafeRawBufferPointer) throws(BindingError) -> UInt32 {
        _ = try checkShape(datagram)
        return readParticipantID(datagram)
    }

    /// Checks shape and MAC (in constant time) and returns the fields. Never traps.
    public static func parse(_ datagram: UnsafeRawBufferPointer, key: MediaKey) throws(BindingError) -> BindingDatagram {
        let kind = try checkShape(datagram)
        let authenticated = datagram.count - tagSize
        let valid = tag(UnsafeRawBufferPointer(rebasing: datagram[0 ..< authenticated]), key: key) { tag in
            ConstantTime.equal(
                UnsafeRawBufferPointer(rebasing: tag[0 ..< tagSize]),
                UnsafeRawBufferPointer(rebasing: datagram[authenticated ..< datagram.count]))
        }
        guard valid else { throw .badTag }
        var timestamp: UInt64 = 0
        for i in 8 ..< 16 { timestamp = timestamp << 8 | UInt64(datagram[i]) }
        var cookie: AddressCookie?
        if kind != .plain {
            var high: UInt64 = 0, low: UInt64 = 0
            for i in 0 ..< 8 {
                high = high << 8 | UInt64(datagram[16 + i])
                low = low << 8 | UInt64(datagram[24 + i])
            }
            cookie = AddressCookie(high: high, low: low)
        }
        return BindingDatagram(participantID: readParticipantID(datagram), timestampMs: timestamp, cookie: cookie,
                               isChallenge: kind == .challenge)
    }

    public static func parse(_ datagram: [UInt8], key: MediaKey) throws(BindingError) -> BindingDatagram {
        let result = datagram.withUnsafeBytes { bytes -> Result<BindingDatagram, BindingError> in
            do throws(BindingError) { return .success(try parse(bytes, key: key)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private enum Shape { case plain, withCookie, challenge }

    private static func checkShape(_ datagram: UnsafeRawBufferPointer) throws(BindingError) -> Shape {
        guard datagram.count == size || datagram.count == sizeWithCookie else { throw .wrongLength(datagram.count) }
        func starts(_ m: [UInt8]) -> Bool { datagram[0] == m[0] && datagram[1] == m[1] && datagram[2] == m[2] && datagram[3] == m[3] }
        if datagram.count == size {
            guard starts(magic) else { throw .badMagic }
            return .plain
        }
        if starts(magicWithCookie) { return .withCookie }
        if starts(challengeMagic) { return .challenge }
        throw .badMagic
    }

    private static func readParticipantID(_ datagram: UnsafeRawBufferPointer) -> UInt32 {
        var id: UInt32 = 0
        for i in 4 ..< 8 { id = id << 8 | UInt32(datagram[i]) }
        return id
    }

    /// The full 32-byte MAC in a stack buffer, handed to `body`.
    static func tag<R>(
        _ message: UnsafeRawBufferPointer, key: MediaKey, _ body: (UnsafeMutableRawBufferPointer) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(byteCount: HMAC.sha256Size, alignment: 8) { mac in
            key.bytes.withUnsafeBytes { k in HMAC.sha256(key: k, message: message, into: mac) }
            return body(mac)
        }
    }
}

/// 16 bytes the server derives from a participant and the address a binding came from, and
/// sends only to that address: echoed in a binding, it shows that the sender receives there.
public struct AddressCookie: Sendable, Hashable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// HMAC-SHA256(`secret`, epoch ‖ participant ‖ `address`), its first 16 bytes. The epoch
    /// (a minute of the server's clock, say) bounds how long a cookie can be echoed.
    public static func derive(secret: MediaKey, epoch: UInt64, participantID: UInt32, address: [UInt8]) -> AddressCookie {
        var message = [UInt8](repeating: 0, count: 12)
        for i in 0 ..< 8 { message[i] = UInt8(truncatingIfNeeded: epoch >> (56 - 8 * UInt64(i))) }
        for i in 0 ..< 4 { message[8 + i] = UInt8(truncatingIfNeeded: participantID >> (24 - 8 * UInt32(i))) }
        message += address
        return message.withUnsafeBytes { m in
            BindingDatagram.tag(m, key: secret) { mac in
                var high: UInt64 = 0, low: UInt64 = 0
                for i in 0 ..< 8 {
                    high = high << 8 | UInt64(mac[i])
                    low = low << 8 | UInt64(mac[8 + i])
                }
                return AddressCookie(high: high, low: low)
            }
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
