import RoomBase
import RoomCallMedia
import RoomMedia
import RoomMediaCrypto
import RoomSDP
import RoomSystem
import RoomTelephony

/// What a SIP call reads from the far end besides the SIP messages themselves (issue 29): the
/// first byte picks the surface, the rest is the far end's bytes.
///
/// - `O`: an offer (an INVITE's SDP) answered by `CallAudioNegotiation.answer` under each media
///   policy roomd's `[sip] media_encryption` gives (off, optional, required), from an IPv4 and
///   an IPv6 media address, as CallLink answers it (and checks it before it rings).
/// - `A`: the answer to our offer (a 2xx's SDP), read by `accept(answer:to:)` under each policy.
/// - `T`: an RFC 4733 telephone-event payload (`TelephoneEvent(payload:)`).
/// - `G`: G.722 and G.711 payloads as a call's decoders take them: the rest decoded whole, and
///   in two pieces split where its first byte says.
/// - `R`, `S`: one datagram from the far end's address at a `CallMediaSession`: plain RTP, or
///   SRTP (AES_CM_128_HMAC_SHA1_80, fixed keys), with telephone-event 101.
///
/// Checked: an answer has one section per offered section, exactly one of them open, and
/// round-trips through the parser; an agreement's payload type is in the section's formats,
/// its codec one we allow, its address one `SocketAddress` takes (CallLink hangs up on an
/// address it cannot use, after the call rang and was answered), its port 1-65535, its SDES
/// keys 30 bytes of base64 with a suite libsrtp is keyed for; an event is a DTMF digit and
/// writes back to the same bytes; G.722 gives two samples a byte, the same whole or in pieces;
/// G.711 A-law and μ-law bytes survive decoding and encoding again; a datagram at the media
/// session is counted once at most, and what reaches the engine is the agreed codec within
/// `MediaPacket.maxPayload`.
func fuzzCall(_ bytes: UnsafeRawBufferPointer) {
    guard let surface = bytes.first else { return }
    let rest = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
    switch surface {
    case UInt8(ascii: "O"): fuzzCallOffer(String(decoding: rest, as: UTF8.self))
    case UInt8(ascii: "A"): fuzzCallAnswer(String(decoding: rest, as: UTF8.self))
    case UInt8(ascii: "T"): fuzzTelephoneEvent(rest)
    case UInt8(ascii: "G"): fuzzTelephoneCodecs(rest)
    case UInt8(ascii: "R"): CallMediaFuzzHarness.shared.deliver(rest, secure: false)
    case UInt8(ascii: "S"): CallMediaFuzzHarness.shared.deliver(rest, secure: true)
    default: break
    }
}

private let callFuzzKey = SDESKey(inline: "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz")!

private func callFuzzPolicies(address: String) -> [CallLocalMedia] {
    [CallLocalMedia(address: address, port: 4000, security: .plain),
     CallLocalMedia(address: address, port: 4000, codecs: [.pcma, .g722], security: .preferred(callFuzzKey)),
     CallLocalMedia(address: address, port: 4000, security: .required(callFuzzKey), direction: .sendonly)]
}

private func fuzzCallOffer(_ text: String) {
    let offer: SessionDescription
    do { offer = try SessionDescription(parsing: text) } catch {
        note("call offer refused by the parser: \(error)")
        return
    }
    for local in callFuzzPolicies(address: "192.0.2.1") + callFuzzPolicies(address: "2001:db8::1") {
        let answer: SessionDescription
        let agreement: Agreement
        do throws(SDPError) {
            (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: local, origin: .init(sessionID: "1"))
        } catch {
            note("call offer not answered (\(local.security), \(local.address)): \(error)")
            continue
        }
        note("call offer answered: \(agreement.codec) pt \(agreement.payloadType) to \(agreement.remote.host):\(agreement.remote.port)")
        fuzzCheck(answer.media.count == offer.media.count, "an answer has one section per offered section")
        let open = answer.media.indices.filter { !answer.media[$0].isRejected }
        fuzzCheck(open.count == 1, "\(open.count) open sections in an answer")
        fuzzCheck((try? SessionDescription(parsing: answer.text)) == answer, "an answer does not round-trip")
        fuzzCheck(offer.media[open[0]].formats.contains(String(agreement.payloadType)), "the agreed payload type was not offered")
        checkCallAgreement(agreement, local: local)
    }
}

