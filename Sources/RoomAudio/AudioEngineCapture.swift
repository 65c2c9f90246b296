// The capture side of a 10 ms block on the audio thread: the chain's order (reference, APM,
// meters), locating the talker and steering the beam, and encoding the cleaned channel into
// media packets.

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
    /// The 10 ms block: the speaker samples written during it are the far-end reference, then
    /// the mics go through the chain, the meters and the encoder.
    func processBlock() {
        let testing = blockTesting
        _ = apm.analyzeRender(speakerPointers)
        // The raw mics are recorded, then the test talker is added for the chain (double talk).
        if testing { selfTest.takeMics(mics) }
        // For webrtc's AEC (delay-agnostic, so a hint): what is queued ahead of the speaker
        // after this period's write, less that period, plus the block's length on the capture side.
        let queued = playbackEveryPeriod?._withUnsafeGuaranteedRef { $0.delayFrames() } ?? 0
        let delayFrames = max(0, queued - period) + block
        _ = apm.processCapture(micPointers, into: cleanedPointers, delayMilliseconds: delayFrames * 1000 / config.rate)

        let micZero = UnsafeBufferPointer(start: mics, count: block)
        let out = UnsafeBufferPointer(start: UnsafePointer(cleaned), count: block)
        playbackMeter.process(UnsafeBufferPointer(start: UnsafePointer(speaker), count: block))
        inputMeter.process(micZero)
        outputMeter.process(out)
        let voice = apm.voiceDetected
        // (During a self-test the array is held at mic 0: `holdForSelfTest`.)
        if !testing { locatorEveryBlock?._withUnsafeGuaranteedRef { locate($0, voice: voice) } }
        stats.inputLevelBits.store(inputMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.outputLevelBits.store(outputMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.playbackLevelBits.store(playbackMeter.smoothedDBFS.bitPattern, ordering: .relaxed)
        stats.voiceActive.store(voice, ordering: .relaxed)
        if voice { stats.voicePeriods.wrappingAdd(1, ordering: .relaxed) }
        if micsAreConstant() { stats.constantInputBlocks.wrappingAdd(1, ordering: .relaxed) }

        if playbackMeter.lastRMSDBFS > config.farEndActiveThresholdDBFS {
            var e0 = 0.0, e1 = 0.0
            for i in 0..<block {
                e0 += Double(mics[i] * mics[i])
                e1 += Double(cleaned[i] * cleaned[i])
            }
            echoIn += e0
            echoOut += e1
            stats.echoInEnergyBits.store(echoIn.bitPattern, ordering: .relaxed)
            stats.echoOutEnergyBits.store(echoOut.bitPattern, ordering: .relaxed)
            stats.farEndActivePeriods.wrappingAdd(1, ordering: .relaxed)
        }
        if stats.periods.load(ordering: .relaxed) % 100 == 0 {
            stats.aecDelayMilliseconds.store(Int(apm.echoStatistics().delay_median_ms), ordering: .relaxed)
        }

        if let ring = processedAudio {
            for i in 0..<block { recordBlock[i] = SampleConversion.int16(fromFloat: cleaned[i], scale: SampleConversion.outputScale) }
            _ = ring.write(from: UnsafeBufferPointer(start: recordBlock, count: block))
        }
        if testing { selfTest.record(cleanedPeriod: cleaned) }
        // During a self-test nothing is sent: the room must not hear the sweep's residue.
        // The mic as the caller and a bridged room get it: not while muted, nor during a self-test.
        let mic = !control.isMicMuted && !testing
        let (roomSource, roomVoice) = roomUplink(voice: voice, mic: mic)
        if let codec = callCodec { sendToCaller(codec, mic: mic) }
        encodeCleaned(roomSource, voice: roomVoice, send: !testing)
    }

    /// What the room is sent this block: the cleaned mic, or, while a caller is bridged in, the
    /// mic (unless muted) plus the caller — then the voice gate opens for the caller's speech too.
    private func roomUplink(voice: Bool, mic: Bool) -> (UnsafePointer<Float>, Bool) {
        guard callBridged else { return (UnsafePointer(cleaned), voice) }
        var callerEnergy: Float = 0
        for i in 0..<block {
            roomSend[i] = (mic ? cleaned[i] : 0) + callMix[i]
            callerEnergy += callMix[i] * callMix[i]
        }
        return (UnsafePointer(roomSend), (mic && voice) || callerEnergy / Float(block) > Self.callerSpeechPower)
    }

    /// Mean power of the caller's audio above which the room's voice gate treats it as speech:
    /// −50 dBFS, well under speech and above a line's idle noise.
    static let callerSpeechPower: Float = 1e-5

    /// The caller's mix-minus for this block: the mic (`mic`: unless muted, or during a
    /// self-test) plus the room's streams, into the call's encoder.
    private func sendToCaller(_ codec: AudioCodec, mic: Bool) {
        for i in 0..<block { callSend[i] = (mic ? cleaned[i] : 0) + roomMix[i] }
        callUplink.take(callSend, count: block, codec: codec)
    }

    /// Whether every microphone's block holds one value throughout (an unplugged array reads
    /// zeros, a dead codec a stuck value). Stops at the first sample that differs, so a live
    /// block costs a few comparisons.
    private func micsAreConstant() -> Bool {
        for m in 0..<micCount {
            let channel = mics + m * block
            let first = channel[0]
            for i in 1..<block where channel[i] != first { return false }
        }
        return true
    }

    /// Below this double-talk factor roomd's canceller says someone in the room talks over the
    /// far end: the locator listens then too (farfield double-talk room: lock-on 585 -> 85 ms;
    /// 0.2 and 0.4 added false directions before the talker spoke, 0.1 none).
    static let locatorDoubleTalkFactor: Float = 0.1
    /// Above this factor the canceller's error is what its own uncertainty explains: the far end
    /// plays alone, and the locator learns where its echo comes from (to mask it in double talk).
    static let locatorEchoAloneFactor: Float = 0.5

    /// The talker's direction from this block's raw mics: only a block with voice moves it, and
    /// while the far end plays only when the canceller sees the room talking over it (the
    /// speaker's echo alone would pull the direction around).
    private func locate(_ locator: TalkerLocator, voice: Bool) {
        let farEndQuiet = playbackMeter.lastRMSDBFS <= config.farEndActiveThresholdDBFS
        let doubleTalkFactor = apm.doubleTalkFactor
        let nearEndOverFarEnd = doubleTalkFactor < Self.locatorDoubleTalkFactor
        let echoAlone = !farEndQuiet && doubleTalkFactor > Self.locatorEchoAloneFactor
        locator.process(micPointers, listen: voice && (farEndQuiet || nearEndOverFarEnd),
                        echoAlone: echoAlone, farEndActive: !farEndQuiet, nearShare: nearShare)
        let state = locator.state
        apm.steer(azimuthDegrees: state.azimuthDegrees, hasDirection: state.hasDirection,
                  echoAlone: echoAlone, farEndActive: !farEndQuiet)
        stats.beamAzimuthTenths.store(apm.beamAzimuthDegrees.map { Int(($0 * 10).rounded()) } ?? Int.min, ordering: .relaxed)
        stats.reverberancePermille.store(apm.reverberance.map { Int(($0 * 1000).rounded()) } ?? -1, ordering: .relaxed)
        let corrected = apm.micCorrectionsDB(into: micCorrections)
        stats.micCorrectionsPacked.store(EngineStats.packCorrections(micCorrections, count: corrected), ordering: .relaxed)
        stats.micCalibrationBlocks.store(apm.micCalibrationBlocks, ordering: .relaxed)
        guard state.hasDirection else { return }
        let tenths = Int((state.azimuthDegrees * 10).rounded())
        stats.talkerAzimuthTenths.store(tenths, ordering: .relaxed)
        stats.talkerLocked.store(state.locked, ordering: .relaxed)
        if state.changes != announcedTalkerChanges {
            announcedTalkerChanges = state.changes
            stats.talkerChanges.store(state.changes, ordering: .relaxed)
            post(.talkerChanged(azimuthTenths: tenths))
        }
    }

    /// Accumulates the cleaned channel into Opus frames; each finished frame goes through the
    /// voice-activity gate and Opus DTX, then to the network ring (or, in loopback mode, through
    /// a simulated lossy network straight back to our own receive side).
    private func encodeCleaned(_ source: UnsafePointer<Float>, voice: Bool, send allowed: Bool) {
        var offset = 0
        while offset < block {
            let n = min(block - offset, frameSamples - encodeFill)
            (encodeFrame + encodeFill).update(from: source + offset, count: n)
            encodeFill += n
            offset += n
            guard encodeFill == frameSamples else { continue }
            encodeFill = 0
            guard control.isTransmitting else {
                encoderIdle = true
                packet.timestamp &+= rtpTicksPerFrame
                continue
            }
            if encoderIdle {
                // Back on the air: code this frame as a stream's first, not from stale state.
                encoderIdle = false
                encoder.switchEncoder()
                encoder.reset()
                publishLookahead()
            }
            let length = withUnsafeMutableBytes(of: &packet.payload) { raw in
                encoder.encode(encodeFrame, into: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), capacity: MediaPacket.maxPayload)
            }
            let send = allowed && (!voiceGateOn || gate.shouldSend(voice: voice)) && length > 2 && !encoder.inDTX
            if encoder.switchPending { switchEncoderUnheard(sent: send, frame: encodeFrame) } else { encoderSwitchWait = 0 }
            if length > 0 { stats.packetsEncoded.wrappingAdd(1, ordering: .relaxed) }
            if length > 2 { stats.lastOpusLayer.store(OpusLayer(toc: packet.payload[0]).rawValue, ordering: .relaxed) }
            if length > 0 && send {
                packet.length = UInt16(length)
                packet.voiceActivity = voice
                packet.audioLevel = audioLevel(encodeFrame, count: frameSamples)
                stats.encodedBytes.wrappingAdd(length, ordering: .relaxed)
                if config.loopback {
                    loopBack()
                } else if outgoing.push(packet) {
                    outgoingSignal?.signal()
                } else {
                    stats.packetsDroppedOutgoing.wrappingAdd(1, ordering: .relaxed)
                }
                packet.sequenceNumber &+= 1
            } else if length > 0 {
                stats.packetsSuppressedByDTX.wrappingAdd(1, ordering: .relaxed)
            }
            // The RTP clock runs on through suppressed frames: the receiver sees a DTX gap.
            packet.timestamp &+= rtpTicksPerFrame
        }
    }

    /// The clean network's low-delay encoder and the protecting one (`OpusEncoderBox`) code the
    /// same audio 4 ms apart, and the one taking over starts cold: a switch while the talker
    /// talks would drop or repeat 4 ms and restart the coding mid-word. So it waits for a pause:
    /// with the voice gate, a frame the gate holds back past its hangover (the next frame the
    /// listener hears starts a talkspurt), at most `encoderSwitchMaxWaitMs`, since a talker who
    /// never pauses must get the protection late, not never (the switch is then audible once);
    /// without the gate (music, `--disable vad`), a frame under `encoderSwitchSilencePower`, with
    /// no limit (music may never have one: it then switches at the next profile change or
    /// restart of the stream).
    private func switchEncoderUnheard(sent: Bool, frame: UnsafePointer<Float>) {
        encoderSwitchWait += 1
        let pause: Bool
        if voiceGateOn {
            pause = (!sent && !gate.isTalking) || encoderSwitchWait * config.opus.frameMilliseconds >= Self.encoderSwitchMaxWaitMs
        } else {
            pause = meanPower(frame, count: frameSamples) < Self.encoderSwitchSilencePower
        }
        guard pause else { return }
        encoder.switchEncoder()
        encoderSwitchWait = 0
        publishLookahead()
    }

    private func meanPower(_ frame: UnsafePointer<Float>, count: Int) -> Float {
        var energy: Float = 0
        for i in 0..<count { energy += frame[i] * frame[i] }
        return energy / Float(count)
    }

    /// For the status: the coding encoder's look-ahead (it is mouth-to-ear time).
    func publishLookahead() {
        let samples = encoder.lookaheadSamples
        stats.opusLookaheadTenths.store(samples < 0 ? -1 : samples * 10_000 / config.rate, ordering: .relaxed)
    }

    /// Loopback mode: the frame "arrives" now, unless the simulated network drops it.
    private func loopBack() {
        if config.loopbackLossPercent > 0 {
            if Int(lossRandom.next() % 100) < config.loopbackLossPercent {
                stats.packetsLost.wrappingAdd(1, ordering: .relaxed)
                return
            }
        }
        var arrived = packet
        arrived.arrivalSamples = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        remotes.insert(arrived)
    }

    /// RFC 6464 level of a frame: -dBov of its RMS, 0 (loudest) … 127 (silence).
    private func audioLevel(_ frame: UnsafePointer<Float>, count: Int) -> UInt8 {
        let dbov = dBFS(fromLinear: meanPower(frame, count: count).squareRoot(), floor: -127)
        return RTPAudioLevel(voiceActivity: false, dBov: Double(dbov)).level
    }
}
