import RoomBase

/// What roomd needs to know about the hardware it runs on, read from `board/<name>/board.conf`.
///
/// One file per board keeps hardware facts (device names, channel counts, microphone
/// geometry, GPIO lines) out of the code, so a new board is a new directory, not a rebuild.
/// The format and every key are documented in docs/board-profiles.md.
public struct BoardProfile: Sendable, Equatable {
    // [board]
    public var name: String
    public var description: String?
    /// False until someone has run roomd on the physical board; lets tools warn on untested profiles.
    public var testedOnHardware: Bool

    // [audio]
    public var captureDevice: String
    public var playbackDevice: String
    public var rate: Int
    public var captureChannels: Int
    public var playbackChannels: Int
    public var periodMilliseconds: Int
    /// How far ahead of the speaker's play position the engine writes each period: the time the
    /// audio thread has, after a capture period arrives, to process it and hand the speaker its
    /// next period. Every millisecond here is a millisecond of mouth-to-ear delay; too little
    /// and a busy board underruns. (A pre-fill of whole periods, 20 ms until 2026-11-24, wasted
    /// most of it: the engine needs well under 1 ms per period on the sim board.)
    public var playbackHeadroomMilliseconds = BoardProfile.defaultPlaybackHeadroomMilliseconds
    /// Extra ALSA configuration, relative to the profile's directory, exactly as written:
    /// resolving it needs the file system, which is the caller's job.
    public var alsaConfig: String?

    // [array]
    /// One position per capture channel, in channel order; empty when the board declares no array.
    public var micPositions: [Point3]
    /// Run webrtc's beamformer over the array (N mics in, one channel out). Default: yes when
    /// the board has an array. It costs latency: 22 ms mouth-to-ear on the sim board (measured
    /// with scripts/bench e2e), which is why a board can switch it off.
    public var beamformer = false
    /// Where the speaker sits in the array's frame, metres; nil when not known. `roomctl
    /// selftest` compares the delays at which the speaker's sound reaches each mic with what
    /// this position predicts, which is how a mic wired to the wrong channel shows: the delays
    /// alone cannot tell a swapped pair from a board whose speaker is elsewhere.
    public var speakerPosition: Point3?

    // [gpio]
    public var gpio: BoardGPIO

    // [ring]
    /// An LED ring that shows where the talker is (docs/gpio.md, "The LED ring"); nil: none.
    public var ring: BoardRing?

    /// Beamforming needs at least two microphones at known positions.
    public var hasArray: Bool { micPositions.count >= 2 }

    /// Frames in one audio period, e.g. 480 at 48 kHz and 10 ms.
    public var periodFrames: Int { rate * periodMilliseconds / 1000 }

    public init(name: String, description: String? = nil, testedOnHardware: Bool = false,
                captureDevice: String, playbackDevice: String,
                rate: Int = BoardProfile.defaultRate, captureChannels: Int = 1, playbackChannels: Int = 1,
                periodMilliseconds: Int = BoardProfile.defaultPeriodMilliseconds, alsaConfig: String? = nil,
                micPositions: [Point3] = [], gpio: BoardGPIO = BoardGPIO()) {
        self.name = name
        self.description = description
        self.testedOnHardware = testedOnHardware
        self.captureDevice = captureDevice
        self.playbackDevice = playbackDevice
        self.rate = rate
        self.captureChannels = captureChannels
        self.playbackChannels = playbackChannels
        self.periodMilliseconds = periodMilliseconds
        self.alsaConfig = alsaConfig
        self.micPositions = micPositions
        self.gpio = gpio
    }

