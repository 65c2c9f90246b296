import RoomBase

extension BoardProfile {
    /// Parses and validates a board profile. `file` is only used in error messages, so pass
    /// the path the user knows (e.g. `board/sim/board.conf`).
    ///
    /// All-or-nothing: either every value is valid and a profile is returned, or the first
    /// problem in the file is thrown, naming line and `section.key`.
    public static func parse(text: String, file: String) throws(ConfigError) -> BoardProfile {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: schema, dynamicKey: { $0.section == "array" && micIndex($0.key) != nil })

        var profile = BoardProfile(
            name: try values.requiredString("board.name"),
            captureDevice: try values.requiredString("audio.capture_device"),
            playbackDevice: try values.requiredString("audio.playback_device"))
        profile.description = try values.string("board.description")
        profile.testedOnHardware = try values.yesNo("board.tested_on_hardware") ?? false

        profile.rate = try values.int("audio.rate", oneOf: supportedRates) ?? defaultRate
        profile.captureChannels = try values.int("audio.capture_channels", in: captureChannelRange) ?? 1
        profile.playbackChannels = try values.int("audio.playback_channels", in: playbackChannelRange) ?? 1
        profile.periodMilliseconds = try values.int("audio.period_ms", oneOf: supportedPeriods) ?? defaultPeriodMilliseconds
        profile.playbackHeadroomMilliseconds = try values.int("audio.playback_headroom_ms", in: playbackHeadroomRange)
            ?? defaultPlaybackHeadroomMilliseconds
        if let path = try values.string("audio.alsa_config") {
            guard !path.hasPrefix("/") else {
                throw values.error("audio.alsa_config", "\"\(path)\" must be relative to the profile's directory (a board directory must work wherever it is installed)")
            }
            profile.alsaConfig = path
        }

