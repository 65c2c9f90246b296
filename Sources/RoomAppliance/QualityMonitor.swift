import RoomAudio
import RoomBase
import RoomDSP
import RoomMedia
import RoomModel
import RoomSystem

/// Measures the call once a second and raises or clears the call-quality warnings
/// (`QualityWatch`): a log line and a `quality` control event at each change, the list in
/// `roomctl status`. On the event-loop thread; everything it reads the audio thread publishes
/// as counters, so nothing here touches the audio path.
///
/// What each second's sample is made of (docs/control-api.md, "Call quality"):
/// - RTT: the backend's last media round trip (roomserver's binding datagrams, every 2 s;
///   Janus's RTCP);
/// - jitter: the largest interarrival jitter among the streams that played in the last 2 s;
/// - loss: the worse of the packets missing on the way in over the last 3 s (streams with at
///   least 20 packets in that time) and the loss the receivers of this appliance's stream
///   reported in the last 5 s;
/// - MOS: the E-model from RTT/2 + the jitter buffer's delay + the appliance's own 20 ms, and
///   the loss left after FEC;
/// - constant input: every block of the second constant at every microphone, judged only while
///   not muted (a muted appliance's microphone is nobody's concern);
/// - constant output: packets arrived at speech rate (20 a second or more: not DTX) and all the
///   audio they played was silence.
final class QualityMonitor {
    private let engine: AudioEngine
    private let room: RoomLink
    private var watch = QualityWatch()
    /// The receivers' latest report of this appliance's stream, and when it came (monotonic ns).
    private var uplinkLoss: (permille: Int, at: UInt64)?
    /// Counters at each of the last seconds, newest last: the last one is the previous second,
    /// the first the start of the 3 s loss window.
    private var history: [Counters] = []
    /// Called with each change (the daemon logs it and tells control subscribers).
    var onChange: ((QualityChange) -> Void)?

    /// The appliance's own delay outside the jitter buffer: a 10 ms block, the codec's frame
    /// and the playback headroom (mouth-to-ear through roomserver on loopback is 29-31 ms with
    /// a jitter buffer of about 10 ms; docs/benchmarks.md, e2e).
    static let localDelayMs = 20.0
    static let lossWindowSeconds = 3
    static let uplinkReportValidNs: UInt64 = 5_000_000_000
    /// Packets a second from a stream that is sending speech (50 at 20 ms); fewer is DTX.
    static let speechPacketsPerSecond = 20

    init(engine: AudioEngine, room: RoomLink) {
        self.engine = engine
        self.room = room
    }

    /// The warnings raised now, in a fixed order.
    var active: [QualityWarning] { watch.active.sorted() }

    /// A room event: keeps the receivers' loss reports; a new session starts with no warnings.
    func note(_ event: RoomSessionEvent) {
        switch event {
        case .receiverLoss(let permille, _): uplinkLoss = (permille, monotonicNanoseconds())
        case .joined, .stateChanged(.disconnected), .stateChanged(.idle):
            clear()
        default: break
        }
    }

    private func clear() {
        for warning in watch.active.sorted() { onChange?(QualityChange(warning: warning, raised: false, value: nil)) }
        watch.reset()
        history = []
        uplinkLoss = nil
    }

    /// Once a second.
    func tick() {
        let now = monotonicNanoseconds()
        let counters = Counters(engine: engine, now: mediaClockSamples(nanoseconds: now))
        defer {
            history.append(counters)
            if history.count > Self.lossWindowSeconds { history.removeFirst() }
        }
        guard let previous = history.last else { return }
        for change in watch.add(sample(counters, since: previous, now: now)) { onChange?(change) }
    }

    private func sample(_ c: Counters, since p: Counters, now: UInt64) -> QualitySample {
        var s = QualitySample()
        let session = room.session
        if let rtt = session?.statistics.lastMediaRTTMs, session?.isMediaPathUp == true { s.rttMs = Double(rtt) }
        let playing = c.rows.filter { $0.isActive(now: c.mediaNow) }
        if !playing.isEmpty { s.jitterMs = playing.map(\.jitterMs).max() }

        // Loss on the way in, over the window; then the receivers' word for the way out.
        var lossPercent: Double?
        var concealedPercent: Double?
        if let oldest = history.first {
            for row in c.rows {
                guard let before = oldest.rows.first(where: { $0.ssrc == row.ssrc }) else { continue }
                let arrived = row.received + row.late - before.received - before.late
                let lost = row.lost - before.lost, recovered = row.fecRecovered - before.fecRecovered
                guard arrived >= 0, lost >= 0, arrived + lost >= ReceiveLossWindow.minimumPackets else { continue }
                let total = Double(arrived + lost)
                lossPercent = max(lossPercent ?? 0, Double(lost) * 100 / total)
                concealedPercent = max(concealedPercent ?? 0, Double(max(0, lost - recovered)) * 100 / total)
            }
        }
        if let up = uplinkLoss, now &- up.at <= Self.uplinkReportValidNs {
            lossPercent = max(lossPercent ?? 0, Double(up.permille) / 10)
        }
        s.lossPercent = lossPercent
        if let rtt = s.rttMs {
            let delay = rtt / 2 + Double(c.engine.jitterBufferDelayMs) + Self.localDelayMs
            s.mos = EModel.mos(rating: EModel.rating(oneWayDelayMs: delay, lossPercent: concealedPercent ?? 0))
        }

        let e = c.engine, pe = p.engine
        if session?.isEffectivelyMuted != true && e.periods > pe.periods {
            // Both count 10 ms blocks; read a moment apart, so nine in ten are "every block".
            s.inputConstant = (e.constantInputBlocks - pe.constantInputBlocks) * 10 >= (e.periods - pe.periods) * 9
        }
        let received = c.received - p.received
        let remotePeriods = e.remoteAudioPeriods - pe.remoteAudioPeriods
        if received >= Self.speechPacketsPerSecond && remotePeriods > 0 {
            s.outputConstant = e.silentRemoteAudioPeriods - pe.silentRemoteAudioPeriods >= remotePeriods
        }
        return s
    }

    /// What one second's judgement needs: the engine's counters (`jitterBufferDelayMs` among
    /// them) and the streams' rows.
    private struct Counters {
        var mediaNow: Int64
        var engine: EngineSnapshot
        var rows: [StreamStatistics.Row]
        /// Packets that arrived, in time or late, over every stream.
        var received: Int

        init(engine: AudioEngine, now: Int64) {
            mediaNow = now
            self.engine = engine.stats.snapshot(now: now)
            rows = engine.streamStatistics.rows()
            received = rows.reduce(0) { $0 + $1.received + $1.late }
        }
    }
}
