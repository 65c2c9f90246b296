/// In-band DTMF for a call whose far end agreed no telephone-event (RFC 4733): the digit's two
/// tones (ITU-T Q.23) in the call's audio, as a desk phone sends them to a gateway that only
/// listens. Each digit is 100 ms of tone with 5 ms ramps, then 100 ms of silence: Q.24 asks a
/// receiver to take 40 ms of tone and of pause, and gateways and IVRs commonly want 70-100 ms.
/// The high tone 2 dB above the low one (the "twist" most phones send, within Q.24's ±4-8 dB),
/// −9 and −7 dBFS peak: loud enough for a detector behind G.711 and a jitter buffer, below
/// clipping together. Made by two rotating phasors like `RingTone`; allocates nothing.
public struct DTMFTone: Sendable {
    public static let toneMilliseconds = 100
    public static let pauseMilliseconds = 100
    public static let lowAmplitude: Float = 0.355    // −9 dBFS peak
    public static let highAmplitude: Float = 0.447   // −7 dBFS peak

    /// The digit's (low, high) frequencies in Hz; nil for anything that is not a DTMF digit.
    public static func frequencies(of digit: UInt8) -> (Double, Double)? {
        let low = [697.0, 770.0, 852.0, 941.0], high = [1209.0, 1336.0, 1477.0, 1633.0]
        let keys: [UInt8] = Array("123A456B789C*0#D".utf8)
        guard let i = keys.firstIndex(of: digit) else { return nil }
        return (low[i / 4], high[i % 4])
    }

    private let rate: Int
    private let tone: Int
    private let length: Int
    private let ramp: Int
    private var position: Int
    private var re1: Float = 1, im1: Float = 0, re2: Float = 1, im2: Float = 0
    private var stepRe1: Float = 1, stepIm1: Float = 0, stepRe2: Float = 1, stepIm2: Float = 0

    public init(rate: Int) {
        self.rate = rate
        tone = rate * Self.toneMilliseconds / 1000
        length = tone + rate * Self.pauseMilliseconds / 1000
        ramp = rate / 200
        position = length
    }

    /// Whether a digit (its tone or the pause after it) is still being sent.
    public var isSending: Bool { position < length }

    /// Starts `digit` (a byte of "0123456789*#ABCD"); false, and nothing starts, for another byte.
    public mutating func start(_ digit: UInt8) -> Bool {
        guard let (low, high) = Self.frequencies(of: digit) else { return false }
        let w1 = RoomMath.sinCos(2 * Double.pi * low / Double(rate))
        let w2 = RoomMath.sinCos(2 * Double.pi * high / Double(rate))
        stepRe1 = Float(w1.cos); stepIm1 = Float(w1.sin)
        stepRe2 = Float(w2.cos); stepIm2 = Float(w2.sin)
        re1 = 1; im1 = 0; re2 = 1; im2 = 0
        position = 0
        return true
    }

    /// Writes up to `count` samples of the digit (tone, then silence) into `out`, replacing what
    /// was there; returns how many it wrote (fewer once the digit ends).
    public mutating func write(into out: UnsafeMutablePointer<Float>, count: Int) -> Int {
        let n = min(count, length - position)
        guard n > 0 else { return 0 }
        for i in 0..<n {
            let p = position + i
            if p < tone {
                let edge = min(p, tone - 1 - p)
                let envelope: Float = edge >= ramp ? 1 : Float(edge) / Float(ramp)
                out[i] = envelope * (Self.lowAmplitude * im1 + Self.highAmplitude * im2)
                (re1, im1) = (re1 * stepRe1 - im1 * stepIm1, re1 * stepIm1 + im1 * stepRe1)
                (re2, im2) = (re2 * stepRe2 - im2 * stepIm2, re2 * stepIm2 + im2 * stepRe2)
            } else {
                out[i] = 0
            }
        }
        position += n
        let n1 = 1 / (re1 * re1 + im1 * im1).squareRoot(), n2 = 1 / (re2 * re2 + im2 * im2).squareRoot()
        re1 *= n1; im1 *= n1; re2 *= n2; im2 *= n2
        return n
    }
}
