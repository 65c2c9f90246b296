/// The appliance's ring for an incoming call: two tones together (440 + 480 Hz, the familiar
/// telephone ring's pair) in a double-ring cadence — 0.4 s on, 0.2 s off, 0.4 s on, 2 s off —
/// so people at the table know a phone rings, not a room chime. Made by two rotating phasors
/// (one complex multiplication a sample, renormalised each period), with 5 ms ramps at each
/// edge so the cadence does not click. Allocates nothing; for the audio thread.
public struct RingTone: Sendable {
    public static let frequencies = (440.0, 480.0)
    /// The cadence in ms: on, off, on, off.
    public static let cadenceMilliseconds = [400, 200, 400, 2000]

    private let cadence: (Int, Int, Int, Int)
    private let cycle: Int
    private let ramp: Int
    private var position = 0
    private var re1: Float = 1, im1: Float = 0, re2: Float = 1, im2: Float = 0
    private let stepRe1: Float, stepIm1: Float, stepRe2: Float, stepIm2: Float

    public init(rate: Int) {
        let c = Self.cadenceMilliseconds.map { $0 * rate / 1000 }
        cadence = (c[0], c[1], c[2], c[3])
        cycle = c.reduce(0, +)
        ramp = rate / 200
        let w1 = RoomMath.sinCos(2 * Double.pi * Self.frequencies.0 / Double(rate))
        let w2 = RoomMath.sinCos(2 * Double.pi * Self.frequencies.1 / Double(rate))
        stepRe1 = Float(w1.cos); stepIm1 = Float(w1.sin)
        stepRe2 = Float(w2.cos); stepIm2 = Float(w2.sin)
    }

    /// Starts the cadence from its beginning (a new call rings).
    public mutating func restart() {
        position = 0
        re1 = 1; im1 = 0; re2 = 1; im2 = 0
    }

    /// Adds `count` samples of the ring at `amplitude` (peak of the two tones together) to `out`.
    public mutating func add(into out: UnsafeMutablePointer<Float>, count: Int, amplitude: Float) {
        let half = amplitude / 2
        for i in 0..<count {
            let envelope = self.envelope(at: position)
            if envelope > 0 { out[i] += half * envelope * (im1 + im2) }
            (re1, im1) = (re1 * stepRe1 - im1 * stepIm1, re1 * stepIm1 + im1 * stepRe1)
            (re2, im2) = (re2 * stepRe2 - im2 * stepIm2, re2 * stepIm2 + im2 * stepRe2)
            position += 1
            if position == cycle { position = 0 }
        }
        // Rounding shrinks or grows the phasors a little each step: back to unit length.
        let n1 = 1 / (re1 * re1 + im1 * im1).squareRoot(), n2 = 1 / (re2 * re2 + im2 * im2).squareRoot()
        re1 *= n1; im1 *= n1; re2 *= n2; im2 *= n2
    }

    /// 0 between rings, 1 inside them, linear ramps at the edges.
    @inline(__always)
    private func envelope(at p: Int) -> Float {
        let firstEnd = cadence.0, secondStart = cadence.0 + cadence.1, secondEnd = secondStart + cadence.2
        let (start, end): (Int, Int)
        if p < firstEnd { (start, end) = (0, firstEnd) } else if p >= secondStart && p < secondEnd { (start, end) = (secondStart, secondEnd) } else { return 0 }
        let edge = min(p - start, end - 1 - p)
        return edge >= ramp ? 1 : Float(edge) / Float(ramp)
    }
}
