
import RoomMedia
import RoomOpus

/// The remote participants the speaker plays, on the audio thread: one jitter buffer and one
/// Opus decoder per stream, found by SSRC. The server forwards only the loudest few streams,
/// so a handful of slots is enough; a new SSRC takes a free slot or the one idle longest.
/// Everything is allocated at init; `insert` and `render` allocate nothing.
///
/// The receive path follows the packets, not our own encoder's setting: each packet's duration
/// comes from the packet (`opus_packet_get_nb_samples`), the jitter buffer schedules in RTP
/// timestamps, and each stream's decode buffer holds the longest Opus packet (120 ms), so a
/// sender using any frame size Opus allows (2.5 … 120 ms), or changing it mid-stream, plays.
final class RemoteStreams {
    private struct Stream {
        var ssrc: UInt32 = 0
        /// Which conversation it belongs to (`MediaLeg`): two rooms may hand out the same SSRC.
        var leg: MediaLeg = .room
        /// What its packets carry: Opus, or in a call a telephone codec (`TelephoneStreamDecoder`).
        var codec: AudioCodec = .opus
        var inUse = false
        var lastArrival: Int64 = 0
        var decodedRead = 0
        var decodedAvailable = 0
        /// Concealment already made past `decodedAvailable` (decodeNext keeps the rest of a
        /// whole concealed frame for the next concealment decision; anything else drops it).
        var concealedEnd = 0
    }

    let count: Int
    private let period: Int
    private let rate: Int
    /// Decoded samples each stream can hold: the longest Opus packet, 120 ms at the engine rate.
    private let decodeCapacity: Int
    /// 2.5 ms at the engine rate: concealment and FEC lengths must be multiples of it.
    private let granule: Int
    /// 10 ms at the engine rate: the shortest frame libopus' SILK layer conceals. Asked for
    /// less, it conceals a whole 10 ms frame and returns only its start, so two 5 ms requests
    /// in a row splice two unconnected frame starts (audible: issue 9's 5 ms periods fell
    /// from PESQ 2.7 to 2.0 at 20 % loss in `PlayoutUnderLossTests`). Concealment is made in
    /// whole frames of this length and handed out as the jitter buffer asks.
    private let concealFrame: Int
    /// The RTP clock of Opus (RFC 7587), whatever the engine rate.
    private static let clock = 48_000
    private var streams: [Stream]          // fixed size, mutated in place (no reallocation)
    private let buffers: [JitterBuffer]
    private let decoders: [OpusDecoderBox]
    private let telephoneDecoders: [TelephoneStreamDecoder]
    /// The same objects, unretained, for the per-packet and per-period calls: reading a class
    /// reference out of an array costs a retain/release pair (measured: one per received packet
    /// in release), and the audio thread should not touch reference counts. The arrays above
    /// keep them alive for as long as this object.
    private let bufferRefs: UnsafeMutablePointer<Unmanaged<JitterBuffer>>
    private let decoderRefs: UnsafeMutablePointer<Unmanaged<OpusDecoderBox>>
    private let telephoneRefs: UnsafeMutablePointer<Unmanaged<TelephoneStreamDecoder>>
    private let decoded: UnsafeMutablePointer<Float>   // count × decodeCapacity
    /// A slot unused this long may be taken by a new SSRC.
    private let idleSamples: Int64 = 48_000 * 2
    /// SSRCs released lately (`release`) and when: a packet of theirs still on its way (the
    /// server forwarded it before it heard the sender leave; UDP and the signalling take
    /// different paths) must not take a slot again and bring the departed stream back. A
    /// small ring, written in place; an SSRC returning after `idleSamples` is a new stream.
    private static let releasedCount = 8
    private let releasedSSRCs: UnsafeMutablePointer<UInt64>   // MediaLeg.key(leg, ssrc)
    private let releasedAt: UnsafeMutablePointer<Int64>
    private var releasedNext = 0
    /// Where an ending stream's counters go (`StreamStatistics.retire`), unretained like the
    /// buffers: the engine's statistics outlive the audio thread. Nil in tests that do not ask.
    private let retiredInto: Unmanaged<StreamStatistics>?


