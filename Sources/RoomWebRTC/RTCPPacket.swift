/// RTCP (RFC 3550 §6) as the appliance's one audio stream needs it: sender and receiver reports,
/// the SDES CNAME every compound packet must carry, BYE, and a reader that takes any compound
/// packet a WebRTC peer sends and hands over what it knows, skipping what it does not (RTPFB 205,
/// PSFB 206, XR 207, APP 204, anything newer).
///
/// Sans-IO and allocation-free: the writer fills a caller's buffer, the reader walks the caller's
/// bytes and calls back with values. Nothing here knows about sockets, SRTCP or clocks
/// (`RTCPSession` keeps the statistics and the schedule; `WebRTCMediaTransport` does the I/O).

/// Packet types (RFC 3550 §12.1, RFC 4585, RFC 3611).
public enum RTCPPacketType {
    public static let senderReport: UInt8 = 200
    public static let receiverReport: UInt8 = 201
    public static let sourceDescription: UInt8 = 202
    public static let goodbye: UInt8 = 203
    public static let application: UInt8 = 204
    public static let transportFeedback: UInt8 = 205
    public static let payloadFeedback: UInt8 = 206
    public static let extendedReport: UInt8 = 207
}

/// The sender-information part of an SR (RFC 3550 §6.4.1): when the report was made in NTP time
/// and in the stream's RTP clock, and what had been sent by then.
public struct RTCPSenderInfo: Sendable, Equatable {
    /// NTP timestamp, 32.32 fixed point seconds since 1900.
    public var ntpTimestamp: UInt64
    /// The same instant in the stream's RTP timestamp units.
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    /// Payload octets sent (RTP headers and padding not counted).
    public var octetCount: UInt32

    public init(ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32) {
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
    }

    /// The middle 32 bits of the NTP timestamp: what an RR echoes as LSR.
    public var compactNTP: UInt32 { UInt32(truncatingIfNeeded: ntpTimestamp >> 16) }
}

/// One reception report block (RFC 3550 §6.4.1): what the reporter received of `ssrc`'s stream.
public struct RTCPReportBlock: Sendable, Equatable {
    public var ssrc: UInt32
    /// Lost since the previous report, as a fraction of 256.
    public var fractionLost: UInt8
    /// Cumulative lost packets, a 24-bit signed value (duplicates can make it negative).
    public var cumulativeLost: Int32
    /// Highest sequence number received, with the count of wraps in the high 16 bits.
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// The middle 32 bits of the NTP timestamp of the last SR from `ssrc` (0: none yet).
    public var lastSenderReport: UInt32
    /// Time between that SR's arrival and this report, in 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    public init(ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, extendedHighestSequence: UInt32 = 0,
                jitter: UInt32 = 0, lastSenderReport: UInt32 = 0, delaySinceLastSenderReport: UInt32 = 0) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    static let size = 24
}

/// Why a compound packet was refused. The whole datagram is refused: nothing of it is used.
public struct RTCPError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What the reader found, in packet order.
public enum RTCPItem: Sendable, Equatable {
    /// An SR's sender, with its sender information; its report blocks follow as `.reportBlock`.
    case senderReport(ssrc: UInt32, RTCPSenderInfo)
    /// An RR's sender; its report blocks follow.
    case receiverReport(ssrc: UInt32)
    /// A reception report block of the SR or RR before it.
    case reportBlock(from: UInt32, RTCPReportBlock)
    /// An SDES chunk's CNAME (other SDES items are skipped). Bytes as sent, not validated UTF-8.
    case canonicalName(ssrc: UInt32, String)
    /// A BYE for this source (one item per SSRC listed).
    case goodbye(ssrc: UInt32)
    /// A packet of a type this reader does not read (feedback, XR, APP, ...): skipped whole.
    case skipped(packetType: UInt8)
}

public enum RTCPReader {
    /// Reads a compound RTCP packet (RFC 3550 §6.1; after SRTCP has removed its trailer).
    /// The framing is checked over the whole datagram first — version 2, each length inside the
    /// datagram and the lengths adding up to it exactly, padding only at the end, every report
    /// block, SDES chunk and BYE list inside its packet — and only then is `visit` called, so a
    /// bad datagram changes nothing. The first packet need not be an SR or RR (RFC 5506
    /// reduced-size packets from a peer that sends them anyway are read too).
    public static func read(_ bytes: UnsafeRawBufferPointer, _ visit: (RTCPItem) -> Void) throws(RTCPError) {
        try walk(bytes, checkOnly: true) { _ in }
        try walk(bytes, checkOnly: false, visit)
    }

    /// `read`, collected (tests, the fuzz target).
    public static func items(_ bytes: UnsafeRawBufferPointer) throws(RTCPError) -> [RTCPItem] {
        var out: [RTCPItem] = []
        try read(bytes) { out.append($0) }
        return out
    }

