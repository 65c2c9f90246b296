import RoomBase

/// RIFF/WAVE decoding and encoding, on byte arrays only: reading and writing files belongs
/// to RoomSystem, so this stays pure and testable.
///
/// Accepted: 16-bit integer PCM and 32-bit IEEE float (also inside WAVE_FORMAT_EXTENSIBLE,
/// which sox writes for more than two channels), 1–32 channels. Unknown chunks (LIST, fact,
/// cue, …) are skipped; chunks of odd size are followed by a pad byte as RIFF requires.
/// The RIFF size field is ignored because streaming writers (arecord to a pipe) leave it
/// wrong; the chunk sizes inside are checked against the real buffer instead.
public enum WAVFile {
    public static let maxChannels = 32

    public static func decode(bytes: [UInt8]) throws(WAVError) -> WAVAudio {
        try bytes.withUnsafeBufferPointer { (buffer) throws(WAVError) -> WAVAudio in
            try decode(LittleEndianBytes(buffer))
        }
    }

    /// 16-bit PCM WAV with the canonical 44-byte header. A trailing partial frame is
    /// dropped; `channels` and `sampleRate` must be valid (as from `decode` or a board profile).
    public static func encode(_ audio: WAVAudio) -> [UInt8] {
        let channels = max(1, min(audio.channels, Int(UInt16.max)))
        let frames = audio.samples.count / channels
        let dataSize = frames * channels * 2
        var out: [UInt8] = []
        out.reserveCapacity(44 + dataSize)
        func u16(_ v: Int) { out.append(UInt8(truncatingIfNeeded: v)); out.append(UInt8(truncatingIfNeeded: v >> 8)) }
        func u32(_ v: Int) { u16(v & 0xFFFF); u16((v >> 16) & 0xFFFF) }
        out += Array("RIFF".utf8); u32(36 + dataSize); out += Array("WAVE".utf8)
        out += Array("fmt ".utf8); u32(16)
        u16(1)                                   // PCM
        u16(channels)
        u32(audio.sampleRate)
        u32(audio.sampleRate * channels * 2)     // byte rate
        u16(channels * 2)                        // block align
        u16(16)                                  // bits per sample
        out += Array("data".utf8); u32(dataSize)
        for s in audio.samples[0..<(frames * channels)] { u16(Int(UInt16(bitPattern: s))) }
        return out
    }

    // MARK: - Decoding

    /// Where a file's audio is and how it is stored: what a reader needs to stream the data
    /// chunk from disk instead of holding the whole file (`WAVStreamReader` in RoomSystem).
    public struct Layout: Sendable, Equatable {
        public var sampleRate: Int
        public var channels: Int
        /// 32-bit IEEE float samples; otherwise 16-bit PCM.
        public var isFloat: Bool
        /// Byte offset of the first sample in the file, and the data chunk's length in bytes
        /// (a whole number of frames).
        public var dataOffset: Int
        public var dataBytes: Int
        public var bytesPerFrame: Int { channels * (isFloat ? 4 : 2) }
        public var frames: Int { dataBytes / bytesPerFrame }
    }

    private struct Format {
        var code: Int
        var channels: Int
        var sampleRate: Int
        var blockAlign: Int
        var bitsPerSample: Int
    }

    private static let formatPCM = 0x0001
    private static let formatFloat = 0x0003
    private static let formatExtensible = 0xFFFE

    private static func decode(_ b: LittleEndianBytes) throws(WAVError) -> WAVAudio {
        let layout = try layout(size: b.count) { offset, count in
            (offset..<min(offset + count, b.count)).map { b.byte($0) }
        }
        let count = layout.dataBytes / (layout.isFloat ? 4 : 2)
        var samples = [Int16](repeating: 0, count: count)
        samples.withUnsafeMutableBufferPointer { out in
            convert(b, from: layout.dataOffset, isFloat: layout.isFloat, count: count, stride: 1, into: out.baseAddress!)
        }
        return WAVAudio(sampleRate: layout.sampleRate, channels: layout.channels, samples: samples)
    }