    /// `frameMilliseconds` is only the duration assumed for a packet the decoder cannot size
    /// (it never decides how a packet plays); `minimumDelayMs` is the jitter buffers' floor.
    init(count: Int, rate: Int, periodFrames: Int, frameMilliseconds: Int, minimumDelayMs: Int,
         statistics: StreamStatistics? = nil) throws(OpusError) {
        self.count = count
        retiredInto = statistics.map { Unmanaged.passUnretained($0) }
        period = periodFrames
        self.rate = rate
        decodeCapacity = rate * 120 / 1000
        granule = rate / 400
        concealFrame = rate / 100
        streams = Array(repeating: Stream(), count: count)
        var jb = JitterBufferConfiguration(frameDurationMs: frameMilliseconds, minimumDelayMs: minimumDelayMs)
        jb.maxPayloadBytes = MediaPacket.maxPayload
        jb.playoutStepMs = max(1, periodFrames * 1000 / rate)
        // The margin is half a playout step: playout may start up to half a step ahead of the
        // schedule, never more. The configuration's default (5 ms) is half of a 10 ms period;
        // with 5 ms periods it would hold every packet 2.5 ms longer than that bound needs.
        jb.targetMarginMs = Double(periodFrames) * 1000 / Double(rate) / 2
        buffers = (0..<count).map { _ in JitterBuffer(configuration: jb) }
        var made: [OpusDecoderBox] = []
        for _ in 0..<count { made.append(try OpusDecoderBox(rate: rate)) }
        decoders = made
        telephoneDecoders = (0..<count).map { _ in TelephoneStreamDecoder(rate: rate) }
        bufferRefs = .allocate(capacity: count)
        decoderRefs = .allocate(capacity: count)
        telephoneRefs = .allocate(capacity: count)
        for i in 0..<count {
            (bufferRefs + i).initialize(to: Unmanaged.passUnretained(buffers[i]))
            (decoderRefs + i).initialize(to: Unmanaged.passUnretained(made[i]))
            (telephoneRefs + i).initialize(to: Unmanaged.passUnretained(telephoneDecoders[i]))
        }
        decoded = .allocate(capacity: count * decodeCapacity)
        decoded.initialize(repeating: 0, count: count * decodeCapacity)
        releasedSSRCs = .allocate(capacity: Self.releasedCount)
        releasedSSRCs.initialize(repeating: 0, count: Self.releasedCount)
        releasedAt = .allocate(capacity: Self.releasedCount)
        releasedAt.initialize(repeating: 0, count: Self.releasedCount)
    }

    deinit {
        decoded.deallocate(); bufferRefs.deallocate(); decoderRefs.deallocate(); telephoneRefs.deallocate()
        releasedSSRCs.deallocate(); releasedAt.deallocate()
    }

    @inline(__always)
    private func buffer<R>(_ i: Int, _ body: (JitterBuffer) -> R) -> R { bufferRefs[i]._withUnsafeGuaranteedRef(body) }

    @inline(__always)
    private func decoder<R>(_ i: Int, _ body: (OpusDecoderBox) -> R) -> R { decoderRefs[i]._withUnsafeGuaranteedRef(body) }

    @inline(__always)
    private func telephone<R>(_ i: Int, _ body: (TelephoneStreamDecoder) -> R) -> R { telephoneRefs[i]._withUnsafeGuaranteedRef(body) }

    /// Files a received packet with its stream; a stream that is new takes a slot.
    func insert(_ packet: MediaPacket, leg: MediaLeg = .room) {
        guard let index = slot(for: packet.ssrc, leg: leg, at: packet.arrivalSamples) else { return }
        streams[index].lastArrival = packet.arrivalSamples
        if packet.codec != streams[index].codec {
            // A call renegotiated its codec: the old decoder's state means nothing to the new one.
            streams[index].codec = packet.codec
            _ = decoder(index) { $0.reset() }
            telephone(index) { $0.reset() }
        }
        _ = packet.withPayload { payload in
            // The packet's own duration (TOC byte and frame count; a telephone codec's from its
            // length), at the RTP clock; negative for a malformed packet, which the buffer then
            // sizes from the timestamps.
            let duration = packet.codec.mediaTicks(payloadBytes: payload.count) ?? opusPacketSamples(payload, sampleRate: Self.clock)
            return buffer(index) {
                $0.insert(sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp,
                          arrivalSamples: packet.arrivalSamples, payload: payload, durationSamples: duration)
            }
        }
    }

