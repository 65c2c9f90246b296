import RoomBase

/// The gains (dB, mic 0 first) the array last measured to bring each mic of this board to mic 0's
/// sensitivity, kept in `<state directory>/mic-corrections.conf`. A board's mics do not change,
/// but the array can only measure them while the room's noise alone is heard: a room whose far
/// end never pauses gives it nothing to measure, and a restart would otherwise start it from
/// uncorrected mics (docs/audio-engine.md, "The mics brought to one sensitivity").
///
/// roomd's own file, measured rather than set: it is not in settings.conf, so forgetting the
/// settings people chose keeps the measurement, and the other way round.
public struct MicCorrections: Sendable, Equatable {
    /// The board profile's `board.name` it was measured on: a state directory carried to another
    /// kind of board does not start that board's array from these mics.
    public var board: String
    public var decibels: [Double]

    public init(board: String, decibels: [Double]) {
        self.board = board
        self.decibels = decibels
    }

    public static let fileName = "mic-corrections.conf"
    /// The calibration never corrects a mic by more (array_beam.h, kCalibrationMaxDB).
    public static let limitDB = 6.0
    /// An array has 2 to 8 mics (capture_chain.h).
    public static let micCountRange = 2...8

    static let schema: [(name: String, keys: [String])] = [("array", ["board", "corrections_db"])]

    /// Reads the file back; a person may have edited it, so every value is checked and an error
    /// names the file, the line and the key.
    public static func parse(text: String, file: String) throws(ConfigError) -> MicCorrections {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: schema)
        let board = try values.requiredString("array.board")
        let list = try values.requiredString("array.corrections_db")
        let items = list.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: " \t") }
        guard micCountRange.contains(items.count) else {
            throw values.error("array.corrections_db", "\(items.count) value(s); one per mic, \(micCountRange.lowerBound) to \(micCountRange.upperBound), mic 0 first")
        }
        var decibels: [Double] = []
        for (m, item) in items.enumerated() {
            guard let v = Double(item), v.isFinite else {
                throw values.error("array.corrections_db", "mic \(m): \"\(item)\" is not a number")
            }
            guard m > 0 || v == 0 else {
                throw values.error("array.corrections_db", "mic 0: \(item): mic 0 is the reference, its correction is 0")
            }
            guard abs(v) <= limitDB else {
                throw values.error("array.corrections_db", "mic \(m): \(item) dB is beyond the calibration's ±\(shortestNumberText(limitDB)) dB")
            }
            decibels.append(v)
        }
        return MicCorrections(board: board, decibels: decibels)
    }

    /// The file's text; `parse(text:)` reads it back to an equal value.
    public func serialized() -> String {
        [
            "# Written by roomd: the gain (dB) its array puts on each mic, mic 0 first, to bring it to",
            "# mic 0's sensitivity, measured while only the room's noise was heard. roomd starts the",
            "# measurement from these at the next start; delete this file to measure from nothing.",
            "[array]",
            "board = \(board)",
            "corrections_db = " + decibels.map(shortestNumberText).joined(separator: ", "),
        ].joined(separator: "\n") + "\n"
    }
}

/// When the corrections a run has measured are worth writing over the kept ones. A pure decision,
/// so the limits below are tested without a running engine (MicCorrectionsTests); the daemon's
/// keeper asks it every status tick.
public struct MicCorrectionsKeepPolicy: Sendable {
    /// Blocks of the room's noise alone this run must have measured before its corrections are
    /// worth keeping: 2 s, when the 1/n average over the 150-800 Hz band is within ~0.1 dB.
    public static let blocksBeforeKeeping = 200
    /// Writes while running come at most this often (and at every stop): the corrections settle
    /// within a minute of quiet and then move by a tenth of a dB a day, if at all; a flash card
    /// should not be written for less.
    public static let writeIntervalNs: UInt64 = 300_000_000_000
    /// Closer than this to what is kept, in every mic, is the same to the status's tenth of a dB.
    public static let sameWithinDB = 0.05

    /// Whether to write `measured` now. `kept`: the file's corrections (nil: none, or not this
    /// board's); `lastWriteNs`: this run's last write (nil: none yet); `stopping`: the engine is
    /// stopping, the last chance this run has.
    public static func shouldWrite(measured: [Double], measuredBlocks: Int, kept: [Double]?,
                                   lastWriteNs: UInt64?, nowNs: UInt64, stopping: Bool) -> Bool {
        guard measuredBlocks >= blocksBeforeKeeping else { return false }
        if let kept, kept.count == measured.count,
           zip(kept, measured).allSatisfy({ abs($0 - $1) < sameWithinDB }) { return false }
        if !stopping, let last = lastWriteNs, nowNs &- last < writeIntervalNs { return false }
        return true
    }
}
