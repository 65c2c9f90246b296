import RoomDSP
import Synchronization

/// The audio thread's half of `roomctl selftest`: for a few seconds the speaker plays a known
/// signal instead of the room, and the raw microphones, the echo canceller's output and what
/// was played are recorded, sample-aligned, for an analysis off the audio thread.
///
/// A near-end signal (the test talker) can be added to the microphone samples the processing
/// chain reads, after they were recorded raw: the chain then sees double talk as if someone
/// spoke in the room, while the recording still shows only what the hardware heard. It never
/// reaches the speaker, and nothing is sent during a test.
///
/// The buffers are allocated with the engine (untouched pages cost no memory until a test
/// runs), so the loop still allocates nothing. Hand-over is one atomic state: the daemon owns
/// the buffers in `idle`/`done`, the audio thread in `requested`/`running`.
public final class SelfTestCapture: @unchecked Sendable {
    public enum State: Int {
        case idle = 0, requested, running, done, aborted
    }

    public let micCount: Int
    public let periodFrames: Int
    /// Periods of silence first (noise floor), then periods of signal plus its tail.
    public let quietPeriods: Int
    public let recordPeriods: Int
    public let signalCapacity: Int
    private let state = Atomic<Int>(State.idle.rawValue)
    /// Daemon → audio thread: drop the running test (the daemon gave up waiting for it).
    private let cancelRequested = Atomic<Bool>(false)

    // Daemon writes `signal`, `nearEnd` and their lengths before `request`; the audio thread
    // writes the rest.
    private let signal: UnsafeMutablePointer<Float>
    private var signalLength = 0
    private let nearEnd: UnsafeMutablePointer<Float>   // signalCapacity, added to the mics
    private var nearEndLength = 0
    private let quiet: UnsafeMutablePointer<Float>      // micCount planes of quietPeriods·period
    private let recorded: UnsafeMutablePointer<Float>   // micCount planes of recordPeriods·period
    private let cleaned: UnsafeMutablePointer<Float>    // recordPeriods·period
    private var period = 0                              // audio thread: periods since the start

    /// `signalSeconds` is how long every test records (the default: `SelfTestPlan`'s signal),
    /// whatever the length of the signal requested.
    public init(micCount: Int, periodFrames: Int, rate: Int, quietSeconds: Double = 0.5,
                signalSeconds: Double? = nil, tailSeconds: Double = 0.5) {
        self.micCount = micCount
        self.periodFrames = periodFrames
        let periodsPerSecond = Double(rate) / Double(periodFrames)
        quietPeriods = Int((quietSeconds * periodsPerSecond).rounded(.up))
        let signalPeriods = Int(((signalSeconds ?? SelfTestPlan(rate: rate).seconds) * periodsPerSecond).rounded(.up))
        recordPeriods = signalPeriods + Int((tailSeconds * periodsPerSecond).rounded(.up))
        signalCapacity = signalPeriods * periodFrames
        signal = .allocate(capacity: signalCapacity)
        nearEnd = .allocate(capacity: signalCapacity)
        quiet = .allocate(capacity: micCount * quietPeriods * periodFrames)
        recorded = .allocate(capacity: micCount * recordPeriods * periodFrames)
        cleaned = .allocate(capacity: recordPeriods * periodFrames)
    }

    deinit {
        signal.deallocate(); nearEnd.deallocate(); quiet.deallocate(); recorded.deallocate(); cleaned.deallocate()
    }

    public var currentState: State { State(rawValue: state.load(ordering: .acquiring)) ?? .idle }

    /// Daemon: starts a test playing `testSignal` and adding `nearEnd` to every microphone,
    /// sample-aligned with it (both cut to `signalCapacity`). False when one is already in
    /// progress.
    public func request(_ testSignal: [Float], nearEnd talker: [Float] = []) -> Bool {
        let s = currentState
        guard s == .idle || s == .done || s == .aborted else { return false }
        guard !testSignal.isEmpty else { return false }
        signalLength = min(testSignal.count, signalCapacity)
        testSignal.withUnsafeBufferPointer { signal.update(from: $0.baseAddress!, count: signalLength) }
        nearEndLength = min(talker.count, signalCapacity)
        talker.withUnsafeBufferPointer { if let base = $0.baseAddress { nearEnd.update(from: base, count: nearEndLength) } }
        state.store(State.requested.rawValue, ordering: .releasing)
        return true
    }

