import RoomMedia
import RoomProtocol

/// One UDP datagram as roomd's media session and roomserver's forwarder read it: RTP with the
/// RFC 6464 audio level, the Opus media packet built from it, and the binding datagram.
func fuzzRTP(_ bytes: UnsafeRawBufferPointer) {
    for id in [RTPPacket.defaultAudioLevelExtensionID, bytes.last ?? 0] {
        guard let rtp = try? RTPPacket.parse(bytes, audioLevelExtensionID: id) else { continue }
        // The parsed layout stays inside the datagram: callers slice it without checking again.
        fuzzCheck(rtp.payloadOffset >= RTPPacket.fixedHeaderSize && rtp.payloadLength >= 0 && rtp.paddingLength >= 0
                  && rtp.payloadOffset + rtp.payloadLength + rtp.paddingLength == bytes.count,
                  "payload \(rtp.payloadOffset)+\(rtp.payloadLength)+\(rtp.paddingLength) in \(bytes.count) bytes")
        fuzzCheck(rtp.csrcCount <= 15 && rtp.extensionRange.lowerBound >= 0 && rtp.extensionRange.upperBound <= rtp.payloadOffset,
                  "csrcs \(rtp.csrcCount), extension \(rtp.extensionRange) before payload \(rtp.payloadOffset)")
        fuzzCheck(rtp.payload(in: bytes).count == rtp.payloadLength, "payload(in:) is not payloadLength long")
    }

    let parsed: MediaPacket?
    do { parsed = try MediaPacket(rtp: bytes, arrivalSamples: 0) } catch {
        note("datagram refused: \(error)")
        parsed = nil
    }
    if let packet = parsed {
        note("media packet seq \(packet.sequenceNumber) ts \(packet.timestamp) level \(packet.audioLevel) vad \(packet.voiceActivity) payload \(packet.length) bytes")
        // What roomserver forwards, roomd reads back as the same packet.
        var out = [UInt8](repeating: 0, count: 1500)
        let n = out.withUnsafeMutableBytes { (try? packet.serializeRTP(into: $0)) ?? -1 }
        fuzzCheck(n > 0, "a parsed media packet cannot be written again")
        let again = out.withUnsafeBytes { try? MediaPacket(rtp: UnsafeRawBufferPointer(rebasing: $0[0..<n]), arrivalSamples: 0) }
        fuzzCheck(again.map { samePacket($0, packet) } ?? false, "media packet changed in a round trip")
    }

    let key = MediaKey(bytes: Array(0..<16))!
    if BindingDatagram.looksLikeBinding(bytes) {
        _ = try? BindingDatagram.claimedParticipantID(bytes)
        do {
            let binding = try BindingDatagram.parse(bytes, key: key)
            note("binding \(binding)")
        } catch {
            note("binding refused: \(error)")
        }
    }
}

private func samePacket(_ a: MediaPacket, _ b: MediaPacket) -> Bool {
    a.ssrc == b.ssrc && a.sequenceNumber == b.sequenceNumber && a.timestamp == b.timestamp
        && a.audioLevel == b.audioLevel && a.voiceActivity == b.voiceActivity
        && a.withPayload { pa in b.withPayload { pb in pa.elementsEqual(pb) } }
}

/// The longest decision the engine must handle: a 120 ms packet, or the FEC rebuild of the gap
/// before one, which is the whole gap when it is within half a 2.5 ms granule (60 samples) of
/// the packet's length — 5767 samples was seen. The engine clamps what it asks libopus for to
/// 120 ms and rounds it down to 2.5 ms (`RemoteStreams.decodeNext`).
private let longestDecision = 5760 + 60

