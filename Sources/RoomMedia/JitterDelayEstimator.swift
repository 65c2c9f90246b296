/// The jitter buffer's target playout delay, learned from when packets arrive
/// (docs/jitter-buffer.md, "The target delay").
///
/// Each packet's *relative delay* is `arrival - (timestamp - firstTimestamp)`. Over a sliding
/// window (the last `delayWindowMs` of the stream, by timestamp) the smallest relative delay is
/// the fastest path through the network; the target is the 95th percentile of
/// (delay - smallest) taken from a fixed 1 ms histogram, plus a margin of half a playout step,
/// clamped to minimum...maximum. It rises at once (also when late packets show it was too
/// short twice within the window) and falls at most `shrinkRateMsPerSecond`.
///
/// The window and the histogram are allocated at init and freed with the estimator; nothing
/// here allocates afterwards. Non-copyable: it owns that storage, and a copy would share it.
struct JitterDelayEstimator: ~Copyable {
    private let samplesPerMs: Int64
    private let step: Int64
    private let margin: Double
    private let minimumTarget: Double
    let maximumTarget: Double
    private let shrinkPerSample: Double
    private let windowSpan: Int64
    private let percentile: Double
    private let windowCapacity: Int
    private let histogramBins: Int

    // Storage, allocated once.
    private let windowDelay: UnsafeMutablePointer<Int64>
    private let windowTime: UnsafeMutablePointer<Int64>
    private let windowLength: UnsafeMutablePointer<Int64>  // packet durations, for the target's terms
    private let histogram: UnsafeMutablePointer<Int32>

    private var windowHead = 0
    private var windowCount = 0
    private var windowNewest: Int64 = 0
    /// The smallest relative delay in the window: the schedule's origin.
    private(set) var smallestDelay: Int64 = 0
    private var measuredTarget: Double = 0     // percentile + margin (or a late packet's need), unclamped
    private var shortestPacket: Int64 = 0      // shortest and longest packet in the window
    private var longestInWindow: Int64 = 0
    private var rawTarget: Double              // the same, clamped
    /// The delay playout steers to, in samples.
    private(set) var target: Double
    private var lastNow: Int64 = JitterBufferTiming.none
    private var lastLateArrival: Int64 = JitterBufferTiming.none
    // What the last recorded delay changed, to take it back when it turns out to head a backlog.
    private var undoValid = false
    private var undoTarget: Double = 0
    private var undoLateArrival: Int64 = JitterBufferTiming.none
    private var jitter = InterarrivalJitter()

    init(configuration c: JitterBufferConfiguration, timing: JitterBufferTiming) {
        samplesPerMs = timing.samplesPerMs
        step = timing.step
        margin = c.targetMarginMs * Double(samplesPerMs)
        minimumTarget = Double(Int64(c.minimumDelayMs) * samplesPerMs)
        maximumTarget = Double(Int64(c.maximumDelayMs) * samplesPerMs)
        shrinkPerSample = c.shrinkRateMsPerSecond / 1000
        windowSpan = Int64(c.delayWindowMs) * samplesPerMs
        percentile = c.delayPercentile
        windowCapacity = Int(windowSpan / timing.granule) + 2
        histogramBins = c.maximumDelayMs + 1
        rawTarget = minimumTarget
        target = minimumTarget
        windowDelay = .allocate(capacity: windowCapacity)
        windowDelay.initialize(repeating: 0, count: windowCapacity)
        windowTime = .allocate(capacity: windowCapacity)
        windowTime.initialize(repeating: 0, count: windowCapacity)
        windowLength = .allocate(capacity: windowCapacity)
        windowLength.initialize(repeating: 0, count: windowCapacity)
        histogram = .allocate(capacity: histogramBins)
        histogram.initialize(repeating: 0, count: histogramBins)
    }

    deinit {
        windowDelay.deallocate()
        windowTime.deallocate()
        windowLength.deallocate()
        histogram.deallocate()
    }

    /// Whether any delay has been measured (since the start, a reset or a playout restart).
    var hasDelays: Bool { windowCount > 0 }

    var targetMs: Double { target / Double(samplesPerMs) }

    /// RFC 3550 interarrival jitter, milliseconds.
    var jitterMs: Double { jitter.milliseconds(samplesPerMs: samplesPerMs) }

