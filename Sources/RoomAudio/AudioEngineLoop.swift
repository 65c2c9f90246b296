// The audio thread's loop: one ALSA period per wake-up (read the mics, render and write the
// speaker, process the block when it is full), and between blocks what the daemon asked for
// (profile, loss protection, self-test).

import RoomALSA
import RoomBase
import RoomCaptureChain
import RoomDSP
import RoomMedia
import RoomOpus
import RoomSettings
import RoomSystem
import Synchronization

extension AudioLoop {
    // MARK: the audio thread

    func run() {
        switch Realtime.promoteCurrentThread(priority: config.realtimePriority) {
        case .fifo(let p): post(.realtimeGranted(priority: p))
        case .denied(let code, _): post(.realtimeDenied(code: code))
        }
        stats.allocationProbeActive.store(probe.isAvailable, ordering: .relaxed)
        stats.allocationProbeVerified.store(probe.verify(), ordering: .relaxed)
        stats.retainProbeVerified.store(probe.verifyRetains(), ordering: .relaxed)
        post(.started(rate: config.rate, micChannels: micCount, beamforming: apm.beamforming, array: apm.arrayProcessing))
        if !startStreams() { recoverLostDevice(capture: false, code: AlsaCode.ioError) }
        prepareNextBlock()
        var lastAllocations = probe.threadAllocations()
        var lastRetains = probe.threadRetains()
        stats.audioThreadStarted()

        while control.running.load(ordering: .relaxed) {
            let got = captureEveryPeriod?._withUnsafeGuaranteedRef { $0.read(captureInterleaved, frames: period) } ?? Int(AlsaCode.notOpen)
            if got < 0 {
                handleDeviceError(Int32(got), capture: true)
                lastAllocations = probe.threadAllocations()
                lastRetains = probe.threadRetains()
                continue
            }
            let periodStart = monotonicNanoseconds()
            let blockDone = runPeriod()
            let periodWork = Int(truncatingIfNeeded: monotonicNanoseconds() &- periodStart)
            if periodWork > stats.longestPeriodNanoseconds.load(ordering: .relaxed) {
                stats.longestPeriodNanoseconds.store(periodWork, ordering: .relaxed)
            }

            calmPeriods += 1
            let now = probe.threadAllocations()
            let retainsNow = probe.threadRetains()
            if calmPeriods > warmupPeriods {
                stats.steadyAllocations.wrappingAdd(Int(now &- lastAllocations), ordering: .relaxed)
                stats.steadyRetains.wrappingAdd(Int(retainsNow &- lastRetains), ordering: .relaxed)
                stats.steadyPeriodsMeasured.wrappingAdd(1, ordering: .relaxed)
            } else {
                stats.unsteadyAllocations.wrappingAdd(Int(now &- lastAllocations), ordering: .relaxed)
            }
            lastAllocations = now
            lastRetains = retainsNow
            guard blockDone else { continue }
            // Once per block: the counter the status reports (10 ms blocks whatever the period).
            // The thread's CPU time is read by whoever asks (`EngineStats.threadCPUNanoseconds`).
            stats.periods.wrappingAdd(1, ordering: .relaxed)
        }
        stats.audioThreadEnding()
        capture?.drop()
        playback?.drop()
        post(.stopped)
    }

    @inline(__always)
    func post(_ event: EngineEvent) { _ = events.push(event) }

    /// One ALSA period, after its capture was read: the mics go into the block, the speaker's
    /// period is rendered and written, and when the block is full it is processed. Returns
    /// whether a block was processed.
    ///
    /// Rendering every period rather than every block is what a short period buys: the
    /// received packets are drained and the jitter buffers asked every period, so a packet
    /// that arrives just after a wake-up waits for the next period, not the next block.
    private func runPeriod() -> Bool {
        let offset = blockPhase * period
        // Mics: interleaved 16-bit → this period's part of one float plane per mic.
        for f in 0..<period {
            let frame = captureInterleaved + f * micCount
            for m in 0..<micCount { mics[m * block + offset + f] = SampleConversion.float(fromInt16: frame[m]) }
        }
        renderSpeakerPeriod(into: speaker + offset)
        if blockTesting { (speaker + offset).update(from: testBlock + offset, count: period) }
        let written = writeSpeaker(speaker + offset)
        if written < 0 {
            let generation = streamGeneration
            handleDeviceError(Int32(written), capture: false)
            // Reopened devices start a new block; this period's capture belongs to the old stream.
            if streamGeneration != generation { return false }
        }
        blockPhase += 1
        guard blockPhase * period >= block else { return false }
        blockPhase = 0
        processBlock()
        prepareNextBlock()
        return true
    }

