// What the speaker plays, a period at a time on the audio thread: the far end and the remote
// streams mixed into it, and its write to the device with the drift correction.

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
    /// What the speaker plays this period, into `speaker` (one period of the block): each source
    /// fills its mixer slot (far-end talker, remote streams through their jitter buffers and
    /// decoders), the mixer applies gains and the limiter. The same samples are the APM's
    /// far-end reference.
    func renderSpeakerPeriod(into speaker: UnsafeMutablePointer<Float>) {
        if let feed = farEndFeedRef {
            let slot = slotAudio + MixerSlot.farEnd * period
            let got = feed._withUnsafeGuaranteedRef { $0.read(into: farEndPeriod) }
            for i in 0..<got { slot[i] = SampleConversion.float(fromInt16: farEndPeriod[i]) }
            for i in got..<period { slot[i] = 0 }
            slotPointers[MixerSlot.farEnd] = UnsafePointer(slot)
        } else if farEnd.count > 0 {
            let slot = slotAudio + MixerSlot.farEnd * period
            for i in 0..<period {
                if farEndPosition >= farEnd.count {
                    guard config.farEndLoops else { slot[i] = 0; continue }
                    farEndPosition = 0
                }
                slot[i] = SampleConversion.float(fromInt16: farEnd[farEndPosition])
                farEndPosition += 1
            }
            slotPointers[MixerSlot.farEnd] = UnsafePointer(slot)
        }
        let now = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        while let received = incoming.pop() { remotes.insert(received) }
        while let received = listening.pop() { remotes.insert(received, leg: .listen) }
        while let received = callIncoming.pop() { remotes.insert(received, leg: .call) }
        // After the packets: those that came before the release are filed, then freed with it.
        while let departed = releases.pop() {
            let (leg, ssrc) = MediaLeg.split(departed)
            remotes.release(ssrc, leg: leg, at: now)
        }
        remotes.render(into: slotAudio + MixerSlot.firstRemote * period, pointers: slotPointers + MixerSlot.firstRemote, now: now,
                       publishing: streamStatistics)
        if callCodec != nil { splitLegs(at: blockPhase * period) }
        applyStreamGains()
        mixer.mix(streams: UnsafeBufferPointer(start: slotPointers, count: MixerSlot.count),
                  into: UnsafeMutableBufferPointer(start: speaker, count: period))
        countSilentRemoteAudio()
        let ring = call.ringAmplitude
        if ring > 0 {
            if !ringing { ringTone.restart() }
            ringTone.add(into: speaker, count: period, amplitude: ring)
        }
        ringing = ring > 0
    }

    /// This period's room and call streams summed apart, before any volume, into the block's
    /// `roomMix` and `callMix` at `offset`: the mix-minus the caller and the room are sent.
    private func splitLegs(at offset: Int) {
        let room = roomMix + offset, caller = callMix + offset
        room.update(repeating: 0, count: period)
        caller.update(repeating: 0, count: period)
        for i in 0..<MixerSlot.remoteCount {
            guard let slot = slotPointers[MixerSlot.firstRemote + i] else { continue }
            switch remotes.leg(ofSlot: i) {
            case .room: for j in 0..<period { room[j] += slot[j] }
            case .call: for j in 0..<period { caller[j] += slot[j] }
            case .listen: continue
            }
        }
    }

    /// Counts the periods remote streams played in, and those in which all they decoded was
    /// silence (below one 16-bit step): packets of nothing from the far end
    /// (`constant_output_level`; judged off the audio thread). Read from the streams' slots,
    /// before the volume, so a speaker turned down is not the far end's silence.
    private func countSilentRemoteAudio() {
        var playing = false, silent = true
        let step = 1 / Float(SampleConversion.outputScale)
        for i in 0..<MixerSlot.remoteCount {
            guard let slot = slotPointers[MixerSlot.firstRemote + i] else { continue }
            playing = true
            if silent { for j in 0..<period where abs(slot[j]) >= step { silent = false; break } }
        }
        guard playing else { return }
        stats.remoteAudioPeriods.wrappingAdd(1, ordering: .relaxed)
        if silent { stats.silentRemoteAudioPeriods.wrappingAdd(1, ordering: .relaxed) }
    }

    /// Per-sender volumes into the mixer's remote slots, looked up only when a volume was set or
    /// a slot changed sender since the last period.
    private func applyStreamGains() {
        let generation = streamGains.generation
        for i in 0..<MixerSlot.remoteCount {
            let ssrc = remotes.ssrc(ofSlot: i)
            guard ssrc != 0 else { continue }
            let leg = remotes.leg(ofSlot: i), key = MediaLeg.key(leg, ssrc)
            guard key != gainSSRCs[i] || generation != gainGeneration else { continue }
            mixer.setGain(streamGains.gain(leg: leg, ssrc: ssrc), slot: MixerSlot.firstRemote + i)
            gainSSRCs[i] = key
        }
        gainGeneration = generation
    }

    /// Writes the period to the speaker, keeping what is queued ahead of the speaker, right
    /// after a capture period arrived, at the headroom: capture and playback clocks drift apart
    /// on real hardware (and on the simulated card with skew), so a period is dropped when a
    /// whole extra period has piled up, and one more is written when the queue is nearly empty
    /// (a card whose position moves in whole periods shows that only as an xrun). Each such
    /// correction is counted.
    func writeSpeaker(_ speaker: UnsafePointer<Float>) -> Int {
        guard let device = playbackEveryPeriod else { return Int(AlsaCode.notOpen) }
        let channels = config.playbackChannels
        if channels == 1 {   // the usual speaker: a loop that vectorizes
            for i in 0..<period { speakerInterleaved[i] = SampleConversion.int16(fromFloat: speaker[i], scale: SampleConversion.outputScale) }
        } else {
            for i in 0..<period {
                let s = SampleConversion.int16(fromFloat: speaker[i], scale: SampleConversion.outputScale)
                for c in 0..<channels { speakerInterleaved[i * channels + c] = s }
            }
        }
        return device._withUnsafeGuaranteedRef { playback in
            let available = playback.available()
            if available < 0 { return available }
            let fill = playback.bufferFrames - available
            let headroom = config.playbackHeadroomFrames
            if fill >= headroom + period {
                stats.driftCorrections.wrappingAdd(1, ordering: .relaxed)
                return 0
            }
            var rc = playback.write(speakerInterleaved, frames: period)
            if rc >= 0 && fill < headroom / 4 {
                stats.driftCorrections.wrappingAdd(1, ordering: .relaxed)
                rc = playback.write(speakerInterleaved, frames: period)
            }
            return rc
        }
    }
}