    /// True when `bytes` could be RTCP under rtcp-mux (RFC 5761 §4): version 2 and a second
    /// byte of 200-206 with the marker bit aside (RTP payload types 72-78 are never used).
    public static func looksLikeRTCP(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 8 && bytes[0] >> 6 == 2 && (72 ... 78).contains(bytes[1] & 0x7F)
    }

    /// One pass over the compound packet; `checkOnly` makes no items (the first pass).
    private static func walk(_ bytes: UnsafeRawBufferPointer, checkOnly: Bool, _ visit: (RTCPItem) -> Void) throws(RTCPError) {
        guard bytes.count >= 4 else { throw RTCPError("\(bytes.count) bytes: shorter than an RTCP header") }
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= 4 else { throw RTCPError("\(bytes.count - offset) bytes after the last packet") }
            let first = bytes[offset], type = bytes[offset + 1]
            let count = Int(first & 0x1F)
            guard first >> 6 == 2 else { throw RTCPError("packet at \(offset): version \(first >> 6), not 2") }
            let length = ((Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])) + 1) * 4
            guard length <= bytes.count - offset else {
                throw RTCPError("packet at \(offset) (type \(type)) says \(length) bytes; \(bytes.count - offset) remain")
            }
            var end = offset + length
            if first & 0x20 != 0 {
                // Padding (RFC 3550 §6.4.1): only the last packet of a compound may have it.
                guard end == bytes.count else { throw RTCPError("padding in packet at \(offset), which is not the last") }
                let padding = Int(bytes[end - 1])
                guard padding >= 1, padding <= length - 4 else { throw RTCPError("padding of \(padding) bytes in a \(length)-byte packet") }
                end -= padding
            }
            let body = UnsafeRawBufferPointer(rebasing: bytes[offset + 4 ..< end])
            switch type {
            case RTCPPacketType.senderReport, RTCPPacketType.receiverReport:
                let isSR = type == RTCPPacketType.senderReport
                let fixed = isSR ? 24 : 4
                guard body.count >= fixed + count * RTCPReportBlock.size else {
                    throw RTCPError("\(isSR ? "SR" : "RR") at \(offset) with \(count) report blocks in \(body.count) bytes")
                }
                // Anything after the blocks is a profile-specific extension: not read.
                if checkOnly { break }
                let sender = body.loadBigEndianUInt32(at: 0)
                if isSR {
                    visit(.senderReport(ssrc: sender, RTCPSenderInfo(
                        ntpTimestamp: UInt64(body.loadBigEndianUInt32(at: 4)) << 32 | UInt64(body.loadBigEndianUInt32(at: 8)),
                        rtpTimestamp: body.loadBigEndianUInt32(at: 12), packetCount: body.loadBigEndianUInt32(at: 16),
                        octetCount: body.loadBigEndianUInt32(at: 20))))
                } else {
                    visit(.receiverReport(ssrc: sender))
                }
                for i in 0 ..< count {
                    let at = fixed + i * RTCPReportBlock.size
                    let lossWord = body.loadBigEndianUInt32(at: at + 4)
                    // The 24-bit signed cumulative loss, sign-extended.
                    let cumulative = Int32(bitPattern: lossWord << 8) >> 8
                    visit(.reportBlock(from: sender, RTCPReportBlock(
                        ssrc: body.loadBigEndianUInt32(at: at), fractionLost: UInt8(lossWord >> 24), cumulativeLost: cumulative,
                        extendedHighestSequence: body.loadBigEndianUInt32(at: at + 8), jitter: body.loadBigEndianUInt32(at: at + 12),
                        lastSenderReport: body.loadBigEndianUInt32(at: at + 16),
                        delaySinceLastSenderReport: body.loadBigEndianUInt32(at: at + 20))))
                }
            case RTCPPacketType.sourceDescription:
                try readChunks(body, count: count, packetAt: offset, checkOnly: checkOnly, visit)
            case RTCPPacketType.goodbye:
                guard body.count >= count * 4 else { throw RTCPError("BYE at \(offset) lists \(count) sources in \(body.count) bytes") }
                // An optional reason follows the list: not read.
                if !checkOnly { for i in 0 ..< count { visit(.goodbye(ssrc: body.loadBigEndianUInt32(at: i * 4))) } }
            default:
                if !checkOnly { visit(.skipped(packetType: type)) }
            }
            offset += length
        }
    }

    /// SDES chunks (RFC 3550 §6.5): an SSRC, then items (type, length, text) up to a zero type
    /// byte, then zero bytes to the next 32-bit boundary.
    private static func readChunks(_ body: UnsafeRawBufferPointer, count: Int, packetAt: Int, checkOnly: Bool,
                                   _ visit: (RTCPItem) -> Void) throws(RTCPError) {
        var at = 0
        for _ in 0 ..< count {
            guard body.count - at >= 4 else { throw RTCPError("SDES at \(packetAt): chunk past the packet's end") }
            let ssrc = body.loadBigEndianUInt32(at: at)
            at += 4
            while true {
                guard at < body.count else { throw RTCPError("SDES at \(packetAt): chunk without its end item") }
                let itemType = body[at]
                if itemType == 0 { break }
                guard body.count - at >= 2, body.count - at - 2 >= Int(body[at + 1]) else {
                    throw RTCPError("SDES at \(packetAt): item \(itemType) runs past the packet's end")
                }
                let n = Int(body[at + 1])
                if itemType == 1, !checkOnly {
                    let text = UnsafeRawBufferPointer(rebasing: body[at + 2 ..< at + 2 + n])
                    visit(.canonicalName(ssrc: ssrc, String(decoding: text, as: UTF8.self)))
                }
                at += 2 + n
            }
            at = (at + 4) & ~3   // past the end item and the padding to the next word
            guard at <= body.count else { throw RTCPError("SDES at \(packetAt): chunk padding past the packet's end") }
        }
    }
}