    /// Daemon, after `done`: the recording (copied out), then the capture is idle again.
    public func takeResult() -> (quiet: [[Float]], played: [Float], mics: [[Float]], cleaned: [Float])? {
        guard currentState == .done else { return nil }
        let q = quietPeriods * periodFrames, r = recordPeriods * periodFrames
        let quietPlanes = (0..<micCount).map { m in Array(UnsafeBufferPointer(start: quiet + m * q, count: q)) }
        let micPlanes = (0..<micCount).map { m in Array(UnsafeBufferPointer(start: recorded + m * r, count: r)) }
        let played = Array(UnsafeBufferPointer(start: signal, count: signalLength))
        let out = Array(UnsafeBufferPointer(start: cleaned, count: r))
        state.store(State.idle.rawValue, ordering: .releasing)
        return (quietPlanes, played, micPlanes, out)
    }

    /// Daemon: forget an aborted test.
    public func reset() {
        _ = state.compareExchange(expected: State.aborted.rawValue, desired: State.idle.rawValue, ordering: .acquiringAndReleasing)
    }

    /// Daemon: give up on a test that has not finished (a stalled device). One not yet started
    /// is withdrawn at once; a running one is dropped by the audio thread at its next period,
    /// so a device that comes back never plays a sweep nobody waits for.
    public func cancel() {
        if state.compareExchange(expected: State.requested.rawValue, desired: State.idle.rawValue,
                                 ordering: .acquiringAndReleasing).exchanged { return }
        if currentState == .running { cancelRequested.store(true, ordering: .releasing) }
    }

    // MARK: audio thread

    /// True while a test owns the speaker and the microphones. One relaxed load when idle.
    @inline(__always)
    func active() -> Bool {
        let s = state.load(ordering: .acquiring)
        if s == State.requested.rawValue {
            // A compare-exchange: the daemon may withdraw the request at the same moment.
            guard state.compareExchange(expected: State.requested.rawValue, desired: State.running.rawValue,
                                        ordering: .acquiringAndReleasing).exchanged else { return false }
            period = 0
            cancelRequested.store(false, ordering: .relaxed)
            return true
        }
        guard s == State.running.rawValue else { return false }
        if cancelRequested.load(ordering: .acquiring) {
            cancelRequested.store(false, ordering: .relaxed)
            state.store(State.aborted.rawValue, ordering: .releasing)
            return false
        }
        return true
    }

    /// Replaces what the speaker will play this period: silence, then the signal, then silence.
    func fillSpeaker(_ speaker: UnsafeMutablePointer<Float>) {
        let start = (period - quietPeriods) * periodFrames
        for i in 0..<periodFrames {
            let n = start + i
            speaker[i] = n >= 0 && n < signalLength ? signal[n] : 0
        }
    }

    /// Before the processing chain reads them: records this period's raw microphones
    /// (`micPlanes`: micCount planes of one period each), then adds the near-end signal to
    /// every plane in place.
    func takeMics(_ micPlanes: UnsafeMutablePointer<Float>) {
        let f = periodFrames
        if period < quietPeriods {
            let q = quietPeriods * f
            for m in 0..<micCount { (quiet + m * q + period * f).update(from: micPlanes + m * f, count: f) }
            return
        }
        let k = period - quietPeriods
        let r = recordPeriods * f
        for m in 0..<micCount { (recorded + m * r + k * f).update(from: micPlanes + m * f, count: f) }
        let start = k * f
        guard start < nearEndLength else { return }
        let n = min(f, nearEndLength - start)
        for m in 0..<micCount {
            let plane = micPlanes + m * f
            for i in 0..<n { plane[i] += nearEnd[start + i] }
        }
    }

    /// After the chain: records the canceller's output; ends the test after the last period.
    func record(cleanedPeriod: UnsafePointer<Float>) {
        let f = periodFrames
        if period >= quietPeriods {
            let k = period - quietPeriods
            (cleaned + k * f).update(from: cleanedPeriod, count: f)
        }
        period += 1
        if period >= quietPeriods + recordPeriods { state.store(State.done.rawValue, ordering: .releasing) }
    }

    /// A device loss or xrun broke the recording's timing: the result would lie.
    func abort() {
        _ = state.compareExchange(expected: State.running.rawValue, desired: State.aborted.rawValue, ordering: .acquiringAndReleasing)
    }
}
