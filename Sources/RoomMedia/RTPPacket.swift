/// An RTP packet header (RFC 3550 §5.1) with the payload located by range, not copied.
///
/// Parsing never traps: every length is checked against the datagram before a byte is
/// read, and a malformed datagram yields an `RTPParseError` naming the field at fault.
/// Parsing does not allocate (CSRCs are kept inline), so it can run on any thread.
///
/// Serializing writes the 12-byte fixed header, optionally followed by a one-byte-form
/// header extension (RFC 8285, profile 0xBEDE) holding the client-to-mixer audio level
/// (RFC 6464), then optionally the payload, into a caller-provided buffer. It never
/// allocates. It writes no CSRCs and no padding (the appliance never mixes or encrypts).
///
/// Opus is carried per RFC 7587: the RTP clock is always 48 kHz whatever the codec's
/// internal rate, the payload type is dynamic (`RTPPacket.opusPayloadType`, 111 by
/// convention), and one RTP packet holds one Opus packet.
public struct RTPPacket: Sendable {
    /// The only RTP version this code speaks.
    public static let version: UInt8 = 2
    /// Size of the fixed header, without CSRCs or extension.
    public static let fixedHeaderSize = 12
    /// Profile identifying the RFC 8285 one-byte header extension form.
    public static let oneByteExtensionProfile: UInt16 = 0xBEDE
    /// The dynamic payload type used for Opus (RFC 7587 leaves the choice to signalling).
    public static let opusPayloadType: UInt8 = 111
    /// RTP clock rate for Opus: always 48 kHz (RFC 7587 §4.1).
    public static let opusClockRate = 48_000
    /// Default header-extension id for the audio level (negotiated in real SDP; fixed here).
    public static let defaultAudioLevelExtensionID: UInt8 = 1
    /// Bytes `serialize` adds for the audio-level extension: 4 (profile + length) + 4
    /// (id/len byte, level byte, two padding bytes to the 32-bit boundary).
    public static let audioLevelExtensionSize = 8

    public var marker: Bool
    /// 7-bit payload type.
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32
    /// Contributing sources, valid for `0..<csrcCount`. Filled by parsing; `serialize`
    /// ignores them.
    public var csrcs: InlineArray<15, UInt32>
    public var csrcCount: Int
    /// Client-to-mixer audio level (RFC 6464) found in or to be written to the extension.
    public var audioLevel: RTPAudioLevel?
    /// The header extension's profile field when the X bit was set (parse only).
    public var extensionProfile: UInt16?
    /// Byte range of the header extension's data (after its 4-byte header) in the datagram.
    public var extensionRange: Range<Int>
    /// Number of padding bytes at the end of the datagram (P bit; parse only).
    public var paddingLength: Int
    /// Where the payload starts in the datagram.
    public var payloadOffset: Int
    /// Payload length in bytes (padding excluded).
    public var payloadLength: Int

    /// Payload bytes as a range of the datagram.
    public var payloadRange: Range<Int> { payloadOffset ..< payloadOffset + payloadLength }

    /// A header to serialize. Payload location fields are zero until `serialize` is used
    /// on a datagram or the packet is parsed.
    public init(
        payloadType: UInt8 = RTPPacket.opusPayloadType,
        sequenceNumber: UInt16,
        timestamp: UInt32,
        ssrc: UInt32,
        marker: Bool = false,
        audioLevel: RTPAudioLevel? = nil
    ) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = InlineArray(repeating: 0)
        self.csrcCount = 0
        self.audioLevel = audioLevel
        self.extensionProfile = nil
        self.extensionRange = 0 ..< 0
        self.paddingLength = 0
        self.payloadOffset = 0
        self.payloadLength = 0
    }

    /// The payload of `datagram` (the one this packet was parsed from), without copying.
    public func payload(in datagram: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard payloadLength > 0, payloadOffset >= 0, payloadOffset + payloadLength <= datagram.count else {
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(rebasing: datagram[payloadRange])
    }

    /// The CSRCs as an array (allocates; for tests and diagnostics).
    public var csrcList: [UInt32] {
        var list: [UInt32] = []
        for i in 0 ..< csrcCount { list.append(csrcs[i]) }
        return list
    }
}

// MARK: - Parsing

/// Why a datagram is not an RTP packet this code accepts.
public enum RTPParseError: Error, Equatable, Sendable {
    /// Shorter than the 12-byte fixed header.
    case truncatedHeader(length: Int)
    /// Version field is not 2.
    case unsupportedVersion(UInt8)
    /// The CSRC count says the list runs past the end of the datagram.
    case csrcListPastEnd(csrcCount: Int, length: Int)
    /// X bit set but no room for the 4-byte extension header.
    case extensionHeaderPastEnd(offset: Int, length: Int)
    /// The extension's length field (in 32-bit words) runs past the end.
    case extensionPastEnd(declaredBytes: Int, available: Int)
    /// An element inside a one- or two-byte header extension runs past the extension.
    case extensionElementPastEnd(id: UInt8, offset: Int)
    /// P bit set but the padding count is zero or larger than what follows the header.
    case invalidPadding(count: Int, available: Int)
    /// Audio-level extension element present with no data byte.
    case emptyAudioLevelElement
}

