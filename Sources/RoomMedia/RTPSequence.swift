/// Sequence-number and timestamp arithmetic for RTP (RFC 3550 §A.1).
///
/// RTP sequence numbers are 16 bits and timestamps 32 bits; both wrap. Comparisons are made
/// on the signed difference ("serial number arithmetic"): `a` is newer than `b` when
/// `a - b` (mod 2^16) lies in 1...32767.
public enum RTPSequence {
    /// Signed distance from `a` to `b` (how far `b` is ahead of `a`), in -32768...32767.
    /// `distance(from: 65535, to: 0) == 1`.
    @inlinable
    public static func distance(from a: UInt16, to b: UInt16) -> Int {
        Int(Int16(bitPattern: b &- a))
    }

    /// True when `a` comes after `b` in sequence order, across the wrap at 65535.
    @inlinable
    public static func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
        distance(from: b, to: a) > 0
    }

    /// The RFC 3550 32-bit extended sequence number: wrap `cycles` in the high 16 bits.
    @inlinable
    public static func extended(_ sequence: UInt16, cycles: UInt16) -> UInt32 {
        UInt32(cycles) << 16 | UInt32(sequence)
    }

    /// Signed distance between two RTP timestamps (how far `b` is ahead of `a`).
    @inlinable
    public static func timestampDistance(from a: UInt32, to b: UInt32) -> Int64 {
        Int64(Int32(bitPattern: b &- a))
    }
}

/// Turns 16-bit RTP sequence numbers into a monotonic 64-bit count.
///
/// Each value is placed relative to the highest one seen so far (the nearest of the
/// candidates across the wrap), so reordering of up to 32767 packets is understood. The
/// first value maps to itself; values older than the first may come out negative.
public struct RTPSequenceUnwrapper: Sendable {
    /// Highest unwrapped value seen, or nil before the first.
    public private(set) var highest: Int64?

    public init() {}

    /// Unwraps `sequence` and updates `highest` when it is newer.
    public mutating func unwrap(_ sequence: UInt16) -> Int64 {
        let value = peek(sequence)
        if let h = highest, value <= h { return value }
        highest = value
        return value
    }

    /// Unwraps without updating the state.
    public func peek(_ sequence: UInt16) -> Int64 {
        guard let h = highest else { return Int64(sequence) }
        return h + Int64(RTPSequence.distance(from: UInt16(truncatingIfNeeded: h), to: sequence))
    }

    /// The RFC 3550 extended highest sequence number (cycles << 16 | seq), as sent in
    /// receiver reports. Zero before the first packet.
    public var extendedHighest: UInt32 { UInt32(truncatingIfNeeded: highest ?? 0) }

    public mutating func reset() { highest = nil }
}

/// Turns 32-bit RTP timestamps into a monotonic 64-bit count (same rule as
/// `RTPSequenceUnwrapper`, with a window of ±2^31 ticks — 12 hours at 48 kHz).
public struct RTPTimestampUnwrapper: Sendable {
    public private(set) var highest: Int64?

    public init() {}

    public mutating func unwrap(_ timestamp: UInt32) -> Int64 {
        let value = peek(timestamp)
        if let h = highest, value <= h { return value }
        highest = value
        return value
    }

    public func peek(_ timestamp: UInt32) -> Int64 {
        guard let h = highest else { return Int64(timestamp) }
        return h + RTPSequence.timestampDistance(from: UInt32(truncatingIfNeeded: h), to: timestamp)
    }

    public mutating func reset() { highest = nil }
}