/// The jitter buffer as the audio engine drives it (Sources/RoomAudio/RemoteStreams.swift):
/// the input is a script of packet arrivals, stalls and playout periods. Checks what the
/// engine's render loop relies on: every decision covers at least one sample (else the loop
/// never fills its period) and at most `longestDecision`, and a decoded packet is the one
/// inserted under that number.
func fuzzJitter(_ bytes: UnsafeRawBufferPointer) {
    var input = FuzzReader(bytes)
    let setup = input.byte()
    var configuration = JitterBufferConfiguration(frameDurationMs: setup & 1 == 0 ? 20 : 10)
    configuration.maxPayloadBytes = MediaPacket.maxPayload
    configuration.playoutStepMs = setup & 2 == 0 ? 10 : 5
    configuration.targetMarginMs = Double(configuration.playoutStepMs) / 2
    configuration.capacityPackets = setup & 4 == 0 ? 128 : 16
    let buffer = JitterBuffer(configuration: configuration)
    let period = configuration.playoutStepMs * 48

    var now: Int64 = 1_000_000
    var sequence = UInt16(truncatingIfNeeded: Int(input.byte()) << 8 | Int(input.byte()))
    var timestamp = UInt32(input.byte()) << 24
    var inserted: [UInt16: (timestamp: UInt32, payload: [UInt8])] = [:]

    func insert(_ seq: UInt16, _ ts: UInt32, _ payload: UnsafeRawBufferPointer, duration: Int) {
        let result = buffer.insert(sequenceNumber: seq, timestamp: ts, arrivalSamples: now, payload: payload, durationSamples: duration)
        note("insert \(seq) ts \(ts) at \(now) (\(payload.count) bytes, \(duration) samples): \(result)")
        if result == .accepted || result == .acceptedAfterResync { inserted[seq] = (ts, Array(payload)) }
    }

    var operations = 0
    while !input.atEnd, operations < 2000 {
        operations += 1
        let op = input.byte()
        switch op % 4 {
        case 0, 1:
            // A packet near the last one: sequence and timestamp steps, duration, payload.
            sequence &+= UInt16(bitPattern: Int16(Int8(bitPattern: input.byte())))
            timestamp &+= UInt32(bitPattern: Int32(Int8(bitPattern: input.byte())) * 240)
            let duration = Int(input.byte()) * 120
            let payload = input.bytes(Int(op >> 2))
            payload.withUnsafeBytes { insert(sequence, timestamp, $0, duration: duration) }
        case 2:
            // One playout period, filled the way the engine fills it.
            var filled = 0, decisions = 0
            while filled < period {
                decisions += 1
                fuzzCheck(decisions <= 1000, "a period needed over 1000 decisions")
                let decision = buffer.nextFrame(nowSamples: now + Int64(filled), upTo: period - filled)
                note("at \(now + Int64(filled)): \(decision)")
                fuzzCheck(decision.samples > 0 && decision.samples <= longestDecision, "a decision of \(decision.samples) samples")
                switch decision {
                case .decode(let p), .decodeFEC(let p, _):
                    fuzzCheck(p.payload.count <= MediaPacket.maxPayload, "payload of \(p.payload.count) bytes")
                    if let sent = inserted[p.sequenceNumber] {
                        fuzzCheck(sent.timestamp == p.timestamp && sent.payload.elementsEqual(p.payload),
                                  "packet \(p.sequenceNumber) played with other contents than inserted")
                    } else {
                        fuzzCheck(false, "packet \(p.sequenceNumber) played but never accepted")
                    }
                case .conceal, .silence: break
                }
                filled += decision.samples
            }
            now += Int64(period)
        default:
            switch op >> 2 & 3 {
            case 0:
                // Time passes without playout (a stalled audio thread) or packets bunch up.
                now += Int64(input.byte()) * 48
            case 1:
                // A whole datagram through the RTP parser, as the media session hands it on.
                let datagram = input.bytes(Int(input.byte()))
                datagram.withUnsafeBytes { raw in
                    guard let packet = try? MediaPacket(rtp: raw, arrivalSamples: now) else { return }
                    packet.withPayload { insert(packet.sequenceNumber, packet.timestamp, $0, duration: 0) }
                }
            case 2:
                buffer.resetStatistics()
            default:
                buffer.reset()
            }
        }
    }
}

/// Reads a fuzz input front to back; past the end it yields zeros, so every input is a script.
struct FuzzReader {
    private let bytes: UnsafeRawBufferPointer
    private var at = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { at >= bytes.count }

    mutating func byte() -> UInt8 {
        guard at < bytes.count else { return 0 }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        let n = min(count, bytes.count - at)
        defer { at += n }
        return n > 0 ? Array(bytes[at..<at + n]) : []
    }
}
