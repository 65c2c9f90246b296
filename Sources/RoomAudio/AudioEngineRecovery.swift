// The devices on the audio thread: opened, started back to back with playback pre-filled, and
// brought back after an xrun (both directions restarted) or a lost device (closed and reopened
// with back-off).

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
    func openDevices() throws(AudioDeviceError) {
        capture = nil
        playback = nil
        capture = try AlsaPCM(device: config.captureDevice, direction: .capture, rate: config.rate,
                              channels: micCount, periodFrames: period, periods: config.periodsInBuffer)
        playback = try AlsaPCM(device: config.playbackDevice, direction: .playback, rate: config.rate,
                               channels: config.playbackChannels, periodFrames: period, periods: config.periodsInBuffer)
    }

    /// Pre-fills playback with silence and starts both directions back to back, so the
    /// speaker-to-mic delay the AEC sees starts small and constant.
    func startStreams() -> Bool {
        guard let capture, let playback else { return false }
        guard prefill(playback) else { return false }
        do {
            try playback.start()
            try capture.start()
        } catch {
            return false
        }
        mixer.reset()
        calmPeriods = 0
        blockPhase = 0
        // Not at the first start: the canceller has learnt nothing then.
        if streamGeneration != 0 { apm.streamsRestarted() }
        streamGeneration &+= 1
        return true
    }

    /// Writes the playback pre-fill: one period of silence plus the headroom.
    private func prefill(_ playback: AlsaPCM) -> Bool {
        speakerInterleaved.update(repeating: 0, count: period * config.playbackChannels)
        var left = config.playbackPrefillFrames
        while left > 0 {
            let n = min(left, period)
            if playback.write(speakerInterleaved, frames: n) < 0 { return false }
            left -= n
        }
        return true
    }

    /// A read (`capture`) or write that failed: an xrun is counted for its direction and
    /// restarts both; anything else is a lost device.
    func handleDeviceError(_ code: Int32, capture: Bool) {
        blockTesting = false
        let xrun = AlsaCode.isXrun(code)
        if xrun, capture { stats.captureXruns.wrappingAdd(1, ordering: .relaxed) }
        if xrun, !capture { stats.playbackXruns.wrappingAdd(1, ordering: .relaxed) }
        selfTest.abort()   // after the count: whoever sees a test aborted by an xrun sees the xrun
        if xrun {
            post(.xrun(capture: capture))
            if restartBothDirections(after: code, capture: capture) { return }
        }
        recoverLostDevice(capture: capture, code: code)
    }

    /// An xrun in either direction restarts both, pre-fill included, as at start: the
    /// canceller has learnt the speaker-to-mic delay of streams started back to back, and a
    /// direction restarted alone comes back at another offset against the other. (It did: one
    /// capture xrun in a 2 ms-echo room took ERLE from 43 dB to −17 dB — the output louder than
    /// the mic — for the rest of the session, with playback xruns following; AudioEngineTests.)
    /// Costs the speaker one pre-fill of silence, which the xrun has already broken anyway.
    private func restartBothDirections(after code: Int32, capture isCapture: Bool) -> Bool {
        guard let capture, let playback else { return false }
        guard (isCapture ? capture : playback).recover(code) == 0 else { return false }
        let other = isCapture ? playback : capture
        other.drop()
        guard other.prepare() == 0, startStreams() else { return false }
        return true
    }

    /// Sleeps `milliseconds` in 50 ms steps, returning early once the engine is told to stop:
    /// `stop()` waits for this thread at most 2 s, and a back-off of 2 s must not look like a
    /// thread stuck in the driver.
    private func pause(milliseconds: Int) {
        var left = milliseconds
        while left > 0 && control.running.load(ordering: .relaxed) {
            let step = min(left, 50)
            sleepMilliseconds(step)
            left -= step
        }
    }

    /// Closes both directions (they are one duplex device to the AEC) and reopens them with
    /// exponential back-off, 100 ms doubling to 2 s, until they come back or the engine stops.
    func recoverLostDevice(capture isCapture: Bool, code: Int32) {
        stats.deviceLosses.wrappingAdd(1, ordering: .relaxed)
        stats.reopeningDevice.store(true, ordering: .relaxed)
        defer { stats.reopeningDevice.store(false, ordering: .relaxed) }
        post(.deviceLost(capture: isCapture, code: code))
        capture = nil
        playback = nil
        var backoff = 100
        var attempt = 0
        while control.running.load(ordering: .relaxed) {
            pause(milliseconds: backoff)
            guard control.running.load(ordering: .relaxed) else { break }
            attempt += 1
            stats.reopenAttempts.wrappingAdd(1, ordering: .relaxed)
            do {
                try openDevices()
                if startStreams() {
                    post(.deviceRestored(attempts: attempt))
                    calmPeriods = 0
                    return
                }
                capture = nil
                playback = nil
                post(.reopenFailed(attempt: attempt, code: AlsaCode.ioError))
            } catch {
                post(.reopenFailed(attempt: attempt, code: error.code))
            }
            backoff = min(backoff * 2, 2000)
        }
    }
}