    /// Walks the RIFF chunks of a file of `size` bytes, reading only chunk headers and the fmt
    /// chunk through `read(offset, count)` (which returns fewer bytes only at the end), so a
    /// caller can stream the audio from disk. Throws what `decode` throws for the same bytes.
    public static func layout(size: Int, read: (_ offset: Int, _ count: Int) -> [UInt8]) throws(WAVError) -> Layout {
        func bytes(_ offset: Int, _ count: Int) -> [UInt8] { read(offset, count) }
        func tags(_ b: [UInt8], at i: Int) -> (tag: String, printable: String) {
            b.withUnsafeBufferPointer { p in (LittleEndianBytes(p).tag(at: i), LittleEndianBytes(p).printableTag(at: i)) }
        }
        let head = bytes(0, 12)
        guard size >= 12, head.count == 12 else {
            throw WAVError("too short: \(size) bytes, a WAV file starts with a 12-byte RIFF header")
        }
        let riff = tags(head, at: 0), type = tags(head, at: 8)
        guard riff.tag == "RIFF" else { throw WAVError("not a WAV file: no RIFF header (starts with \(riff.printable))") }
        guard type.tag == "WAVE" else { throw WAVError("not a WAV file: RIFF type is \(type.printable), expected \"WAVE\"") }
        var format: Format?
        var data: Range<Int>?
        var offset = 12
        while offset < size {
            guard size - offset >= 8 else {
                // A few stray bytes after the last chunk: tolerated once the audio is found.
                if format != nil && data != nil { break }
                throw WAVError("truncated chunk header at byte \(offset): \(size - offset) bytes left, a chunk header needs 8")
            }
            let header = bytes(offset, 8)
            let (id, printable, size32) = header.withUnsafeBufferPointer { p in
                let c = LittleEndianBytes(p)
                return (c.tag(at: 0), c.printableTag(at: 0), c.u32(at: 4))
            }
            let body = offset + 8
            guard size32 <= size - body else {
                throw WAVError("\(printable) chunk at byte \(offset): header says \(size32) bytes but only \(size - body) remain (file truncated?)")
            }
            switch id {
            case "fmt ":
                guard format == nil else { throw WAVError("fmt chunk: appears twice (second at byte \(offset))") }
                let chunk = bytes(body, min(size32, 64))
                format = try chunk.withUnsafeBufferPointer { (p) throws(WAVError) -> Format in
                    try parseFormat(LittleEndianBytes(p), at: 0, size: size32)
                }
            case "data":
                guard data == nil else { throw WAVError("data chunk: appears twice (second at byte \(offset))") }
                data = body..<(body + size32)
            default:
                break   // LIST, fact, cue, bext, …: metadata roomd does not need.
            }
            offset = body + size32 + (size32 & 1)   // RIFF pads odd-sized chunks to an even length.
        }
        guard let format else { throw WAVError("no fmt chunk: the file does not say how its samples are stored") }
        guard let data else { throw WAVError("no data chunk: the file holds no audio") }
        guard data.count % format.blockAlign == 0 else {
            throw WAVError("data chunk: \(data.count) bytes is not a whole number of \(format.blockAlign)-byte frames (\(format.channels) channels × \(format.bitsPerSample / 8) bytes)")
        }
        return Layout(sampleRate: format.sampleRate, channels: format.channels, isFloat: format.code == formatFloat,
                      dataOffset: data.lowerBound, dataBytes: data.count)
    }

    /// One channel of whole frames of a data chunk, as 16-bit samples: `bytes` holds
    /// `out.count` frames laid out as `layout` says; channel 0 is taken (the far end of a
    /// multichannel file is its first channel).
    public static func firstChannel(_ bytes: UnsafeRawBufferPointer, layout: Layout, into out: UnsafeMutableBufferPointer<Int16>) {
        let frames = min(out.count, bytes.count / layout.bytesPerFrame)
        guard frames > 0 else { return }
        convert(LittleEndianBytes(UnsafeBufferPointer(start: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: bytes.count)),
                from: 0, isFloat: layout.isFloat, count: frames, stride: layout.channels, into: out.baseAddress!)
    }

    /// `count` samples, one every `stride` samples from byte `start`, converted to Int16.
    private static func convert(_ b: LittleEndianBytes, from start: Int, isFloat: Bool, count: Int, stride: Int,
                                into out: UnsafeMutablePointer<Int16>) {
        if !isFloat {
            for i in 0..<count { out[i] = Int16(truncatingIfNeeded: b.u16(at: start + 2 * i * stride)) }
        } else {
            for i in 0..<count {
                out[i] = SampleConversion.int16(fromFloat: Float(bitPattern: b.u32bits(at: start + 4 * i * stride)))
            }
        }
    }

