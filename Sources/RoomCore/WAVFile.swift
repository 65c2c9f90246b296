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
        guard b.count >= 12 else {
            throw WAVError("too short: \(b.count) bytes, a WAV file starts with a 12-byte RIFF header")
        }
        guard b.tag(at: 0) == "RIFF" else {
            throw WAVError("not a WAV file: no RIFF header (starts with \(b.printableTag(at: 0)))")
        }
        guard b.tag(at: 8) == "WAVE" else {
            throw WAVError("not a WAV file: RIFF type is \(b.printableTag(at: 8)), expected \"WAVE\"")
        }
        var format: Format?
        var data: Range<Int>?
        var offset = 12
        while offset < b.count {
            guard b.count - offset >= 8 else {
                // A few stray bytes after the last chunk: tolerated once the audio is found.
                if format != nil && data != nil { break }
                throw WAVError("truncated chunk header at byte \(offset): \(b.count - offset) bytes left, a chunk header needs 8")
            }
            let id = b.tag(at: offset)
            let size = b.u32(at: offset + 4)
            let body = offset + 8
            guard size <= b.count - body else {
                throw WAVError("\(b.printableTag(at: offset)) chunk at byte \(offset): header says \(size) bytes but only \(b.count - body) remain (file truncated?)")
            }
            switch id {
            case "fmt ":
                guard format == nil else { throw WAVError("fmt chunk: appears twice (second at byte \(offset))") }
                format = try parseFormat(b, at: body, size: size)
            case "data":
                guard data == nil else { throw WAVError("data chunk: appears twice (second at byte \(offset))") }
                data = body..<(body + size)
            default:
                break   // LIST, fact, cue, bext, …: metadata roomd does not need.
            }
            offset = body + size + (size & 1)   // RIFF pads odd-sized chunks to an even length.
        }
        guard let format else { throw WAVError("no fmt chunk: the file does not say how its samples are stored") }
        guard let data else { throw WAVError("no data chunk: the file holds no audio") }
        guard data.count % format.blockAlign == 0 else {
            throw WAVError("data chunk: \(data.count) bytes is not a whole number of \(format.blockAlign)-byte frames (\(format.channels) channels × \(format.bitsPerSample / 8) bytes)")
        }
        let count = data.count / (format.bitsPerSample / 8)
        var samples = [Int16](repeating: 0, count: count)
        samples.withUnsafeMutableBufferPointer { out in
            if format.code == formatPCM {
                for i in 0..<count { out[i] = Int16(truncatingIfNeeded: b.u16(at: data.lowerBound + 2 * i)) }
            } else {
                for i in 0..<count {
                    let x = Float(bitPattern: b.u32bits(at: data.lowerBound + 4 * i))
                    out[i] = SampleConversion.int16(fromFloat: x)
                }
            }
        }
        return WAVAudio(sampleRate: format.sampleRate, channels: format.channels, samples: samples)
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

    private static func hex(_ v: Int) -> String {
        let digits = String(v, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

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
        return bytes.map { b in
            let h = String(b, radix: 16)
            return h.count == 1 ? "0" + h : h
        }.joined(separator: " ")
    }
}