        profile.micPositions = try parseArray(values, channels: profile.captureChannels)
        if let beam = try values.yesNo("array.beamformer") {
            guard !beam || profile.hasArray else {
                throw values.error("array.beamformer", "needs microphone positions (array.mic0..) for at least 2 mics")
            }
            profile.beamformer = beam
        } else {
            profile.beamformer = profile.hasArray
        }
        profile.speakerPosition = try parseSpeaker(values, mics: profile.micPositions)
        profile.gpio = try parseGPIO(values)
        profile.ring = try parseRing(values)
        return profile
    }

    private static let schema: [(name: String, keys: [String])] = [
        ("board", ["name", "description", "tested_on_hardware"]),
        ("audio", ["capture_device", "playback_device", "rate", "capture_channels", "playback_channels",
                   "period_ms", "playback_headroom_ms", "alsa_config"]),
        ("array", ["mic0", "mic1", "mic2", "mic3", "mic4", "mic5", "mic6", "mic7", "beamformer", "speaker"]),
        ("gpio", ["chip", "mute_button", "hand_button", "mute_led", "hand_led", "stage_led", "active_low", "bias"]),
        ("ring", ["device", "leds", "led0_azimuth_deg", "clockwise"]),
    ]

    /// N for a key `micN` written canonically (`mic0`, `mic12`; not `mic01`), else nil.
    static func micIndex(_ key: String) -> Int? {
        guard key.hasPrefix("mic") else { return nil }
        let digits = key.dropFirst(3)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              digits == "0" || digits.first != "0", digits.count <= 4 else { return nil }
        return Int(digits)
    }

    private static func parseArray(_ values: ConfigValues, channels: Int) throws(ConfigError) -> [Point3] {
        let mics = values.entries.filter { $0.section == "array" && $0.key != "beamformer" && $0.key != "speaker" }
        if mics.isEmpty { return [] }
        let expected = "capture_channels is \(channels), so the array needs exactly mic0..mic\(channels - 1)"
        var positions = [Point3?](repeating: nil, count: channels)
        for e in mics {
            guard let index = micIndex(e.key), index < channels else {
                throw values.error(e.qualifiedKey, "no such microphone: \(expected)")
            }
            let point = try parsePoint(e, values)
            for (other, p) in positions.enumerated() {
                if let p, p.distance(to: point) < minMicSpacing {
                    throw values.error(e.qualifiedKey, "same position as mic\(other) (\(p)); two microphones cannot be less than 1 mm apart")
                }
            }
            positions[index] = point
        }
        var result: [Point3] = []
        for (index, p) in positions.enumerated() {
            guard let p else { throw values.error("array.mic\(index)", "missing: \(expected)") }
            result.append(p)
        }
        return result
    }

    /// `array.speaker`: only beside an array of at least two mics (a delay between mics is what
    /// it is for), and not on top of a mic.
    private static func parseSpeaker(_ values: ConfigValues, mics: [Point3]) throws(ConfigError) -> Point3? {
        guard let e = values.entries.first(where: { $0.section == "array" && $0.key == "speaker" }) else { return nil }
        guard mics.count >= 2 else {
            throw values.error(e.qualifiedKey, "needs microphone positions (array.mic0..) for at least 2 mics: the speaker's place is only used to check the delays between them")
        }
        let point = try parsePoint(e, values, limit: maxSpeakerCoordinate)
        for (index, p) in mics.enumerated() where p.distance(to: point) < minMicSpacing {
            throw values.error(e.qualifiedKey, "same position as mic\(index) (\(p)); the speaker cannot sit on a microphone")
        }
        return point
    }

    private static func parsePoint(_ e: INIEntry, _ values: ConfigValues, limit: Double = maxMicCoordinate) throws(ConfigError) -> Point3 {
        let parts = e.value.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count == 3 else {
            throw values.error(e.qualifiedKey, "\"\(e.value)\" must be three numbers \"x y z\" in metres")
        }
        var xyz: [Double] = []
        for (axis, part) in zip(["x", "y", "z"], parts) {
            guard let v = Double(part), v.isFinite else {
                throw values.error(e.qualifiedKey, "\(axis) = \"\(part)\" is not a finite number (metres)")
            }
            guard v.magnitude <= limit else {
                throw values.error(e.qualifiedKey, "\(axis) = \(v) m is more than \(limit) m from the origin (millimetres written as metres?)")
            }
            xyz.append(v)
        }
        return Point3(x: xyz[0], y: xyz[1], z: xyz[2])
    }

    private static func parseRing(_ values: ConfigValues) throws(ConfigError) -> BoardRing? {
        guard let device = try values.string("ring.device") else {
            for key in ["ring.leds", "ring.led0_azimuth_deg", "ring.clockwise"] where try values.string(key) != nil {
                throw values.error("ring.device", "missing: required when [ring] has \(key)")
            }
            return nil
        }
        guard device == "sim" || device.hasPrefix("/dev/") else {
            throw values.error("ring.device", "\"\(device)\" must be a spidev device (/dev/spidev0.0) or sim")
        }
        guard let leds = try values.int("ring.leds", in: BoardRing.ledRange) else {
            throw values.error("ring.leds", "missing: how many LEDs the ring has (\(BoardRing.ledRange.lowerBound)...\(BoardRing.ledRange.upperBound))")
        }
        return BoardRing(device: device, leds: leds,
                         led0AzimuthDegrees: try values.double("ring.led0_azimuth_deg", in: -360...360) ?? 0,
                         clockwise: try values.yesNo("ring.clockwise") ?? false)
    }

    private static func parseGPIO(_ values: ConfigValues) throws(ConfigError) -> BoardGPIO {
        var gpio = BoardGPIO()
        gpio.chip = try values.string("gpio.chip")
        gpio.activeLow = try values.yesNo("gpio.active_low") ?? false
        gpio.bias = try values.value("gpio.bias", as: GPIOBias.self) ?? .asIs
        var used: [Int: String] = [:]
        func line(_ key: String) throws(ConfigError) -> Int? {
            guard let v = try values.int(key, in: BoardGPIO.lineRange) else { return nil }
            if let other = used[v] { throw values.error(key, "line \(v) is already used by \(other)") }
            used[v] = key
            return v
        }
        gpio.muteButton = try line("gpio.mute_button")
        gpio.handButton = try line("gpio.hand_button")
        gpio.muteLED = try line("gpio.mute_led")
        gpio.handLED = try line("gpio.hand_led")
        gpio.stageLED = try line("gpio.stage_led")
        if gpio.hasLines && gpio.chip == nil {
            throw values.error("gpio.chip", "missing: required when GPIO lines are given")
        }
        return gpio
    }
}
