/// RFC 4733 telephone events: DTMF digits sent as RTP packets of their own (`telephone-event`
/// in SDP), which survive any codec, unlike tones inside compressed audio.
///
///     0                   1                   2                   3
///     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///    |     event     |E|R| volume    |          duration             |
public struct TelephoneEvent: Sendable, Equatable {
    /// 0-9, 10 (*), 11 (#), 12-15 (A-D).
    public var event: UInt8
    /// The event's last packets (sent three times, RFC 4733 §2.5.1.4).
    public var end: Bool
    /// Power level in −dBm0 (0…63); 10 is the customary level.
    public var volume: UInt8
    /// Since the event began, in the telephone-event clock's ticks.
    public var duration: UInt16

    public static let payloadLength = 4

    public init(event: UInt8, end: Bool, volume: UInt8 = 10, duration: UInt16) {
        self.event = event
        self.end = end
        self.volume = volume
        self.duration = duration
    }

    /// Nil unless the payload is at least one event block with a DTMF event (0-15). Extra
    /// bytes (RFC 4733 allows several events in one packet for redundancy) are ignored.
    public init?(payload: UnsafeRawBufferPointer) {
        guard payload.count >= Self.payloadLength, payload[0] <= 15 else { return nil }
        event = payload[0]
        end = payload[1] & 0x80 != 0
        volume = payload[1] & 0x3F
        duration = UInt16(payload[2]) << 8 | UInt16(payload[3])
    }

    public var bytes: [UInt8] {
        [event, (end ? 0x80 : 0) | (volume & 0x3F), UInt8(duration >> 8), UInt8(duration & 0xFF)]
    }

    /// The digit an event stands for.
    public var digit: Character { Self.digits[Int(event)] }

    /// The event code of a DTMF digit (case-insensitive A-D), nil for anything else.
    public static func code(of digit: Character) -> UInt8? {
        let upper = Character(digit.uppercased())
        return digits.firstIndex(of: upper).map { UInt8($0) }
    }

    private static let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "#", "A", "B", "C", "D"]
}
