/// G.711 (ITU-T G.711, 1988): 8 kHz samples, one byte each, μ-law (PCMU, RTP payload type 0)
/// or A-law (PCMA, 8). What every phone gateway and PBX speaks; a call falls back to it when the
/// far end offers neither Opus nor G.722. Stateless, so the same functions serve every call.
///
/// Computed from the segment formulas rather than tables: eight segments of sixteen steps,
/// a sign bit, and the bit inversions the standard puts on the wire (all bits for μ-law, the
/// even bits for A-law, so that silence is not a run of zeros on old trunks).
public enum G711 {
    /// μ-law's bias: the encoder adds it before finding the segment, so segment 0 starts at
    /// 33 rather than 0 and the curve is continuous.
    private static let muLawBias: Int32 = 0x84
    private static let muLawClip: Int32 = 32_635

    /// One 16-bit linear sample to a μ-law byte.
    @inline(__always)
    public static func muLaw(fromLinear sample: Int16) -> UInt8 {
        var s = Int32(sample)
        let sign: UInt8 = s < 0 ? 0x80 : 0
        if s < 0 { s = -s }
        s = min(s, muLawClip) + muLawBias
        let segment = segmentOf(s >> 7)
        let mantissa = UInt8((s >> (segment + 3)) & 0x0F)
        return ~(sign | UInt8(segment) << 4 | mantissa)
    }

    /// A μ-law byte to its 16-bit linear value (the centre of its step).
    @inline(__always)
    public static func linear(fromMuLaw byte: UInt8) -> Int16 {
        let u = ~byte
        let segment = Int32((u >> 4) & 0x07)
        let mantissa = Int32(u & 0x0F)
        let magnitude = ((mantissa << 3) + muLawBias) << segment - muLawBias
        return Int16(u & 0x80 != 0 ? -magnitude : magnitude)
    }

    /// One 16-bit linear sample to an A-law byte (the standard works on 13 bits: the sample's
    /// top 13 bits).
    @inline(__always)
    public static func aLaw(fromLinear sample: Int16) -> UInt8 {
        var s = Int32(sample) >> 3
        let sign: UInt8 = s >= 0 ? 0x80 : 0
        if s < 0 { s = -s - 1 }
        s = min(s, 0x0FFF)
        let byte: UInt8
        if s < 32 {
            byte = sign | UInt8(s >> 1)
        } else {
            let segment = segmentOf(s >> 5) + 1
            byte = sign | UInt8(segment) << 4 | UInt8((s >> segment) & 0x0F)
        }
        return byte ^ 0x55
    }

    /// An A-law byte to its 16-bit linear value.
    @inline(__always)
    public static func linear(fromALaw byte: UInt8) -> Int16 {
        let a = byte ^ 0x55
        let segment = Int32((a >> 4) & 0x07)
        var magnitude = (Int32(a & 0x0F) << 4) + 8
        if segment != 0 { magnitude = (magnitude + 0x100) << (segment - 1) }
        return Int16(a & 0x80 != 0 ? magnitude : -magnitude)
    }

    /// The segment (0…7) of a value already shifted down to its segment bits: the position
    /// of its highest set bit (0 for 0 and 1), capped at 7.
    @inline(__always)
    private static func segmentOf(_ v: Int32) -> Int32 {
        var segment: Int32 = 0
        var rest = v >> 1
        while rest > 0 && segment < 7 { rest >>= 1; segment += 1 }
        return segment
    }
}