    /// Between blocks, after this block's speaker write and processing, so that none of it
    /// delays the next write: a profile switch (encoder and APM retuned), the listeners' loss
    /// reports (the encoder's FEC and bitrate), and whether the next
    /// block belongs to a self-test. A self-test owns the speaker: the test signal replaces the
    /// room (and is the AEC's reference, so the echo figure is the canceller's real work).
    private func prepareNextBlock() {
        (callCodec, callBridged) = callUplink.follow()
        followProfile()
        followLossReports()
        blockTesting = selfTest.active()
        if blockTesting != selfTestHeld { holdForSelfTest(blockTesting) }
        if blockTesting { selfTest.fillSpeaker(testBlock) }
    }

    /// Retunes encoder and APM when the daemon asked for another profile. A relaxed load per
    /// period; the work (a few ctl calls) happens only on a change.
    @inline(__always)
    private func followProfile() {
        let wanted = control.profileIndex.load(ordering: .relaxed)
        guard wanted != appliedProfile, wanted >= 0, wanted < profiles.count else { return }
        let p = profiles[wanted]
        _ = encoder.apply(p.encoder)
        _ = apm.setSpeechProcessing(noiseSuppression: p.noiseSuppression, gainControl: p.gainControl && !selfTestHeld)
        apm.setOutputBand(topHz: p.encoder.bandwidth.topHz)
        voiceGateOn = p.voiceGate
        appliedProfile = wanted
        stats.profileIndex.store(wanted, ordering: .relaxed)
        applyLossProtection()   // the profile's own bitrate and loss just replaced it
        // The profile changed the band, the chain and the coding: the encoder that codes it
        // changes with them, not later mid-signal (switchEncoderUnheard).
        encoder.switchEncoder()
        publishLookahead()
    }

    /// Follows the listeners' loss reports (`LossAdaptation`): an acquiring load per period,
    /// a few ctl calls when a new report changes the protection.
    @inline(__always)
    private func followLossReports() {
        let reports = lossFeedback.reportCount
        guard reports != lossReportsSeen else { return }
        lossReportsSeen = reports
        if lossAdaptation.update(reportedPercent: Double(lossFeedback.latestPermille) / 10) { applyLossProtection() }
    }

    private func applyLossProtection() {
        guard appliedProfile >= 0, appliedProfile < profiles.count else { return }
        let p = profiles[appliedProfile]
        guard p.adaptsToLoss else {
            lossFeedback.publish(expectedLoss: p.encoder.expectedLossPercent, bitrate: p.encoder.bitrate)
            return
        }
        let coding = lossAdaptation.coding(for: p)
        _ = encoder.apply(coding)
        lossFeedback.publish(expectedLoss: coding.expectedLossPercent, bitrate: coding.bitrate)
    }

    /// The self-test measures the canceller with the gain control off, and the gain control
    /// comes back (re-initialised, as after a profile switch) when the test ends. In a quiet room
    /// the AGC raises its gain by ~4 dB a second while the test talker speaks: that drift, not
    /// the canceller, read as 6 dB of talker "lost" in double talk, and as 20 dB less echo
    /// reduction on a second run (docs/audio-engine.md, "Self-test capture"). Two flag flips, nothing
    /// allocated (the handles exist).
    /// The array is held too (rapm_self_test): the test talker is added to every mic alike, a
    /// source straight above the array that no beam passes at its level (a second self-test in
    /// a row lost 13 dB of it), so the chain hears mic 0; and the dereverberation, which would
    /// measure the sweep's reverberant echo, is off.
    private func holdForSelfTest(_ hold: Bool) {
        selfTestHeld = hold
        apm.holdForSelfTest(hold)
        guard appliedProfile >= 0, appliedProfile < profiles.count else { return }
        let p = profiles[appliedProfile]
        _ = apm.setSpeechProcessing(noiseSuppression: p.noiseSuppression, gainControl: p.gainControl && !hold)
    }
}
