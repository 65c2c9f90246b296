/// MediaPacket ↔ RTP datagram (RFC 3550 + RFC 7587 Opus + RFC 6464 audio level), for the
/// network thread on both ends: roomd's media session and roomserver's forwarder.
extension MediaPacket {
    /// Writes the packet as an RTP datagram with the audio-level extension; returns its length.
    public func serializeRTP(into destination: UnsafeMutableRawBufferPointer, marker: Bool = false) throws(RTPSerializeError) -> Int {
        let header = RTPPacket(sequenceNumber: sequenceNumber, timestamp: timestamp, ssrc: ssrc, marker: marker,
                               audioLevel: RTPAudioLevel(voiceActivity: voiceActivity, level: audioLevel))
        return try withPayload { payload throws(RTPSerializeError) in try header.serialize(payload: payload, into: destination) }
    }

    /// Reads an RTP datagram carrying Opus. Errors name what is wrong with the datagram;
    /// a payload longer than `maxPayload` is refused rather than cut.
    public init(rtp datagram: UnsafeRawBufferPointer, arrivalSamples: Int64) throws(MediaPacketError) {
        let rtp: RTPPacket
        do { rtp = try RTPPacket.parse(datagram) } catch { throw .rtp(error) }
        guard rtp.payloadType == RTPPacket.opusPayloadType else { throw .payloadType(rtp.payloadType) }
        self.init()
        ssrc = rtp.ssrc
        sequenceNumber = rtp.sequenceNumber
        timestamp = rtp.timestamp
        self.arrivalSamples = arrivalSamples
        audioLevel = rtp.audioLevel?.level ?? 127
        voiceActivity = rtp.audioLevel?.voiceActivity ?? false
        guard setPayload(rtp.payload(in: datagram)) else { throw .payloadTooLong(rtp.payloadLength) }
    }
}

public enum MediaPacketError: Error, Equatable, Sendable, CustomStringConvertible {
    case rtp(RTPParseError)
    case payloadType(UInt8)
    case payloadTooLong(Int)

    public var description: String {
        switch self {
        case .rtp(let e): return "RTP: \(e)"
        case .payloadType(let pt): return "payload type \(pt) is not Opus (\(RTPPacket.opusPayloadType))"
        case .payloadTooLong(let n): return "payload of \(n) bytes exceeds \(MediaPacket.maxPayload)"
        }
    }
}
