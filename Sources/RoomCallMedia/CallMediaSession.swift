import RoomBase
import RoomMedia
import RoomMediaCrypto
import RoomSystem

/// A SIP call's RTP on the event loop (docs/calls.md): one UDP socket (bound before the offer, so
/// its port is the one the SDP names), SRTP keyed by SDES, the agreed codec's payload type, and
/// RFC 4733 DTMF both ways. The engine's `CallLeg` rings are the other end: frames from the
/// engine go out here, received frames go in with timestamps on the 48 kHz media clock.
///
/// Only the far end's address is listened to (symmetric RTP, RFC 4961: every SIP peer roomd
/// meets sends from the port it receives on); anything else is dropped and counted. Nothing is
/// allocated per packet.
public final class CallMediaSession {
    public struct Statistics: Sendable, Equatable {
        public var packetsSent = 0
        public var packetsReceived = 0
        /// Audio frames not sent: the call is on hold here, a digit was being sent, or the
        /// engine's frame was of another codec (the moment a renegotiation takes effect).
        public var framesHeld = 0
        public var eventPacketsSent = 0
        public var digitsReceived = 0
        /// Datagrams from another address, not RTP, of an unknown payload type, or refused by SRTP.
        public var foreign = 0
        public var malformed = 0
        public var unknownPayloadType = 0
        public var srtpRefused = 0
        public var sendFailures = 0
        public init() {}
    }

    public private(set) var parameters: CallMediaParameters
    public private(set) var statistics = Statistics()
    /// Called for each DTMF digit the far end sends (once per event, however many packets).
    public var onDigit: ((Character) -> Void)?
    /// The far end's SSRC, once a packet came: the engine's stream (`MediaLeg.call`) is keyed by it.
    public private(set) var remoteSSRC: UInt32?
    public var localPort: UInt16 { socket.localPort }

    private let loop: EventLoop
    private let socket: UDPSocket
    private let incoming: SPSCRing<MediaPacket>
    private var protect: SRTPSession?
    private var unprotect: SRTPSession?
    private let sendBuffer: UnsafeMutableRawBufferPointer
    private let receiveBuffer: UnsafeMutableRawBufferPointer
    private let ssrc = UInt32.random(in: 1 ... .max)
    private var sequence = UInt16.random(in: 0 ... .max)
    /// Added to the engine's timestamps (which start at 0 each call): RFC 3550 §5.1's random start.
    private let timestampOffset = UInt32.random(in: 0 ... .max)
    /// The timestamp the next audio frame would carry (our timeline), for a digit's start.
    private var nextTimestamp: UInt32 = 0
    private var sentFirst = false
    private var lastEventTimestamp: UInt32?
    private var dtmf = DigitSender()
    private var dtmfTimer: EventLoop.TimerID?

    /// Takes over `socket` (bound already; its port went into the offer or answer).
    public init(loop: EventLoop, socket: UDPSocket, incoming: SPSCRing<MediaPacket>, parameters: CallMediaParameters) throws(SystemError) {
        self.loop = loop
        self.socket = socket
        self.incoming = incoming
        self.parameters = parameters
        sendBuffer = .allocate(byteCount: 2048, alignment: 8)
        receiveBuffer = .allocate(byteCount: 2048, alignment: 8)
        do {
            try key(parameters.srtp)
        } catch {
            sendBuffer.deallocate()
            receiveBuffer.deallocate()
            throw SystemError("call media: SRTP: \(error)")
        }
        try socket.onReadable(loop: loop) { [weak self] socket in self?.receive(socket) }
    }

