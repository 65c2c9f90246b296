import RoomAudio
import RoomBase
import RoomClient
import RoomSystem

/// What roomd tells systemd about itself: `WATCHDOG=1` only while the audio engine makes
/// progress, and a one-line `STATUS=` that follows the room and the audio (what
/// `systemctl status roomd` shows an installer). On the event-loop thread.
///
/// Why the watchdog follows the audio thread and not only the loop: the loop's timer alone went
/// on feeding systemd while a stalled card (an I2S clock that stops) left the room silent for
/// good. Progress is `EngineStats.periods`, the 10 ms blocks the audio thread has processed.
/// At each watchdog tick (half of WatchdogSec):
///
/// - a block ran since the previous tick → fed;
/// - none ran, but the engine is reopening a lost device (`reopeningDevice`, attempts still
///   coming: the back-off is at most 2 s) → fed. That is roomd recovering correctly: a restart
///   would not bring the card back (it would fail to open it, exit 69, and systemd's start
///   limit would end with the unit failed, never picking the card up when it returns), while
///   the running engine reopens it by itself;
/// - otherwise (no block, no live recovery: the capture blocks forever, a reopen hangs, or the
///   device was lost again without a single block since the last reopen) → not fed, logged once,
///   STATUS says so; systemd kills and restarts roomd when WatchdogSec runs out
///   (`Restart=on-failure`).
///
/// A self-test keeps the engine running (blocks advance) and its analysis runs off the loop,
/// so neither starves the watchdog.
final class HealthMonitor {
    private let notifier: SystemdNotifier
    private let engine: AudioEngine
    private let room: RoomLink
    private let loopback: Bool

    /// When the audio counts as stalled in STATUS: 50 blocks missed. Longer than any in-place
    /// xrun recovery (a few ms), shorter than any sensible WatchdogSec.
    static let stalledAfterNs: UInt64 = 500_000_000
    /// A reopen attempt comes at most 2 s after the previous one; more than this without one
    /// means the recovery itself is stuck (inside an open).
    static let reopenAliveNs: UInt64 = 5_000_000_000

    private var periodsSeen: Int
    private var lastProgressNs: UInt64
    /// `deviceLosses` when a block last ran: two losses since then mean a reopen that
    /// "succeeded" but never produced a block (a card that opens but does not clock).
    private var lossesAtProgress: Int
    private var attemptsSeen: Int
    private var lastAttemptNs: UInt64
    private var periodsAtTick: Int?
    /// A device recovery was under way at the last sample, and the attempt count before it.
    private var reopening = false
    private var attemptsBeforeRecovery = 0
    /// The watchdog is being starved (logged once per stall).
    private(set) var starving = false
    /// The current stall was logged.
    private var stallLogged = false
    private var lastStatus: String?

    init(notifier: SystemdNotifier, engine: AudioEngine, room: RoomLink, loopback: Bool) {
        self.notifier = notifier
        self.engine = engine
        self.room = room
        self.loopback = loopback
        let now = monotonicNanoseconds()
        periodsSeen = engine.stats.periods.load(ordering: .relaxed)
        lastProgressNs = now
        lossesAtProgress = engine.stats.deviceLosses.load(ordering: .relaxed)
        attemptsSeen = engine.stats.reopenAttempts.load(ordering: .relaxed)
        lastAttemptNs = now
    }

    /// Reads the engine's counters; call often (the loop's 100 ms timer). Sends STATUS when the
    /// line changed.
    func sample() {
        let now = monotonicNanoseconds()
        let stats = engine.stats
        let periods = stats.periods.load(ordering: .relaxed)
        if periods != periodsSeen {
            periodsSeen = periods
            if stallLogged {
                stallLogged = false
                Log.notice("audio running again after a stall of \(seconds(now - lastProgressNs)) s")
            }
            lastProgressNs = now
            lossesAtProgress = stats.deviceLosses.load(ordering: .relaxed)
        } else if !stallLogged, now - lastProgressNs >= Self.stalledAfterNs, !stats.reopeningDevice.load(ordering: .relaxed) {
            // Logged whether or not systemd watches: the journal says when the room went silent.
            stallLogged = true
            Log.error("audio stalled: no audio block from the card for \(seconds(now - lastProgressNs)) s")
        }
        let reopeningNow = stats.reopeningDevice.load(ordering: .relaxed)
        if reopeningNow && !reopening { attemptsBeforeRecovery = attemptsSeen }
        reopening = reopeningNow
        let attempts = stats.reopenAttempts.load(ordering: .relaxed)
        if attempts != attemptsSeen || !reopeningNow {
            attemptsSeen = attempts
            lastAttemptNs = now
        }
        publishStatus(now: now)
    }