/// Writes a compound packet into a caller's buffer: one report (SR or RR) with its blocks, then
/// SDES, then BYE when leaving — the order RFC 3550 §6.1 requires. Every call checks the room
/// left and returns false (writing nothing more) when the packet does not fit.
public struct RTCPWriter: ~Copyable {
    private let buffer: UnsafeMutableRawBufferPointer
    public private(set) var length = 0
    /// Where the open SR/RR starts, while blocks may still be added to it.
    private var reportAt: Int?

    public init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    /// An SR (`info` given) or RR header with no blocks yet.
    public mutating func beginReport(ssrc: UInt32, senderInfo info: RTCPSenderInfo?) -> Bool {
        let size = info == nil ? 8 : 28
        guard buffer.count - length >= size else { return false }
        reportAt = length
        header(type: info == nil ? RTCPPacketType.receiverReport : RTCPPacketType.senderReport, count: 0, size: size)
        put32(ssrc)
        if let info {
            put32(UInt32(truncatingIfNeeded: info.ntpTimestamp >> 32))
            put32(UInt32(truncatingIfNeeded: info.ntpTimestamp))
            put32(info.rtpTimestamp)
            put32(info.packetCount)
            put32(info.octetCount)
        }
        return true
    }

    /// One more block in the open report (at most 31, RFC 3550's 5-bit count).
    public mutating func addBlock(_ block: RTCPReportBlock) -> Bool {
        guard let at = reportAt, buffer[at] & 0x1F < 31, buffer.count - length >= RTCPReportBlock.size else { return false }
        put32(block.ssrc)
        let cumulative = UInt32(bitPattern: min(max(block.cumulativeLost, -0x80_0000), 0x7F_FFFF)) & 0xFF_FFFF
        put32(UInt32(block.fractionLost) << 24 | cumulative)
        put32(block.extendedHighestSequence)
        put32(block.jitter)
        put32(block.lastSenderReport)
        put32(block.delaySinceLastSenderReport)
        buffer[at] = buffer[at] + 1  // not `+=`: see JitterDelayEstimator (ThreadSanitizer build)
        setLength(of: at)
        return true
    }

    /// An SDES packet with one chunk: `ssrc`'s CNAME (at most 255 bytes are sent).
    public mutating func sourceDescription(ssrc: UInt32, cname: [UInt8]) -> Bool {
        reportAt = nil
        let n = min(cname.count, 255)
        // SSRC, CNAME item (type, length, text), at least one zero byte, padded to a word.
        let size = 4 + ((4 + 2 + n + 1 + 3) & ~3)
        guard buffer.count - length >= size else { return false }
        let start = length
        header(type: RTCPPacketType.sourceDescription, count: 1, size: size)
        put32(ssrc)
        put8(1)
        put8(UInt8(n))
        for i in 0 ..< n { put8(cname[i]) }
        while length < start + size { put8(0) }
        return true
    }

    /// A BYE for `ssrc`, no reason given.
    public mutating func goodbye(ssrc: UInt32) -> Bool {
        reportAt = nil
        guard buffer.count - length >= 8 else { return false }
        header(type: RTCPPacketType.goodbye, count: 1, size: 8)
        put32(ssrc)
        return true
    }

    private mutating func header(type: UInt8, count: UInt8, size: Int) {
        let start = length
        put8(0x80 | count)
        put8(type)
        put8(0)
        put8(0)
        setLength(of: start, bytes: size)
    }

    private func setLength(of at: Int, bytes: Int? = nil) {
        let words = ((bytes ?? (length - at)) / 4) - 1
        buffer[at + 2] = UInt8(truncatingIfNeeded: words >> 8)
        buffer[at + 3] = UInt8(truncatingIfNeeded: words)
    }

    private mutating func put8(_ v: UInt8) {
        buffer[length] = v
        length += 1
    }

    private mutating func put32(_ v: UInt32) {
        put8(UInt8(truncatingIfNeeded: v >> 24))
        put8(UInt8(truncatingIfNeeded: v >> 16))
        put8(UInt8(truncatingIfNeeded: v >> 8))
        put8(UInt8(truncatingIfNeeded: v))
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadBigEndianUInt32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16 | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }
}