private func fuzzCallAnswer(_ text: String) {
    let answer: SessionDescription
    do { answer = try SessionDescription(parsing: text) } catch {
        note("call answer refused by the parser: \(error)")
        return
    }
    for local in callFuzzPolicies(address: "192.0.2.1") {
        let agreement: Agreement
        do throws(SDPError) { agreement = try CallAudioNegotiation.accept(answer: answer, to: local) } catch {
            note("call answer not accepted (\(local.security)): \(error)")
            continue
        }
        note("call answer accepted: \(agreement.codec) pt \(agreement.payloadType)")
        checkCallAgreement(agreement, local: local)
        if case .sdes(let suite, _, _) = agreement.security {
            fuzzCheck(suite == .aesCM128HMACSHA1_80, "an answer to our offer keyed with \(suite), not the suite offered")
        }
    }
}

/// What CallLink needs of an agreement to set up the call's media (`CallLink.parameters`).
private func checkCallAgreement(_ a: Agreement, local: CallLocalMedia) {
    fuzzCheck(a.payloadType < 128, "payload type \(a.payloadType)")
    fuzzCheck(local.codecs.contains(a.codec), "codec \(a.codec) is not one we allow")
    fuzzCheck((1 ... 65535).contains(a.remote.port), "port \(a.remote.port)")
    fuzzCheck((try? SocketAddress(ip: a.remote.host, port: UInt16(a.remote.port))) != nil,
              "the agreed address '\(a.remote.host)' is not one a socket takes")
    fuzzCheck(a.remote.host.contains(":") == local.address.contains(":"), "an address of the other family")
    if let te = a.telephoneEvent {
        fuzzCheck(te.payloadType < 128 && te.payloadType != a.payloadType, "telephone-event payload type \(te.payloadType)")
        fuzzCheck(te.clockRate == 8000 || te.clockRate == a.codec.rtpClockRate, "telephone-event clock \(te.clockRate)")
    }
    switch a.security {
    case .plain:
        if case .required = local.security { fuzzCheck(false, "plain RTP agreed where SRTP is required") }
    case .sdes(let suite, let localKey, let remoteKey):
        fuzzCheck(local.security != .plain, "SRTP agreed where it is off")
        fuzzCheck(localKey == callFuzzKey, "our key is not the one we gave")
        fuzzCheck(Base64.decode(remoteKey.inline)?.count == 30, "the far end's key does not decode to 30 bytes")
        fuzzCheck(SRTPProfile(rawValue: suite.rawValue) != nil, "suite \(suite) has no SRTP profile")
    }
}

private func fuzzTelephoneEvent(_ payload: UnsafeRawBufferPointer) {
    guard let event = TelephoneEvent(payload: payload) else {
        note("telephone event refused (\(payload.count) bytes)")
        return
    }
    note("telephone event: \(event.digit), end \(event.end), duration \(event.duration)")
    fuzzCheck(event.event <= 15, "event \(event.event) is not a DTMF digit")
    fuzzCheck(TelephoneEvent.code(of: event.digit) == event.event, "digit \(event.digit) does not map back to \(event.event)")
    var written = event.bytes
    written[1] |= payload[1] & 0x40   // the reserved bit is not kept
    fuzzCheck(written.elementsEqual(payload.prefix(4)), "an event does not write back to its bytes")
}

/// One input at a time (libFuzzer calls on one thread): the decoders and buffers are reused.
nonisolated(unsafe) private let g722Whole = G722Decoder()
nonisolated(unsafe) private let g722Pieces = G722Decoder()
nonisolated(unsafe) private let g722Samples = UnsafeMutablePointer<Int16>.allocate(capacity: 2 * 4096)
nonisolated(unsafe) private let g722PieceSamples = UnsafeMutablePointer<Int16>.allocate(capacity: 2 * 4096)