    deinit {
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    /// Stops sending and receiving and closes the socket.
    public func close() {
        if let dtmfTimer { loop.cancel(dtmfTimer) }
        dtmfTimer = nil
        socket.close()
    }

    /// A re-INVITE's new agreement: hold or resume, another codec or address, new keys.
    public func update(_ new: CallMediaParameters) throws(SystemError) {
        if new.srtp?.local != parameters.srtp?.local || new.srtp?.remote != parameters.srtp?.remote
            || new.srtp?.profile != parameters.srtp?.profile {
            do { try key(new.srtp) } catch { throw SystemError("call media: SRTP: \(error)") }
        }
        parameters = new
    }

    private func key(_ keys: CallMediaParameters.SDESKeys?) throws(SRTPError) {
        guard let keys else {
            protect = nil
            unprotect = nil
            return
        }
        protect = try SRTPSession(profile: keys.profile, keyAndSalt: keys.local, direction: .protect)
        unprotect = try SRTPSession(profile: keys.profile, keyAndSalt: keys.remote, direction: .unprotect)
    }

    // MARK: sending

    /// Sends what the engine queued (call it when the engine's call signal fires). Every frame
    /// is taken, so the audio thread never finds the ring full.
    public func drain(_ outgoing: SPSCRing<MediaPacket>) {
        while let frame = outgoing.pop() {
            let timestamp = frame.timestamp &+ timestampOffset
            nextTimestamp = timestamp &+ UInt32(parameters.codec.rtpClockRate / 50)
            guard parameters.sends, frame.codec == parameters.codec, !dtmf.isSending else {
                statistics.framesHeld += 1
                continue
            }
            frame.withPayload { payload in
                send(payload, payloadType: parameters.payloadType, timestamp: timestamp, marker: !sentFirst)
            }
            sentFirst = true
        }
    }

    private func send(_ payload: UnsafeRawBufferPointer, payloadType: UInt8, timestamp: UInt32, marker: Bool) {
        let header = RTPPacket(payloadType: payloadType, sequenceNumber: sequence, timestamp: timestamp, ssrc: ssrc, marker: marker)
        sequence &+= 1
        do {
            let room = UnsafeMutableRawBufferPointer(rebasing: sendBuffer[0 ..< (sendBuffer.count - SRTPSession.trailerRoom)])
            var n = try header.serialize(payload: payload, into: room)
            if let protect {
                guard let protected = protect.protect(sendBuffer, length: n) else {
                    statistics.sendFailures += 1
                    return
                }
                n = protected
            }
            if try socket.send(UnsafeRawBufferPointer(rebasing: sendBuffer[0 ..< n]), to: parameters.remote) {
                statistics.packetsSent += 1
            } else {
                statistics.sendFailures += 1
            }
        } catch {
            statistics.sendFailures += 1
        }
    }

    /// Queues DTMF digits (0-9, *, #, A-D) as RFC 4733 events: 100 ms each with 100 ms between.
    /// False, queuing nothing, when the far end took no `telephone-event` or a character is not a
    /// digit (`invalidDigit` says which).
    public func sendDigits(_ digits: String) -> Bool {
        guard parameters.telephoneEventPayloadType != nil, Self.invalidDigit(in: digits) == nil else { return false }
        for d in digits { dtmf.queue(TelephoneEvent.code(of: d)!) }
        if dtmfTimer == nil {
            dtmfTimer = loop.schedule(after: .zero, repeating: .milliseconds(DigitSender.stepMilliseconds)) { [weak self] in self?.dtmfStep() }
        }
        return true
    }

    /// The first character of `digits` that is not a DTMF digit, nil when all are (and not empty).
    public static func invalidDigit(in digits: String) -> Character? {
        if digits.isEmpty { return " " }
        return digits.first { TelephoneEvent.code(of: $0) == nil }
    }

    private func dtmfStep() {
        guard let pt = parameters.telephoneEventPayloadType else { return }
        let ticks = UInt32(parameters.codec.rtpClockRate * DigitSender.stepMilliseconds / 1000)
        let step = dtmf.step(nextTimestamp: nextTimestamp, ticksPerStep: ticks)
        // The clock runs on by itself between the engine's frames (which set it when they come):
        // two digits never share a timestamp, which is what tells the far end they are two.
        nextTimestamp &+= ticks
        switch step {
        case .send(let event, let timestamp, let marker, let copies):
            let bytes = event.bytes
            for _ in 0 ..< copies {
                bytes.withUnsafeBytes { send($0, payloadType: pt, timestamp: timestamp, marker: marker) }
                statistics.eventPacketsSent += 1
            }
        case .idle:
            break
        case .done:
            if let dtmfTimer { loop.cancel(dtmfTimer) }
            dtmfTimer = nil
        }
    }

    // MARK: receiving

    private func receive(_ socket: UDPSocket) {
        for _ in 0 ..< 64 {
            let datagram: UDPSocket.Datagram?
            do { datagram = try socket.receive(into: receiveBuffer) } catch { return }
            guard let datagram else { return }
            guard datagram.source == parameters.remote, !datagram.truncated, datagram.count >= RTPPacket.fixedHeaderSize,
                  receiveBuffer[0] & 0xC0 == 0x80 else {
                statistics.foreign += 1
                continue
            }
            // RTCP (payload types 200-204 with the marker bit's byte) is not used yet: dropped.
            if (200 ... 204).contains(receiveBuffer[1]) { continue }
            var length = datagram.count
            if let unprotect {
                guard case .rtp(let n) = unprotect.unprotect(receiveBuffer, length: length) else {
                    statistics.srtpRefused += 1
                    continue
                }
                length = n
            }
            received(UnsafeRawBufferPointer(rebasing: receiveBuffer[0 ..< length]))
        }
    }

    private func received(_ datagram: UnsafeRawBufferPointer) {
        let rtp: RTPPacket
        do { rtp = try RTPPacket.parse(datagram) } catch {
            statistics.malformed += 1
            return
        }
        guard parameters.receives else { return }
        let payload = rtp.payload(in: datagram)
        if rtp.payloadType == parameters.telephoneEventPayloadType {
            guard let event = TelephoneEvent(payload: payload) else {
                statistics.malformed += 1
                return
            }
            // One digit per event: its packets (and the three end copies) share a timestamp.
            guard rtp.timestamp != lastEventTimestamp else { return }
            lastEventTimestamp = rtp.timestamp
            statistics.digitsReceived += 1
            onDigit?(event.digit)
            return
        }
        guard rtp.payloadType == parameters.payloadType else {
            statistics.unknownPayloadType += 1
            return
        }
        var packet = MediaPacket()
        packet.ssrc = rtp.ssrc
        packet.codec = parameters.codec
        packet.sequenceNumber = rtp.sequenceNumber
        // The jitter buffers run on the 48 kHz media clock; wrapping multiplication keeps the
        // differences between timestamps, which is all they use.
        packet.timestamp = rtp.timestamp &* UInt32(parameters.codec.mediaTicksPerRTPTick)
        packet.arrivalSamples = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        guard packet.setPayload(payload) else {
            statistics.malformed += 1
            return
        }
        remoteSSRC = rtp.ssrc
        statistics.packetsReceived += 1
        _ = incoming.push(packet)
    }
}

/// The schedule of outgoing DTMF events (RFC 4733 §2.5): each digit 100 ms of event packets every
/// 20 ms (the first with the marker bit, the duration growing), then its end packet three times,
/// then 100 ms of nothing before the next digit (audio resumes in the gap).
struct DigitSender {
    static let stepMilliseconds = 20
    static let toneSteps = 5
    static let gapSteps = 5

