/// A position in metres in the board's own frame (x, y in the board plane, z up).
///
/// Double because the values come from text and feed geometry; the audio adapters narrow
/// to Float where the C APIs want it.
public struct Point3: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public var z: Double

    public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    public func distance(to other: Point3) -> Double {
        let dx = x - other.x, dy = y - other.y, dz = z - other.z
        return (dx * dx + dy * dy + dz * dz).squareRoot()
    }

    /// `x y z`, the same form the board profile uses.
    public var description: String { "\(x) \(y) \(z)" }
}