private func fuzzTelephoneCodecs(_ payload: UnsafeRawBufferPointer) {
    guard let base = payload.baseAddress?.assumingMemoryBound(to: UInt8.self), !payload.isEmpty else { return }
    let count = min(payload.count, 4096)
    g722Whole.reset()
    g722Pieces.reset()
    fuzzCheck(g722Whole.decode(base, count: count, into: g722Samples) == 2 * count, "G.722: not two samples a byte")
    let split = Int(payload[0]) % (count + 1)
    let first = g722Pieces.decode(base, count: split, into: g722PieceSamples)
    let second = g722Pieces.decode(base + split, count: count - split, into: g722PieceSamples + first)
    fuzzCheck(first + second == 2 * count, "G.722 in pieces: \(first + second) samples for \(count) bytes")
    for i in 0 ..< 2 * count where g722Samples[i] != g722PieceSamples[i] {
        fuzzCheck(false, "G.722: sample \(i) differs when decoded in pieces split at \(split)")
    }
    for byte in payload.prefix(count) {
        fuzzCheck(G711.aLaw(fromLinear: G711.linear(fromALaw: byte)) == byte, "A-law \(byte) does not survive a round trip")
        // μ-law has two codes for zero (0x7F and 0xFF); encoding zero gives 0xFF.
        let mu = G711.muLaw(fromLinear: G711.linear(fromMuLaw: byte))
        fuzzCheck(mu == byte || (byte == 0x7F && mu == 0xFF), "μ-law \(byte) does not survive a round trip")
    }
}

/// Two media sessions on loopback (plain and SRTP), each listening to one far end's socket,
/// kept for the whole run: a session per input would cost a socket and, for SRTP, two libsrtp
/// contexts each time.
final class CallMediaFuzzHarness {
    nonisolated(unsafe) static let shared = CallMediaFuzzHarness()

    private let loop: EventLoop
    private let far: UDPSocket
    private let plain: (session: CallMediaSession, ring: SPSCRing<MediaPacket>)
    private let secure: (session: CallMediaSession, ring: SPSCRing<MediaPacket>)
    private var digits = 0

    init() {
        let loop = try! EventLoop()
        let far = try! UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        func session(_ srtp: CallMediaParameters.SDESKeys?) -> (CallMediaSession, SPSCRing<MediaPacket>) {
            let ring = SPSCRing<MediaPacket>(capacity: 64)
            let parameters = CallMediaParameters(remote: far.localAddress, codec: .g722, payloadType: 9, telephoneEventPayloadType: 101, srtp: srtp)
            return (try! CallMediaSession(loop: loop, socket: try! UDPSocket(bindingTo: .ipv4Loopback(port: 0)), incoming: ring, parameters: parameters), ring)
        }
        let key = (0 ..< 30).map { UInt8($0) }
        self.loop = loop
        self.far = far
        plain = session(nil)
        secure = session(.init(profile: .aesCM128HMACSHA1_80, local: key, remote: key))
        for s in [plain.session, secure.session] { s.onDigit = { [unowned self] _ in self.digits += 1 } }
    }

    func deliver(_ datagram: UnsafeRawBufferPointer, secure useSecure: Bool) {
        let (session, ring) = useSecure ? secure : plain
        let before = Self.counted(session.statistics)
        guard (try? far.send(datagram, to: .ipv4Loopback(port: session.localPort))) == true else { return }
        // Loopback delivers at once: the datagram is readable when `send` returns.
        for _ in 0 ..< 2 where Self.counted(session.statistics) == before { _ = try? loop.runOnce(timeout: .zero) }
        let moved = Self.counted(session.statistics) - before
        note("call media (\(useSecure ? "SRTP" : "RTP")): \(session.statistics)")
        // None for a repeated event, RTCP or a datagram the kernel dropped; never two.
        fuzzCheck(moved <= 1, "one datagram counted \(moved) times")
        fuzzCheck(digits == plain.session.statistics.digitsReceived + secure.session.statistics.digitsReceived,
                  "digits reported \(digits) times, counted otherwise")
        while let packet = ring.pop() {
            fuzzCheck(packet.codec == .g722, "a packet of \(packet.codec) reached the engine")
            fuzzCheck(Int(packet.length) <= MediaPacket.maxPayload, "a payload of \(packet.length) bytes reached the engine")
        }
    }

    private static func counted(_ s: CallMediaSession.Statistics) -> Int {
        s.packetsReceived + s.digitsReceived + s.foreign + s.malformed + s.unknownPayloadType + s.srtpRefused
    }
}
