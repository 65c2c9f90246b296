import RoomSettings
import RoomSystem

/// One LED's colour, 0...255 per channel.
public struct RingColor: Sendable, Equatable, CustomStringConvertible {
    public var red, green, blue: UInt8
    public init(_ red: UInt8, _ green: UInt8, _ blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }
    public static let off = RingColor(0, 0, 0)
    public var description: String { "\(red),\(green),\(blue)" }
}

/// What the ring shows: the talker's direction, so people around the table see that the
/// appliance hears the one who speaks (docs/gpio.md, "The LED ring").
public enum RingPattern {
    /// The LED nearest the talker bright and its two neighbours dim while a talker's direction is
    /// held; only that LED, dim, while it is the last one (nobody talked for 2 s); dark without a
    /// direction. Blue, or red while the appliance is muted (nobody at the far end hears it).
    public static func pixels(ring: BoardRing, talkerAzimuthDegrees: Double?, locked: Bool, muted: Bool) -> [RingColor] {
        var out = [RingColor](repeating: .off, count: ring.leds)
        guard let azimuth = talkerAzimuthDegrees, azimuth.isFinite else { return out }
        let led = nearestLED(ring: ring, azimuthDegrees: azimuth)
        func colour(_ level: UInt8) -> RingColor { muted ? RingColor(level, 0, 0) : RingColor(0, 0, level) }
        guard locked else {
            out[led] = colour(24)
            return out
        }
        if ring.leds >= 3 {
            out[(led + 1) % ring.leds] = colour(24)
            out[(led + ring.leds - 1) % ring.leds] = colour(24)
        }
        out[led] = colour(255)
        return out
    }

    /// The LED whose position is nearest `azimuthDegrees` (board frame).
    public static func nearestLED(ring: BoardRing, azimuthDegrees: Double) -> Int {
        let step = 360.0 / Double(ring.leds)
        var offset = (azimuthDegrees - ring.led0AzimuthDegrees) * (ring.clockwise ? -1 : 1)
        offset = offset.truncatingRemainder(dividingBy: 360)
        if offset < 0 { offset += 360 }
        return Int((offset / step).rounded()) % ring.leds
    }
}

/// Where a ring's pixels go.
public protocol LEDRingOutput: AnyObject {
    func show(_ pixels: [RingColor]) throws(SystemError)
    func close()
}

public enum LEDRings {
    /// The ring's output: `sim` → `SimulatedRing` (a file in `$ROOMD_SIM_GPIO_DIR`, or in memory),
    /// a spidev path → `APA102Ring`.
    public static func open(_ ring: BoardRing) throws(SystemError) -> LEDRingOutput {
        if ring.device == "sim" {
            let dir = Environment.get(GPIO.simulatorDirectoryVariable)
            return SimulatedRing(directory: dir?.isEmpty == false ? dir : nil)
        }
        return try APA102Ring(path: ring.device)
    }
}

/// APA102 LEDs (the ReSpeaker 4-mic HAT's twelve) on a spidev device: each update is one
/// write of a start frame (32 zero bits), one 32-bit frame per LED (`111` + 5-bit global
/// brightness, then blue, green, red) and an end frame of ones (at least one bit per two LEDs).
/// The device's default clock and mode (0) are what the LEDs take, so no ioctl is needed.
public final class APA102Ring: LEDRingOutput {
    private let device: SystemFile
    private let path: String

    public init(path: String) throws(SystemError) {
        device = try SystemFile(path: path, access: .write, label: "LED ring \(path)")
        self.path = path
    }

    /// The bytes of one update.
    public static func frame(_ pixels: [RingColor]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 4)
        for p in pixels { bytes += [0xE0 | 31, p.blue, p.green, p.red] }
        bytes += [UInt8](repeating: 0xFF, count: max(4, (pixels.count + 15) / 16))
        return bytes
    }

    public func show(_ pixels: [RingColor]) throws(SystemError) {
        let bytes = Self.frame(pixels)
        let written = bytes.withUnsafeBytes { device.write($0) }
        if written != bytes.count { throw .errno("LED ring \(path): write") }
    }

    public func close() { device.close() }
}

/// The ring in software: the last pixels shown, and with a directory, the file `<dir>/ring`
/// rewritten atomically on each change as one line of `r,g,b` per LED separated by spaces (the
/// rig and the tests read it, as they read `<dir>/leds`).
public final class SimulatedRing: LEDRingOutput {
    public let directory: String?
    public private(set) var pixels: [RingColor] = []
    public var stateFilePath: String? { directory.map { $0 + "/ring" } }

    public init(directory: String?) { self.directory = directory }

    public func show(_ pixels: [RingColor]) throws(SystemError) {
        self.pixels = pixels
        guard let path = stateFilePath else { return }
        let line = pixels.map(\.description).joined(separator: " ") + "\n"
        try Files.writeAtomically(path, Array(line.utf8))
    }

    public func close() {}
}