    private static func parseFormat(_ b: LittleEndianBytes, at p: Int, size: Int) throws(WAVError) -> Format {
        guard size >= 16 else { throw WAVError("fmt chunk: \(size) bytes, needs at least 16") }
        var code = b.u16(at: p)
        if code == formatExtensible {
            // WAVE_FORMAT_EXTENSIBLE: the real format code is the first two bytes of the
            // SubFormat GUID at offset 24 (after cbSize, valid bits and channel mask).
            guard size >= 40, b.u16(at: p + 16) >= 22 else {
                throw WAVError("fmt chunk: WAVE_FORMAT_EXTENSIBLE but the extension is \(size - 16) bytes, needs 24")
            }
            code = b.u16(at: p + 24)
        }
        let f = Format(code: code, channels: b.u16(at: p + 2), sampleRate: b.u32(at: p + 4),
                       blockAlign: b.u16(at: p + 12), bitsPerSample: b.u16(at: p + 14))
        guard f.code == formatPCM || f.code == formatFloat else {
            throw WAVError("fmt chunk: format code \(hex(f.code))\(formatName(f.code)) is not supported (PCM or IEEE float only)")
        }
        guard f.channels > 0 else { throw WAVError("fmt chunk: 0 channels") }
        guard f.channels <= maxChannels else {
            throw WAVError("fmt chunk: \(f.channels) channels, at most \(maxChannels) are supported")
        }
        guard f.sampleRate > 0 else { throw WAVError("fmt chunk: sample rate is 0") }
        let expectedBits = f.code == formatPCM ? 16 : 32
        guard f.bitsPerSample == expectedBits else {
            let kind = f.code == formatPCM ? "PCM" : "float"
            throw WAVError("fmt chunk: bits per sample \(f.bitsPerSample) is not supported for \(kind) (16-bit PCM or 32-bit float only)")
        }
        let expectedAlign = f.channels * f.bitsPerSample / 8
        guard f.blockAlign == expectedAlign else {
            throw WAVError("fmt chunk: block align \(f.blockAlign) does not match \(f.channels) channels of \(f.bitsPerSample) bits (expected \(expectedAlign))")
        }
        return f
    }

    private static func hex(_ v: Int) -> String { "0x" + hexDigits(UInt32(truncatingIfNeeded: v), width: 4) }

    private static func formatName(_ code: Int) -> String {
        switch code {
        case 0x0002: return " (Microsoft ADPCM)"
        case 0x0006: return " (A-law)"
        case 0x0007: return " (µ-law)"
        case 0x0011: return " (IMA ADPCM)"
        case 0x0055: return " (MP3)"
        default: return ""
        }
    }
}

/// Bounds-aware little-endian reads. Every caller checks the range first; the reads
/// themselves never go past `count`, so no input can make the decoder trap.
struct LittleEndianBytes {
    let base: UnsafeBufferPointer<UInt8>
    init(_ base: UnsafeBufferPointer<UInt8>) { self.base = base }
    var count: Int { base.count }

    func byte(_ i: Int) -> UInt8 { i >= 0 && i < base.count ? base[i] : 0 }
    func u16(at i: Int) -> Int { Int(byte(i)) | Int(byte(i + 1)) << 8 }
    func u32bits(at i: Int) -> UInt32 {
        UInt32(byte(i)) | UInt32(byte(i + 1)) << 8 | UInt32(byte(i + 2)) << 16 | UInt32(byte(i + 3)) << 24
    }
    func u32(at i: Int) -> Int { Int(u32bits(at: i)) }

    /// The four bytes at `i` as ASCII (for comparisons against chunk ids).
    func tag(at i: Int) -> String {
        String(decoding: (i..<(i + 4)).map { byte($0) }, as: UTF8.self)
    }

    /// The four bytes at `i` for an error message: quoted if printable, hex otherwise.
    func printableTag(at i: Int) -> String {
        let bytes = (i..<(i + 4)).map { byte($0) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return "\"" + String(decoding: bytes, as: UTF8.self) + "\""
        }
        return hexBytes(bytes, separator: " ")
    }
}