    /// The watchdog timer's tick: `WATCHDOG=1` only when the audio is alive (see the type).
    func watchdogTick() {
        sample()
        let periods = engine.stats.periods.load(ordering: .relaxed)
        let progressed = periodsAtTick.map { $0 != periods } ?? true
        periodsAtTick = periods
        let now = monotonicNanoseconds()
        if progressed || recovering(now: now) {
            if starving {
                starving = false
                Log.notice("audio running again: feeding the systemd watchdog again")
            }
            _ = try? notifier.watchdog()
        } else if !starving {
            starving = true
            Log.error("no audio block for \(seconds(now - lastProgressNs)) s and no recovery under way: "
                      + "not feeding the systemd watchdog (systemd restarts roomd when WatchdogSec runs out)")
        }
        publishStatus(now: now)
    }

    /// A recovery the watchdog should wait for: a lost device being reopened, attempts still
    /// coming, and not the second loss in a row without a block in between.
    private func recovering(now: UInt64) -> Bool {
        let stats = engine.stats
        guard stats.reopeningDevice.load(ordering: .relaxed) else { return false }
        guard stats.deviceLosses.load(ordering: .relaxed) - lossesAtProgress <= 1 else { return false }
        return now - lastAttemptNs < Self.reopenAliveNs
    }

    private func publishStatus(now: UInt64) {
        guard notifier.isEnabled else { return }
        let line = statusLine(now: now)
        guard line != lastStatus else { return }
        lastStatus = line
        _ = try? notifier.status(line)
    }

    /// One short line: the audio's trouble first (if any), then where the appliance stands in
    /// the room.
    func statusLine(now: UInt64 = monotonicNanoseconds()) -> String {
        let roomPart = roomDescription()
        let stats = engine.stats
        if stats.reopeningDevice.load(ordering: .relaxed) && recovering(now: now) {
            return "audio card error, reopening (attempt \(max(1, attemptsSeen - attemptsBeforeRecovery))); \(roomPart)"
        }
        // No seconds counted here: STATUS is sent when the line changes, and the journal has
        // the time the stall began.
        if now - lastProgressNs >= Self.stalledAfterNs {
            return "AUDIO STALLED: no sound from the card\(starving ? ", watchdog not fed" : ""); \(roomPart)"
        }
        return roomPart
    }

    private func roomDescription() -> String {
        if loopback { return "loopback test, no room" }
        guard let session = room.session else { return "not in a room" }
        let name = session.joinInfo.map { "room " + Self.printable($0.room) } ?? "the room"
        switch session.connectionState {
        case .idle: return "not in a room"
        case .connecting: return "joining \(name)"
        case .reconnecting: return "reconnecting to \(name)"
        case .failed(let reason): return "\(name) unreachable (\(Self.printable(reason))), retrying"
        case .disconnected(let reason): return "not in a room (\(Self.printable(reason.description)))"
        case .connected:
            var parts: [String] = []
            switch session.localParticipant?.stage {
            case .onStage?: parts.append("on stage")
            case .handRaised?: parts.append("listening, hand raised")
            case .invited?: parts.append("listening, invited on stage")
            default: parts.append("listening")
            }
            if session.isEffectivelyMuted { parts.append("muted") }
            return "in \(name): " + parts.joined(separator: ", ")
        }
    }

    /// Text from the server, cut short and with control characters replaced, for one line.
    static func printable(_ text: String, limit: Int = 48) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            out.unicodeScalars.append(scalar.properties.generalCategory == .control ? "?" : scalar)
        }
        return text.unicodeScalars.count > limit ? out + "…" : out
    }

    private func seconds(_ ns: UInt64) -> String { fixedDecimalText(Double(ns) / 1e9, 1) }
}
