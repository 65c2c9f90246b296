/// What `roomctl selftest` plays, and when: one place for the daemon (which builds the
/// signals), the audio thread (which plays and injects them) and the analysis (which must know
/// which stretch measures what).
///
/// On the speaker, after the capture's quiet part (the noise floor):
///
/// | part | speaker | added to the mics, digitally | measures |
/// |---|---|---|---|
/// | sweep | exponential sine sweep | — | per mic: delay, level, SNR, correlation |
/// | echo | noise burst | — | echo reduction, over its last `echoMeasuredSeconds` |
/// | double talk | the burst goes on | the test talker | with `talker alone`: how much of the talker survives |
/// | pause | silence | — | (the room's echo dies away) |
/// | talker alone | silence | the same talker | the reference: the talker as the chain renders it without echo |
///
/// The talker never reaches the speaker or the network: it is added to the samples the
/// processing chain reads, after the raw mics were recorded, and nothing is sent during a test.
public struct SelfTestPlan: Sendable, Equatable {
    public var rate: Int
    /// Peak of the sweep and of the burst. Quiet enough not to startle a room, loud enough to
    /// stand well above a quiet room's noise (the sim board's mics hear the sweep near −30 dBFS
    /// over −70 dBFS).
    public var levelDBFS: Float = -18
    /// One pass is enough for delay and level; the echo figure no longer comes from the sweep.
    public var sweepSeconds = 1.0
    /// The burst alone. The canceller learns from its start; the echo is measured over its last
    /// `echoMeasuredSeconds`. Measured on the sim board, fresh canceller: roomd's reaches 37-40 dB
    /// 0.2-0.3 s into the burst, so 0.5 s of learning leaves a margin for longer rooms.
    public var echoSeconds = 1.5
    public var echoMeasuredSeconds = 1.0
    /// The burst with the talker added: double talk.
    public var doubleTalkSeconds = 1.2
    /// Silence before the talker alone, longer than the echo tail roomd's canceller models
    /// (300 ms), so the reference holds no echo.
    public var pauseSeconds = 0.4
    /// RMS of the injected talker, pauses included (about −36 dBFS while voiced): about as loud
    /// at the mics as the burst's echo on the sim board, which is the hard case for a canceller
    /// (a louder talker is easy to tell from the echo).
    public var talkerLevelDBFS: Float = -40

    public init(rate: Int) { self.rate = rate }

    private func samples(_ seconds: Double) -> Int { max(0, Int((seconds * Double(rate)).rounded())) }

    public var sweep: Range<Int> { 0..<samples(sweepSeconds) }
    public var burst: Range<Int> { sweep.upperBound..<(sweep.upperBound + samples(echoSeconds) + samples(doubleTalkSeconds)) }
    /// Where the echo is measured (before the delay to the mic is added).
    public var echo: Range<Int> {
        let end = sweep.upperBound + samples(echoSeconds)
        return max(sweep.upperBound, end - samples(echoMeasuredSeconds))..<end
    }
    public var doubleTalk: Range<Int> { (burst.upperBound - samples(doubleTalkSeconds))..<burst.upperBound }
    public var talkerAlone: Range<Int> {
        let start = burst.upperBound + samples(pauseSeconds)
        return start..<(start + doubleTalk.count)
    }
    /// Samples the speaker plays, the talker-alone part included (silent there).
    public var count: Int { talkerAlone.upperBound }
    public var seconds: Double { Double(count) / Double(max(rate, 1)) }

    /// The speaker's signal: sweep, burst, silence. Empty for a rate that is not positive.
    public func played() -> [Float] {
        guard rate > 0 else { return [] }
        var out = [Float](repeating: 0, count: count)
        let s = SelfTestSignal.sweep(rate: rate, seconds: sweepSeconds, levelDBFS: levelDBFS)
        out.replaceSubrange(sweep.lowerBound..<(sweep.lowerBound + min(s.count, sweep.count)), with: s.prefix(sweep.count))
        let n = SelfTestSignal.noise(rate: rate, seconds: Double(burst.count) / Double(rate), levelDBFS: levelDBFS)
        out.replaceSubrange(burst.lowerBound..<(burst.lowerBound + min(n.count, burst.count)), with: n.prefix(burst.count))
        return out
    }

    /// What is added to the mics, sample-aligned with `played()`: the talker twice.
    public func nearEnd() -> [Float] {
        guard rate > 0 else { return [] }
        var out = [Float](repeating: 0, count: count)
        let t = SelfTestSignal.talker(rate: rate, seconds: Double(doubleTalk.count) / Double(rate), levelDBFS: talkerLevelDBFS)
        for part in [doubleTalk, talkerAlone] {
            let n = min(t.count, part.count)
            out.replaceSubrange(part.lowerBound..<(part.lowerBound + n), with: t.prefix(n))
        }
        return out
    }

    /// The stretches the analysis needs.
    public var segments: SelfTestSegments {
        SelfTestSegments(sweep: sweep, echo: echo, doubleTalk: doubleTalk, talkerAlone: talkerAlone)
    }
}

/// Which stretch of a recording measures what, in samples of `SelfTestRecording.played`.
public struct SelfTestSegments: Sendable, Equatable {
    /// Sweep alone on the speaker: per-mic delay, level, SNR, correlation.
    public var sweep: Range<Int>
    /// Far end alone, after the canceller's learning time: echo reduction (shifted by the
    /// measured delay to mic 0).
    public var echo: Range<Int>
    /// The far end plays and the test talker is added to the mics; nil when not measured.
    public var doubleTalk: Range<Int>?
    /// The same talker with the speaker silent, as long as `doubleTalk`.
    public var talkerAlone: Range<Int>?

    public init(sweep: Range<Int>, echo: Range<Int>, doubleTalk: Range<Int>? = nil, talkerAlone: Range<Int>? = nil) {
        self.sweep = sweep
        self.echo = echo
        self.doubleTalk = doubleTalk
        self.talkerAlone = talkerAlone
    }
}