extension RTPPacket {
    /// Parses `datagram`. `audioLevelExtensionID` (1...14 for the one-byte form, 1...255
    /// for the two-byte form) is the id negotiated for RFC 6464; other elements are skipped.
    public static func parse(
        _ datagram: UnsafeRawBufferPointer,
        audioLevelExtensionID: UInt8 = RTPPacket.defaultAudioLevelExtensionID
    ) throws(RTPParseError) -> RTPPacket {
        let n = datagram.count
        guard n >= fixedHeaderSize, let base = datagram.baseAddress else {
            throw .truncatedHeader(length: n)
        }
        @inline(__always) func byte(_ i: Int) -> UInt8 { base.load(fromByteOffset: i, as: UInt8.self) }
        @inline(__always) func u16(_ i: Int) -> UInt16 { UInt16(byte(i)) << 8 | UInt16(byte(i + 1)) }
        @inline(__always) func u32(_ i: Int) -> UInt32 { UInt32(u16(i)) << 16 | UInt32(u16(i + 2)) }

        let b0 = byte(0)
        let version = b0 >> 6
        guard version == RTPPacket.version else { throw .unsupportedVersion(version) }
        let hasPadding = b0 & 0x20 != 0
        let hasExtension = b0 & 0x10 != 0
        let cc = Int(b0 & 0x0F)
        let b1 = byte(1)

        var packet = RTPPacket(
            payloadType: b1 & 0x7F, sequenceNumber: u16(2), timestamp: u32(4), ssrc: u32(8),
            marker: b1 & 0x80 != 0)

        var offset = fixedHeaderSize
        guard offset + 4 * cc <= n else { throw .csrcListPastEnd(csrcCount: cc, length: n) }
        for i in 0 ..< cc {
            packet.csrcs[i] = u32(offset)
            offset += 4
        }
        packet.csrcCount = cc

        if hasExtension {
            guard offset + 4 <= n else { throw .extensionHeaderPastEnd(offset: offset, length: n) }
            let profile = u16(offset)
            let bytes = Int(u16(offset + 2)) * 4
            offset += 4
            guard offset + bytes <= n else { throw .extensionPastEnd(declaredBytes: bytes, available: n - offset) }
            packet.extensionProfile = profile
            packet.extensionRange = offset ..< offset + bytes
            packet.audioLevel = try findAudioLevel(
                base: base, range: offset ..< offset + bytes, profile: profile, id: audioLevelExtensionID)
            offset += bytes
        }

        var end = n
        if hasPadding {
            // The last byte counts the padding, itself included (RFC 3550 §5.1).
            let count = Int(byte(n - 1))
            guard count >= 1, count <= n - offset else { throw .invalidPadding(count: count, available: n - offset) }
            packet.paddingLength = count
            end = n - count
        }
        packet.payloadOffset = offset
        packet.payloadLength = end - offset
        return packet
    }