    /// How far `position` (a relative timestamp) is ahead of the schedule at receiver time
    /// `now`: a packet with relative timestamp `t` is due at `t + smallest + target`.
    /// Positive: playing earlier than the target delay asks for (delay too short).
    func ahead(of position: Int64, at now: Int64) -> Double {
        Double(position) - (Double(now - smallestDelay) - target)
    }

    /// How long after its fastest-possible arrival `position` plays at `now`, milliseconds.
    func delayMs(of position: Int64, at now: Int64) -> Double {
        Double(now - smallestDelay - position) / Double(samplesPerMs)
    }

    /// A relative delay later than any the buffer could cover (an outage, not jitter).
    func isOutage(_ delay: Int64) -> Bool {
        windowCount > 0 && Double(delay - smallestDelay) > maximumTarget
    }

    /// Starts over on a new stream; the target is kept as a starting point.
    mutating func restart() {
        windowHead = 0
        windowCount = 0
        undoValid = false
        jitter.restart()
        lastLateArrival = JitterBufferTiming.none
    }

    /// Forgets the delays measured (playout restarts on a new schedule); the target stays.
    mutating func clearWindow() {
        windowHead = 0
        windowCount = 0
    }

    /// The last recorded delay cannot be taken back any more (a backlog packet came after it).
    mutating func forgetUndo() { undoValid = false }

    /// RFC 3550 §6.4.1 interarrival jitter, in arrival order.
    mutating func noteTransit(_ delay: Int64) { jitter.update(delay) }

    /// Once per playout decision: the target rises at once to what is wanted at `now`, and
    /// falls towards it at most `shrinkRateMsPerSecond` of the receiver clock.
    mutating func steer(at now: Int64, lossRecent: Bool, lastDuration: Int64) {
        let wanted = wantedTarget(lossRecent: lossRecent, lastDuration: lastDuration)
        if wanted > target {
            target = wanted
        } else if lastNow != JitterBufferTiming.none, now > lastNow, target > wanted {
            target = max(wanted, target - shrinkPerSample * Double(now - lastNow))
        }
        lastNow = now
    }

    /// Adds one relative delay to the window and recomputes the target. `lossRecent` and
    /// `lastDuration`: at `arrival`, for the look-ahead terms (`wantedTarget`).
    mutating func record(
        _ delay: Int64, relative: Int64, duration: Int64, late: Bool, arrival: Int64, newest: Bool,
        lossRecent: Bool, lastDuration: Int64
    ) {
        undoTarget = target
        undoLateArrival = lastLateArrival
        undoValid = newest
        if windowCount == windowCapacity {
            windowHead = windowHead + 1 == windowCapacity ? 0 : windowHead + 1
            windowCount -= 1
        }
        if windowCount == 0 { windowNewest = relative }
        let tail = (windowHead + windowCount) % windowCapacity
        windowDelay[tail] = delay
        windowTime[tail] = relative
        windowLength[tail] = duration
        windowCount += 1
        if relative > windowNewest { windowNewest = relative }
        // The window holds the last `delayWindowMs` of the stream (by timestamp).
        while windowCount > 1, windowTime[windowHead] < windowNewest - windowSpan {
            windowHead = windowHead + 1 == windowCapacity ? 0 : windowHead + 1
            windowCount -= 1
        }
        recomputeTarget()
        if late {
            // A second late packet within the window: the target was too short, grow at once
            // to cover it. (One late packet alone is a spike; the percentile judges it.)
            if lastLateArrival != JitterBufferTiming.none, arrival - lastLateArrival <= windowSpan {
                let needed = Double(delay - smallestDelay + samplesPerMs) + margin
                if needed > measuredTarget {
                    measuredTarget = needed
                    rawTarget = clampTarget(needed)
                }
            }
            lastLateArrival = arrival
        }
        let wanted = wantedTarget(lossRecent: lossRecent, lastDuration: lastDuration)
        if wanted > target { target = wanted }
    }

