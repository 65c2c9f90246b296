import RoomAudio
import RoomBase
import RoomSettings
import RoomSystem

/// Keeps the array's mic corrections across restarts (`<state dir>/mic-corrections.conf`): read
/// at start as where the calibration begins, written when what this run measured has moved them.
/// Lives on the event-loop thread; reads the engine's published figures, never the audio thread's.
final class MicCorrectionsKeeper {
    /// nil: no state directory, nothing kept.
    let path: String?
    private let board: String
    private let mics: Int
    /// What the file holds now (read at start or last written), to write only what moved.
    private var kept: [Double]?
    private var lastWriteNs: UInt64?
    private var writeFailed = false
    /// The corrections to start the calibration from, nil to measure from nothing.
    let start: [Float]?

    /// Reads the corrections kept for `board` (its `board.name`) with `mics` capture channels.
    /// A damaged file is set aside (`.bad`) with a warning; another board's, or another count of
    /// mics, is ignored with a notice and replaced once this run has measured.
    init(stateDirectory: String?, board: String, mics: Int) {
        self.board = board
        self.mics = mics
        path = stateDirectory.map { $0 + "/" + MicCorrections.fileName }
        guard let path, Files.exists(path) else { start = nil; return }
        do {
            let read = try MicCorrections.parse(text: try Files.readText(path), file: path)
            guard read.board == board, read.decibels.count == mics else {
                Log.notice("\(path): measured on board \"\(read.board)\" with \(read.decibels.count) mics, this is \"\(board)\" with \(mics): the array measures its mics from nothing")
                start = nil
                return
            }
            kept = read.decibels
            start = read.decibels.map { Float($0) }
        } catch {
            let aside = path + ".bad"
            Log.warning("\(error); the array measures its mics from nothing (file kept as \(aside))")
            _ = try? Files.rename(path, to: aside)
            start = nil
        }
    }

    /// "0, +0.9, -1.1 dB": for the log.
    static func describe(_ decibels: [Double]) -> String {
        decibels.map { ($0 > 0 ? "+" : "") + fixedDecimalText($0, 1) }.joined(separator: ", ") + " dB"
    }

    /// Writes the engine's corrections when MicCorrectionsKeepPolicy says they are worth it: this
    /// run has measured enough, they differ from the file's by a tenth of a dB, and the last write
    /// is 5 minutes back or the engine is stopping.
    func keepIfMoved(_ stats: EngineStats, stopping: Bool = false, nowNs: UInt64 = monotonicNanoseconds()) {
        guard let path, let now = stats.micCorrectionsDB, now.count == mics,
              MicCorrectionsKeepPolicy.shouldWrite(measured: now, measuredBlocks: stats.micCalibrationBlocks.load(ordering: .relaxed),
                                                   kept: kept, lastWriteNs: lastWriteNs, nowNs: nowNs, stopping: stopping)
        else { return }
        lastWriteNs = nowNs
        do {
            try Files.writeAtomically(path, Array(MicCorrections(board: board, decibels: now).serialized().utf8))
            kept = now
            writeFailed = false
            Log.info("\(path): mic corrections \(Self.describe(now)) kept for the next start")
        } catch {
            if !writeFailed { Log.warning("\(path): \(error); the mic corrections will be measured anew after a restart") }
            writeFailed = true
        }
    }
}