    /// Parses a datagram held in an array.
    public static func parse(
        _ datagram: [UInt8],
        audioLevelExtensionID: UInt8 = RTPPacket.defaultAudioLevelExtensionID
    ) throws(RTPParseError) -> RTPPacket {
        let result: Result<RTPPacket, RTPParseError> = datagram.withUnsafeBytes { raw in
            do throws(RTPParseError) {
                return .success(try parse(raw, audioLevelExtensionID: audioLevelExtensionID))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Walks RFC 8285 elements looking for the audio-level id. Other profiles are opaque.
    private static func findAudioLevel(
        base: UnsafeRawPointer, range: Range<Int>, profile: UInt16, id wanted: UInt8
    ) throws(RTPParseError) -> RTPAudioLevel? {
        @inline(__always) func byte(_ i: Int) -> UInt8 { base.load(fromByteOffset: i, as: UInt8.self) }
        var found: RTPAudioLevel?
        var i = range.lowerBound
        if profile == oneByteExtensionProfile {
            while i < range.upperBound {
                let b = byte(i)
                let id = b >> 4
                if id == 0 { i += 1; continue }   // padding byte between elements
                if id == 15 { break }              // reserved: stop processing (RFC 8285 §4.2)
                let length = Int(b & 0x0F) + 1
                guard i + 1 + length <= range.upperBound else { throw .extensionElementPastEnd(id: id, offset: i) }
                if id == wanted, found == nil { found = RTPAudioLevel(byte: byte(i + 1)) }
                i += 1 + length
            }
        } else if profile & 0xFFF0 == 0x1000 {
            // Two-byte form (RFC 8285 §4.3): id byte, length byte, data.
            while i < range.upperBound {
                let id = byte(i)
                if id == 0 { i += 1; continue }
                guard i + 2 <= range.upperBound else { throw .extensionElementPastEnd(id: id, offset: i) }
                let length = Int(byte(i + 1))
                guard i + 2 + length <= range.upperBound else { throw .extensionElementPastEnd(id: id, offset: i) }
                if id == wanted, found == nil {
                    guard length >= 1 else { throw .emptyAudioLevelElement }
                    found = RTPAudioLevel(byte: byte(i + 2))
                }
                i += 2 + length
            }
        }
        return found
    }
}

// MARK: - Serializing

/// Why a packet could not be written.
public enum RTPSerializeError: Error, Equatable, Sendable {
    /// The destination holds `available` bytes; `needed` are required.
    case bufferTooSmall(needed: Int, available: Int)
    /// Payload type above 127.
    case invalidPayloadType(UInt8)
    /// One-byte extension ids are 1...14.
    case invalidExtensionID(UInt8)
}

extension RTPPacket {
    /// Bytes of header `serialize` writes: 12, or 20 with an audio level.
    public var serializedHeaderLength: Int {
        RTPPacket.fixedHeaderSize + (audioLevel == nil ? 0 : RTPPacket.audioLevelExtensionSize)
    }

    /// Writes the header (and audio-level extension if `audioLevel` is set) at the start of
    /// `destination`; returns its length. Lets an encoder write its payload in place after it.
    public func serializeHeader(
        into destination: UnsafeMutableRawBufferPointer,
        audioLevelExtensionID: UInt8 = RTPPacket.defaultAudioLevelExtensionID
    ) throws(RTPSerializeError) -> Int {
        guard payloadType <= 0x7F else { throw .invalidPayloadType(payloadType) }
        if audioLevel != nil, !(1 ... 14).contains(audioLevelExtensionID) {
            throw .invalidExtensionID(audioLevelExtensionID)
        }
        let length = serializedHeaderLength
        guard destination.count >= length, let base = destination.baseAddress else {
            throw .bufferTooSmall(needed: length, available: destination.count)
        }
        @inline(__always) func put(_ i: Int, _ v: UInt8) { base.storeBytes(of: v, toByteOffset: i, as: UInt8.self) }
        @inline(__always) func put16(_ i: Int, _ v: UInt16) { put(i, UInt8(v >> 8)); put(i + 1, UInt8(v & 0xFF)) }
        @inline(__always) func put32(_ i: Int, _ v: UInt32) { put16(i, UInt16(v >> 16)); put16(i + 2, UInt16(v & 0xFFFF)) }

        put(0, RTPPacket.version << 6 | (audioLevel == nil ? 0 : 0x10))
        put(1, (marker ? 0x80 : 0) | payloadType)
        put16(2, sequenceNumber)
        put32(4, timestamp)
        put32(8, ssrc)
        if let level = audioLevel {
            put16(12, RTPPacket.oneByteExtensionProfile)
            put16(14, 1)                          // one 32-bit word of elements follows
            put(16, audioLevelExtensionID << 4)   // L = 0: one data byte (RFC 6464 §3)
            put(17, level.byte)
            put(18, 0)                            // padding to the word boundary
            put(19, 0)
        }
        return length
    }

    /// Writes header and `payload` into `destination`; returns the datagram length.
    public func serialize(
        payload: UnsafeRawBufferPointer,
        into destination: UnsafeMutableRawBufferPointer,
        audioLevelExtensionID: UInt8 = RTPPacket.defaultAudioLevelExtensionID
    ) throws(RTPSerializeError) -> Int {
        let total = serializedHeaderLength + payload.count
        guard destination.count >= total else {
            throw .bufferTooSmall(needed: total, available: destination.count)
        }
        let header = try serializeHeader(into: destination, audioLevelExtensionID: audioLevelExtensionID)
        if payload.count > 0, let src = payload.baseAddress, let dst = destination.baseAddress {
            (dst + header).copyMemory(from: src, byteCount: payload.count)
        }
        return total
    }
}

// MARK: - Audio level (RFC 6464)

/// Client-to-mixer audio level: a voice-activity flag and the level in -dBov (0 = full
/// scale, 127 = -127 dBov or quieter, i.e. digital silence).
public struct RTPAudioLevel: Equatable, Sendable {
    /// Sender's voice activity decision (the V bit).
    public var voiceActivity: Bool
    /// Level as a positive number of dB below overload, 0...127.
    public var level: UInt8

    /// `level` is clamped to 0...127.
    public init(voiceActivity: Bool, level: UInt8) {
        self.voiceActivity = voiceActivity
        self.level = min(level, 127)
    }

    /// From a level in dBov (≤ 0; positive values clamp to 0, below -127 to 127).
    public init(voiceActivity: Bool, dBov: Double) {
        self.voiceActivity = voiceActivity
        if !(dBov < 0) {   // also catches NaN
            self.level = dBov.isNaN ? 127 : 0
        } else if dBov <= -127 {
            self.level = 127
        } else {
            self.level = UInt8((-dBov).rounded())
        }
    }

    /// The level in dBov (0 or negative).
    public var dBov: Double { -Double(level) }

    /// Decodes the extension's data byte.
    public init(byte: UInt8) {
        voiceActivity = byte & 0x80 != 0
        level = byte & 0x7F
    }

    /// The extension's data byte: V in the top bit, level below.
    public var byte: UInt8 { (voiceActivity ? 0x80 : 0) | (level & 0x7F) }
}