    /// The newest packet recorded turned out to head a backlog burst (the packets behind it
    /// drain at once): its delay was the stall's, not the network's jitter. Takes it out of
    /// the window and gives back the target it may have raised. `lossRecent` and
    /// `lastDuration`: at that packet's arrival. Returns whether there was a delay to take back.
    mutating func undoLast(lossRecent: Bool, lastDuration: Int64) -> Bool {
        guard undoValid, windowCount > 0 else { return false }
        undoValid = false
        windowCount -= 1
        recomputeTarget()
        target = max(min(target, undoTarget), wantedTarget(lossRecent: lossRecent, lastDuration: lastDuration))
        lastLateArrival = undoLateArrival
        return true
    }

    /// The target the buffer steers to: the measured one, plus one packet (the longest in the
    /// window) of look-ahead while losses are recent (the next packet must be here when one is
    /// missing, for its FEC). On a clean path the look-ahead goes, and with it a packet of delay.
    ///
    /// Packets shorter than the caller's period add the rest of the period (for the shortest in
    /// the window): the caller inserts what arrived at the start of each period, so the last
    /// short packet decided in a period must be there (step − duration) before its own time.
    private func wantedTarget(lossRecent: Bool, lastDuration: Int64) -> Double {
        let shortest = shortestPacket > 0 ? shortestPacket : lastDuration
        let subPeriod = Double(max(0, step - shortest))
        guard lossRecent else {
            return subPeriod > 0 ? clampTarget(measuredTarget + subPeriod) : rawTarget
        }
        return clampTarget(measuredTarget + subPeriod + Double(max(longestInWindow, lastDuration)))
    }

    /// Smallest delay and percentile target over the window (an empty window keeps the
    /// smallest delay it had).
    private mutating func recomputeTarget() {
        guard windowCount > 0 else {
            measuredTarget = 0
            rawTarget = minimumTarget
            return
        }
        var smallest = Int64.max
        var shortest = Int64.max, longest: Int64 = 0
        var i = windowHead
        for _ in 0 ..< windowCount {
            if windowDelay[i] < smallest { smallest = windowDelay[i] }
            shortest = min(shortest, windowLength[i])
            longest = max(longest, windowLength[i])
            i = i + 1 == windowCapacity ? 0 : i + 1
        }
        smallestDelay = smallest
        shortestPacket = shortest
        longestInWindow = longest

        // Percentile of (delay - smallest) from a 1 ms histogram.
        for b in 0 ..< histogramBins { histogram[b] = 0 }
        i = windowHead
        for _ in 0 ..< windowCount {
            let bin = min(Int((windowDelay[i] - smallest) / samplesPerMs), histogramBins - 1)
            // Not `+= 1`: Swift 6.3.1 built with -sanitize=thread emits an invalid bitcast for that
            // read-modify-write through a pointer stored in a non-copyable struct, and the
            // compiler aborts (scripts/sanitize could not build).
            histogram[bin] = histogram[bin] + 1
            i = i + 1 == windowCapacity ? 0 : i + 1
        }
        let rank = Int((percentile * Double(windowCount)).rounded(.up))
        var cumulative = 0
        var bin = 0
        while bin < histogramBins {
            cumulative += Int(histogram[bin])
            if cumulative >= rank { break }
            bin += 1
        }
        let spread = Double(Int64(bin + 1) * samplesPerMs)   // upper edge of the bin
        measuredTarget = spread + margin
        rawTarget = clampTarget(measuredTarget)
    }

    private func clampTarget(_ value: Double) -> Double {
        min(max(value, minimumTarget), maximumTarget)
    }
}

/// RFC 3550 §6.4.1 interarrival jitter: a smoothed mean deviation of consecutive packets'
/// transit times, in arrival order, scaled by 16 (§A.8). Reported only (`jitterMs`); the
/// target comes from the percentile, which says how late the late packets are.
struct InterarrivalJitter {
    private var jitter16: Int64 = 0
    private var lastTransit: Int64?

    mutating func update(_ delay: Int64) {
        if let previous = lastTransit {
            let d = abs(delay - previous)
            jitter16 += d - ((jitter16 + 8) >> 4)
        }
        lastTransit = delay
    }

    /// The next packet starts the differences afresh; the estimate is kept.
    mutating func restart() { lastTransit = nil }

    func milliseconds(samplesPerMs: Int64) -> Double { Double(jitter16 >> 4) / Double(samplesPerMs) }
}