    private func slot(for ssrc: UInt32, leg: MediaLeg, at now: Int64) -> Int? {
        var free: Int?
        var oldest: Int?
        for i in 0..<count {
            if streams[i].inUse {
                if streams[i].ssrc == ssrc && streams[i].leg == leg { return i }
                if now - streams[i].lastArrival > idleSamples, oldest.map({ streams[i].lastArrival < streams[$0].lastArrival }) ?? true { oldest = i }
            } else if free == nil {
                free = i
            }
        }
        let key = MediaLeg.key(leg, ssrc)
        for k in 0..<Self.releasedCount where releasedSSRCs[k] == key && ssrc != 0 {
            if now - releasedAt[k] <= idleSamples { return nil }   // a straggler of a departed stream
            releasedSSRCs[k] = 0
        }
        guard let chosen = free ?? oldest else { return nil }
        if streams[chosen].inUse { retire(chosen) }   // an idle stream's slot taken over
        // A new stream: its own counts from zero (the old stream's are in the retired totals;
        // kept, they showed under the newcomer's SSRC and counted twice in the totals).
        buffer(chosen) { $0.reset(); $0.resetStatistics() }
        _ = decoder(chosen) { $0.reset() }
        telephone(chosen) { $0.reset() }
        streams[chosen] = Stream(ssrc: ssrc, leg: leg, inUse: true, lastArrival: now)
        return chosen
    }

    /// Frees the slot of `ssrc` (its sender left the room): the jitter buffer and decoder are
    /// reset for the next stream, the slot's statistics row goes (published as unused at the
    /// next `render`), and late packets of it are dropped for a while. Audio thread, from the
    /// engine's release ring; allocates nothing. An SSRC with no slot is only remembered.
    func release(_ ssrc: UInt32, leg: MediaLeg = .room, at now: Int64) {
        guard ssrc != 0 else { return }
        for i in 0..<count where streams[i].inUse && streams[i].ssrc == ssrc && streams[i].leg == leg {
            retire(i)
            buffer(i) { $0.reset() }
            _ = decoder(i) { $0.reset() }
            streams[i] = Stream()
        }
        releasedSSRCs[releasedNext] = MediaLeg.key(leg, ssrc)
        releasedAt[releasedNext] = now
        releasedNext = (releasedNext + 1) % Self.releasedCount
    }

    /// Adds slot `i`'s counters to the retired totals before its buffer is reset.
    @inline(__always)
    private func retire(_ i: Int) {
        guard let retiredInto else { return }
        let s = buffer(i) { $0.statistics }
        retiredInto._withUnsafeGuaranteedRef { $0.retire(s) }
    }

    /// SSRC of the stream in slot `i`, 0 when the slot is free.
    func ssrc(ofSlot i: Int) -> UInt32 { streams[i].inUse ? streams[i].ssrc : 0 }

    /// The conversation of the stream in slot `i` (meaningful while `ssrc(ofSlot:)` is not 0).
    func leg(ofSlot i: Int) -> MediaLeg { streams[i].leg }