    /// The rates webrtc-audio-processing runs at natively; anything else would need resampling.
    public static let supportedRates = [8000, 16000, 32000, 48000]
    public static let defaultRate = 48000
    public static let captureChannelRange = 1...8
    public static let playbackChannelRange = 1...2
    /// ALSA periods the engine runs. The APM works in 10 ms blocks, so a period divides one:
    /// 5 ms gathers two periods per block and renders the speaker every 5 ms, which halves the
    /// wait of a received packet for the next playback write (0-5 ms instead of 0-10, measured
    /// in docs/benchmarks.md, "Where the mouth-to-ear time goes") for ~100 more wake-ups a
    /// second. 20 ms (two blocks per period) was accepted here until 2026-11-24 but the engine
    /// always refused it at start; it is refused here now, with the key named.
    public static let supportedPeriods = [5, 10]
    public static let defaultPeriodMilliseconds = 10
    public static let defaultPlaybackHeadroomMilliseconds = 5
    /// From one millisecond (a board that does nothing but roomd, with time to spare) to two
    /// periods (more is what a pre-fill of whole periods used to cost).
    public static let playbackHeadroomRange = 1...20
    /// Microphone coordinates beyond a metre from the board origin are surely a unit mistake (mm for m).
    public static let maxMicCoordinate = 1.0
    /// Two microphones closer than this are the same point written twice.
    public static let minMicSpacing = 0.001
    /// The speaker may sit further out than the mics (a sound bar under a screen, a ceiling
    /// speaker), but not 10 m away on a board: that is millimetres written as metres.
    public static let maxSpeakerCoordinate = 10.0
}

/// Buttons and LEDs on GPIO lines of one chip. Every line is optional: a board may have
/// only some of them, or none (then roomd runs without buttons).
/// A button line's pull resistor. A button that shorts the line to ground needs a pull-up
/// (and `active_low = yes`); one to 3.3 V a pull-down. Kernel support: line bias since 5.5.
public enum GPIOBias: String, Sendable, Equatable, CaseIterable {
    case asIs = "as-is"
    case pullUp = "pull-up"
    case pullDown = "pull-down"
    case disabled
}

/// An LED ring around the array (APA102-style LEDs on SPI, as on the ReSpeaker 4-mic HAT).
public struct BoardRing: Sendable, Equatable {
    /// The spidev device (`/dev/spidev0.0`), or `sim` for the simulated ring.
    public var device: String
    /// LEDs on the ring, evenly spaced.
    public var leds: Int
    /// Where LED 0 sits, in degrees in the board frame (the array's: 0 = +x, counter-clockwise).
    public var led0AzimuthDegrees: Double
    /// LED numbers grow clockwise (seen from above) rather than counter-clockwise.
    public var clockwise: Bool
    public static let ledRange = 1...64

    public init(device: String, leds: Int, led0AzimuthDegrees: Double = 0, clockwise: Bool = false) {
        self.device = device
        self.leds = leds
        self.led0AzimuthDegrees = led0AzimuthDegrees
        self.clockwise = clockwise
    }
}

public struct BoardGPIO: Sendable, Equatable {
    /// gpiochip name or label, as libgpiod opens it ("gpiochip0", or "sim" for the simulator).
    public var chip: String?
    public var muteButton: Int?
    public var handButton: Int?
    public var muteLED: Int?
    public var handLED: Int?
    public var stageLED: Int?
    /// True when a pressed button reads 0 and an LED lights on 0 (pull-up wiring).
    public var activeLow: Bool
    /// The pull resistor roomd asks for on the button lines; `asIs` leaves the device tree's.
    public var bias: GPIOBias

    public init(chip: String? = nil, muteButton: Int? = nil, handButton: Int? = nil,
                muteLED: Int? = nil, handLED: Int? = nil, stageLED: Int? = nil, activeLow: Bool = false,
                bias: GPIOBias = .asIs) {
        self.bias = bias
        self.chip = chip
        self.muteButton = muteButton
        self.handButton = handButton
        self.muteLED = muteLED
        self.handLED = handLED
        self.stageLED = stageLED
        self.activeLow = activeLow
    }

    /// Line offsets are checked against this range (libgpiod chips rarely exceed a few hundred lines).
    public static let lineRange = 0...1023

    /// True when any line is configured.
    public var hasLines: Bool { [muteButton, handButton, muteLED, handLED, stageLED].contains { $0 != nil } }
}