    enum Step: Equatable {
        case send(TelephoneEvent, timestamp: UInt32, marker: Bool, copies: Int)
        case idle
        case done
    }

    private var pending: [UInt8] = []
    private var current: UInt8?
    private var startTimestamp: UInt32 = 0
    private var steps = 0
    private var gap = 0

    var isSending: Bool { current != nil }

    mutating func queue(_ code: UInt8) { pending.append(code) }

    mutating func step(nextTimestamp: UInt32, ticksPerStep: UInt32) -> Step {
        if let code = current {
            steps += 1
            let duration = UInt16(clamping: UInt32(steps) * ticksPerStep)
            if steps < Self.toneSteps {
                return .send(TelephoneEvent(event: code, end: false, duration: duration), timestamp: startTimestamp, marker: false, copies: 1)
            }
            current = nil
            gap = Self.gapSteps
            return .send(TelephoneEvent(event: code, end: true, duration: duration), timestamp: startTimestamp, marker: false, copies: 3)
        }
        if gap > 0 {
            gap -= 1
            return .idle
        }
        guard !pending.isEmpty else { return .done }
        let code = pending.removeFirst()
        current = code
        steps = 0
        startTimestamp = nextTimestamp
        return .send(TelephoneEvent(event: code, end: false, duration: 0), timestamp: startTimestamp, marker: true, copies: 1)
    }
}