    /// Produces one period per stream into `slotAudio` (stream i at `slotAudio + i * period`)
    /// and points `pointers[i]` at it, or sets nil for an unused slot.
    func render(into slotAudio: UnsafeMutablePointer<Float>, pointers: UnsafeMutablePointer<UnsafePointer<Float>?>,
                now: Int64, publishing perStream: StreamStatistics) {
        for i in 0..<count {
            guard streams[i].inUse else {
                pointers[i] = nil
                perStream.publish(slot: i, ssrc: 0, leg: .room, JitterBufferStatistics(), lastArrival: 0)
                continue
            }
            let out = slotAudio + i * period
            var filled = 0
            while filled < period {
                // The jitter buffer's clock at the sample being filled: decisions that start
                // mid-period (packets shorter than a period, or a long packet's successor) are
                // judged at their own time, and fillers stop at the period's end.
                if streams[i].decodedRead == streams[i].decodedAvailable {
                    decodeNext(i, now: now + Int64(filled * Self.clock / rate), room: (period - filled) * Self.clock / rate)
                }
                let n = min(period - filled, streams[i].decodedAvailable - streams[i].decodedRead)
                (out + filled).update(from: decoded + i * decodeCapacity + streams[i].decodedRead, count: n)
                streams[i].decodedRead += n
                filled += n
            }
            pointers[i] = UnsafePointer(out)
            let stats = buffer(i) { $0.statistics }
            perStream.publish(slot: i, ssrc: streams[i].ssrc, leg: streams[i].leg, stats, lastArrival: streams[i].lastArrival)
        }
    }

    /// Asks the jitter buffer what to play and runs the decoder accordingly: a packet (as long
    /// as it is), its FEC copy in the next packet, concealment, or silence, for as many samples
    /// as the buffer says.
    private func decodeNext(_ i: Int, now: Int64, room: Int) {
        let out = decoded + i * decodeCapacity
        let decision = buffer(i) { $0.nextFrame(nowSamples: now, upTo: room) }
        let wanted = min(max(1, decision.samples * rate / Self.clock), decodeCapacity)
        let capacity = decodeCapacity
        var produced = 0
        if streams[i].codec != .opus {
            decodeTelephone(i, decision, into: out, wanted: wanted)
            return
        }
        switch decision {
        case .decode(let p):
            produced = decoder(i) { $0.decode(p.payload.baseAddress!.assumingMemoryBound(to: UInt8.self), length: p.payload.count, into: out, frames: capacity) }
            // A packet the decoder refuses is concealed for the time it would have played.
            if produced <= 0 { produced = decoder(i) { $0.conceal(into: out, frames: concealable(wanted)) } }
        case .decodeFEC(let next, _):
            produced = decoder(i) { $0.decodeFEC(from: next.payload.baseAddress!.assumingMemoryBound(to: UInt8.self), length: next.payload.count, into: out, frames: concealable(wanted)) }
        case .conceal:
            let end = streams[i].decodedAvailable + concealable(wanted)
            if streams[i].concealedEnd >= end {
                // The rest of the frame concealed last time continues where playout stopped.
                streams[i].decodedAvailable = end
                return
            }
            let whole = min((concealable(wanted) + concealFrame - 1) / concealFrame * concealFrame, capacity)
            produced = decoder(i) { $0.conceal(into: out, frames: whole) }
            if produced > concealable(wanted), produced <= capacity {
                streams[i].decodedRead = 0
                streams[i].decodedAvailable = concealable(wanted)
                streams[i].concealedEnd = produced
                return
            }
        case .silence:
            produced = 0
        }
        if produced <= 0 || produced > capacity {
            out.update(repeating: 0, count: wanted)
            produced = wanted
        }
        streams[i].decodedRead = 0
        streams[i].decodedAvailable = produced
        streams[i].concealedEnd = 0
    }

    /// `decodeNext` for a call's G.711 or G.722 stream: no FEC, its own concealment.
    private func decodeTelephone(_ i: Int, _ decision: PlayoutDecision, into out: UnsafeMutablePointer<Float>, wanted: Int) {
        var produced = -1
        if case .decode(let p) = decision {
            produced = telephone(i) { $0.decode(p.payload, codec: streams[i].codec, into: out, capacity: decodeCapacity) }
        }
        if produced <= 0 {
            if case .silence = decision {
                out.update(repeating: 0, count: wanted)
                produced = wanted
            } else {
                produced = telephone(i) { $0.conceal(into: out, frames: wanted) }
            }
        }
        streams[i].decodedRead = 0
        streams[i].decodedAvailable = produced
        streams[i].concealedEnd = 0
    }

    /// Concealment and FEC lengths must be whole multiples of 2.5 ms (libopus).
    @inline(__always)
    private func concealable(_ samples: Int) -> Int { max(granule, samples / granule * granule) }
}
