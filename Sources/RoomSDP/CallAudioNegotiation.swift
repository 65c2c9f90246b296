/// Offer/answer (RFC 3264) for a SIP call's one audio stream: plain RTP (`RTP/AVP`) or SRTP keyed
/// in the description itself (SDES, RFC 4568: `RTP/SAVP` with `a=crypto`), one codec out of
/// Opus, G.722, PCMU and PCMA, and RFC 4733 telephone events for DTMF.
///
/// SIP peers are not browsers: PBXs, desk phones and softphones send what they have (G.711 only,
/// several crypto lines, a session-level `c=`, no `a=rtpmap` for static types), so the reader is
/// lenient about what RFC 3264 lets an author leave out and strict about what would change the
/// media (ports, payload types, keys, addresses): a wrong value is an `SDPError` naming the
/// field, never a guess. The result is an `Agreement` the media side configures its RTP socket,
/// codec and SRTP context from; this code opens nothing.
public enum CallAudioNegotiation {
    /// The most formats and crypto lines read from one media section: a real offer has a
    /// handful; more is someone making the answerer work.
    public static let maximumFormats = 64
    public static let maximumCryptoLines = 16

    /// Builds the offer for `local` (a new call, or a re-INVITE: hold is `local.direction =
    /// .sendonly`). `origin` carries the session id and a version the caller raises each time.
    public static func offer(_ local: CallLocalMedia, origin: SessionDescription.Origin) -> SessionDescription {
        var formats: [String] = []
        var attributes: [SDPAttribute] = []
        for codec in local.codecs {
            let pt = codec.offeredPayloadType
            formats.append(String(pt))
            attributes.append(SDPAttribute("rtpmap", "\(pt) \(codec.rtpmapName)"))
            if codec == .opus { attributes.append(SDPAttribute("fmtp", "\(pt) useinbandfec=1")) }
        }
        formats.append(String(CallLocalMedia.telephoneEventPayloadType))
        attributes.append(SDPAttribute("rtpmap", "\(CallLocalMedia.telephoneEventPayloadType) telephone-event/8000"))
        attributes.append(SDPAttribute("fmtp", "\(CallLocalMedia.telephoneEventPayloadType) 0-15"))
        attributes.append(SDPAttribute("ptime", String(local.ptime)))
        if let key = local.security.key {
            attributes.append(SDPAttribute("crypto", "1 \(SRTPSuite.aesCM128HMACSHA1_80.rawValue) inline:\(key.inline)"))
        }
        attributes.append(SDPAttribute(local.direction.rawValue))
        let section = MediaSection(kind: "audio", port: local.port, proto: local.security.offeredProto, formats: formats,
                                   attributes: attributes)
        return SessionDescription(origin: origin.with(address: local.address), connection: connectionLine(local.address),
                                  media: [section])
    }

    /// Answers a remote offer: the first audio section we can use is answered with our first
    /// preferred codec it carries, every other section is refused (port 0), as RFC 3264 §6 asks.
    /// Throws when no section is usable; the reason becomes the SIP call's 488.
    public static func answer(to offer: SessionDescription, local: CallLocalMedia,
                              origin: SessionDescription.Origin) throws(SDPError) -> (answer: SessionDescription, agreement: Agreement) {
        var firstProblem: SDPError?
        var chosen: (index: Int, agreement: Agreement, section: MediaSection)?
        for (index, m) in offer.media.enumerated() where chosen == nil && m.kind == "audio" && !m.isRejected {
            do throws(SDPError) {
                chosen = try answerSection(m, in: offer, local: local).map { (index, $0.agreement, $0.section) }
                if chosen == nil, firstProblem == nil {
                    firstProblem = SDPError(line: nil, field: "m=audio", message: "no codec in common (we have \(local.codecs.map(\.rawValue).joined(separator: ", ")))")
                }
            } catch {
                if firstProblem == nil { firstProblem = error }
            }
        }
        guard let chosen else {
            throw firstProblem ?? SDPError(line: nil, field: "m", message: "no audio section in the offer")
        }
        var media: [MediaSection] = []
        for (index, m) in offer.media.enumerated() {
            if index == chosen.index { media.append(chosen.section) } else {
                media.append(MediaSection(kind: m.kind, port: 0, proto: m.proto, formats: m.formats.isEmpty ? ["0"] : [m.formats[0]]))
            }
        }
        let answer = SessionDescription(origin: origin.with(address: local.address), connection: connectionLine(local.address), media: media)
        return (answer, chosen.agreement)
    }

    /// Reads the answer to an offer made from `local`: the codec is the answer's first format we
    /// offered, the keys are the answer's crypto line for ours.
    public static func accept(answer: SessionDescription, to local: CallLocalMedia) throws(SDPError) -> Agreement {
        guard let m = answer.media.first(where: { $0.kind == "audio" }) else {
            throw SDPError(line: nil, field: "m", message: "the answer has no audio section")
        }
        guard !m.isRejected else { throw SDPError(line: nil, field: "m=audio", message: "the far end refused the audio (port 0)") }
        let formats = try formatTable(m)
        guard let (codec, pt) = pickCodec(from: formats, order: m.formats, preferring: nil, allowed: local.codecs) else {
            throw SDPError(line: nil, field: "m=audio", message: "the answer has none of the codecs offered")
        }
        let security: Agreement.Security
        switch (m.proto.uppercased(), local.security) {
        case ("RTP/SAVP", .plain):
            throw SDPError(line: nil, field: "m=audio", message: "RTP/SAVP answered to a plain RTP/AVP offer")
        case ("RTP/AVP", .required):
            throw SDPError(line: nil, field: "m=audio", message: "the answer is plain RTP/AVP; this account requires SRTP")
        case (_, .plain):
            security = .plain
        case (let proto, .required(let key)), (let proto, .preferred(let key)):
            let crypto = try cryptoLines(m)
            if let line = crypto.first(where: { $0.tag == 1 && $0.suite == .aesCM128HMACSHA1_80 }), let suite = line.suite {
                security = .sdes(suite: suite, localKey: key, remoteKey: line.key)
            } else if proto == "RTP/AVP" && crypto.isEmpty {
                security = .plain
            } else {
                throw SDPError(line: nil, field: "a=crypto", message: "the answer has no crypto line for our tag 1 AES_CM_128_HMAC_SHA1_80")
            }
        }
        return Agreement(
            codec: codec, payloadType: pt, telephoneEvent: telephoneEvent(formats, order: m.formats, rate: codec.rtpClockRate),
            remote: try remoteAddress(m, session: answer, port: m.port, local: local), remotePtime: try ptime(m),
            localDirection: local.direction, remoteDirection: m.direction, security: security)
    }

    // MARK: Sections

    private static func answerSection(_ m: MediaSection, in offer: SessionDescription,
                                      local: CallLocalMedia) throws(SDPError) -> (agreement: Agreement, section: MediaSection)? {
        let proto = m.proto.uppercased()
        guard proto == "RTP/AVP" || proto == "RTP/SAVP" else {
            throw SDPError(line: nil, field: "m=audio", message: "transport \(m.proto) is not RTP/AVP or RTP/SAVP")
        }
        let formats = try formatTable(m)
        guard let (codec, pt) = pickCodec(from: formats, order: m.formats, preferring: local.codecs, allowed: local.codecs) else { return nil }
        let crypto = try cryptoLines(m)
        var security = Agreement.Security.plain
        var cryptoAttribute: SDPAttribute?
        switch local.security {
        case .plain:
            if proto == "RTP/SAVP" {
                throw SDPError(line: nil, field: "m=audio", message: "RTP/SAVP offered, and SRTP is off for this account")
            }
        case .required(let key), .preferred(let key):
            if let line = crypto.first(where: { $0.suite != nil }), let suite = line.suite {
                security = .sdes(suite: suite, localKey: key, remoteKey: line.key)
                cryptoAttribute = SDPAttribute("crypto", "\(line.tag) \(suite.rawValue) inline:\(key.inline)")
            } else if proto == "RTP/SAVP" || !crypto.isEmpty {
                throw SDPError(line: nil, field: "a=crypto", message: "no crypto line with a suite we support (AES_CM_128_HMAC_SHA1_80 or _32)")
            } else if case .required = local.security {
                throw SDPError(line: nil, field: "m=audio", message: "plain RTP/AVP offered; this account requires SRTP (RTP/SAVP with a=crypto)")
            }
        }
        let te = telephoneEvent(formats, order: m.formats, rate: codec.rtpClockRate)
        let remoteDirection = m.direction
        let ourDirection = remoteDirection.answer(wantingToSend: local.direction.sends, receive: local.direction.receives)
        var attributes = [SDPAttribute("rtpmap", "\(pt) \(codec.rtpmapName)")]
        if codec == .opus { attributes.append(SDPAttribute("fmtp", "\(pt) useinbandfec=1")) }
        var answerFormats = [String(pt)]
        if let te {
            answerFormats.append(String(te.payloadType))
            attributes.append(SDPAttribute("rtpmap", "\(te.payloadType) telephone-event/\(te.clockRate)"))
            attributes.append(SDPAttribute("fmtp", "\(te.payloadType) 0-15"))
        }
        attributes.append(SDPAttribute("ptime", String(local.ptime)))
        if let cryptoAttribute { attributes.append(cryptoAttribute) }
        attributes.append(SDPAttribute(ourDirection.rawValue))
        let agreement = Agreement(codec: codec, payloadType: pt, telephoneEvent: te,
                                  remote: try remoteAddress(m, session: offer, port: m.port, local: local), remotePtime: try ptime(m),
                                  localDirection: ourDirection, remoteDirection: remoteDirection, security: security)
        let section = MediaSection(kind: "audio", port: local.port, proto: m.proto, formats: answerFormats, attributes: attributes)
        return (agreement, section)
    }

    /// What each payload type of the section is: its `a=rtpmap`, else the RFC 3551 static
    /// meaning (0 PCMU, 8 PCMA, 9 G722). Dynamic types without a map are skipped.
    private static func formatTable(_ m: MediaSection) throws(SDPError) -> [UInt8: (name: String, rate: Int, channels: Int)] {
        guard m.formats.count <= maximumFormats else {
            throw SDPError(line: nil, field: "m=audio", message: "\(m.formats.count) formats, more than \(maximumFormats)")
        }
        var table: [UInt8: (name: String, rate: Int, channels: Int)] = [:]
        for f in m.formats {
            guard let pt = payloadType(f) else {
                throw SDPError(line: nil, field: "m=audio", message: "payload type '\(f.prefix(16))' is not 0-127")
            }
            switch pt {
            case 0: table[pt] = ("PCMU", 8000, 1)
            case 8: table[pt] = ("PCMA", 8000, 1)
            case 9: table[pt] = ("G722", 8000, 1)
            default: break
            }
        }
        for line in m.attributes("rtpmap") {
            let parts = line.sdpFields
            guard parts.count == 2, let pt = payloadType(parts[0]) else {
                throw SDPError(line: nil, field: "a=rtpmap", message: "'\(line.prefix(40))' is not '<payload type> <name>/<rate>'")
            }
            let encoding = parts[1].split(separator: "/", omittingEmptySubsequences: false)
            guard encoding.count == 2 || encoding.count == 3, !encoding[0].isEmpty, encoding[0].count <= 32,
                  let rate = Int(encoding[1]), (1 ... 1_000_000).contains(rate) else {
                throw SDPError(line: nil, field: "a=rtpmap", message: "'\(parts[1].prefix(40))' is not <name>/<rate>[/<channels>]")
            }
            var channels = 1
            if encoding.count == 3 {
                guard let c = Int(encoding[2]), (1 ... 8).contains(c) else {
                    throw SDPError(line: nil, field: "a=rtpmap", message: "channels '\(encoding[2].prefix(16))' is not 1-8")
                }
                channels = c
            }
            table[pt] = (String(encoding[0]), rate, channels)
        }
        return table
    }

    /// A payload type written the one way it can be (decimal, no sign, no leading zero), 0-127.
    /// `UInt8("09")` and `UInt8("+9")` are 9 too, and an answer that says `9` to an offer of
    /// `09` names a format the offer did not list (the `call` fuzz target's first find).
    static func payloadType(_ text: String) -> UInt8? {
        guard let pt = UInt8(text), pt < 128, String(pt) == text else { return nil }
        return pt
    }

    /// The codec to use: with `preferring`, our first preferred codec the section has (we
    /// answer); without, the section's first format we allow (we read an answer).
    private static func pickCodec(from table: [UInt8: (name: String, rate: Int, channels: Int)], order: [String],
                                  preferring: [CallCodec]?, allowed: [CallCodec]) -> (CallCodec, UInt8)? {
        let inOrder: [(CallCodec, UInt8)] = order.compactMap { f in
            guard let pt = payloadType(f), let entry = table[pt], let codec = CallCodec(rtpmap: entry), allowed.contains(codec) else { return nil }
            return (codec, pt)
        }
        guard let preferring else { return inOrder.first }
        for codec in preferring { if let hit = inOrder.first(where: { $0.0 == codec }) { return hit } }
        return nil
    }

    /// The section's telephone-event at `rate` (48000 beside Opus when offered), else at 8000.
    private static func telephoneEvent(_ table: [UInt8: (name: String, rate: Int, channels: Int)], order: [String],
                                       rate: Int) -> Agreement.TelephoneEvent? {
        let events = order.compactMap { f -> (UInt8, Int)? in
            guard let pt = payloadType(f), let e = table[pt], e.name.lowercased() == "telephone-event" else { return nil }
            return (pt, e.rate)
        }
        guard let hit = events.first(where: { $0.1 == rate }) ?? events.first(where: { $0.1 == 8000 }) else { return nil }
        return Agreement.TelephoneEvent(payloadType: hit.0, clockRate: hit.1)
    }

    private struct CryptoLine {
        var tag: Int
        /// nil: a suite we do not support (skipped when answering).
        var suite: SRTPSuite?
        var key: SDESKey
    }

    /// The section's `a=crypto` lines, in the author's order of preference. A line for a suite
    /// we support must be well formed; lines for other suites are kept only by their tag.
    private static func cryptoLines(_ m: MediaSection) throws(SDPError) -> [CryptoLine] {
        let lines = m.attributes("crypto")
        guard lines.count <= maximumCryptoLines else {
            throw SDPError(line: nil, field: "a=crypto", message: "\(lines.count) lines, more than \(maximumCryptoLines)")
        }
        var out: [CryptoLine] = []
        for line in lines {
            let f = line.sdpFields
            guard f.count >= 3, let tag = Int(f[0]), (0 ... 999_999_999).contains(tag) else {
                throw SDPError(line: nil, field: "a=crypto", message: "'\(line.prefix(40))' is not '<tag> <suite> inline:<key>'")
            }
            guard let suite = SRTPSuite(rawValue: f[1]) else { continue }
            guard f[2].hasPrefix("inline:") else {
                throw SDPError(line: nil, field: "a=crypto", message: "tag \(tag): key method is not inline:")
            }
            let params = f[2].dropFirst("inline:".count).split(separator: "|", omittingEmptySubsequences: false)
            // An MKI (a third |-field) would need the MKI in every packet: not supported, skipped.
            if params.count > 2 || (params.count == 2 && params[1].contains(":")) { continue }
            // Session parameters (RFC 4568 §6.3: UNENCRYPTED_SRTP, KDR=, FEC_ORDER=, …) change
            // what the packets are; libsrtp is keyed without them, so a line with any but the
            // window size hint is skipped rather than answered and then unable to decrypt.
            if f.dropFirst(3).contains(where: { !$0.hasPrefix("WSH=") }) { continue }
            guard let key = SDESKey(inline: String(params[0])) else {
                throw SDPError(line: nil, field: "a=crypto", message: "tag \(tag): the inline key is not 40 base64 characters (30 bytes of key and salt)")
            }
            out.append(CryptoLine(tag: tag, suite: suite, key: key))
        }
        return out
    }

    private static func ptime(_ m: MediaSection) throws(SDPError) -> Int? {
        guard let text = m.attribute("ptime") else { return nil }
        // Some phones write "20.0"; the integer part is what a frame size can be.
        let whole = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard let ms = Int(whole), (1 ... 200).contains(ms) else {
            throw SDPError(line: nil, field: "a=ptime", message: "'\(text.prefix(16))' is not 1-200 ms")
        }
        return ms
    }

    /// The far end's RTP address. It must be of our media address's family: the call's one
    /// socket is bound to an IPv4 or an IPv6 address, and could not send to the other (the
    /// call would come up and carry nothing).
    private static func remoteAddress(_ m: MediaSection, session: SessionDescription, port: Int,
                                      local: CallLocalMedia) throws(SDPError) -> Agreement.Address {
        guard let line = m.connection ?? session.connection else {
            throw SDPError(line: nil, field: "c", message: "no connection address for the audio (neither session nor media level)")
        }
        let f = line.sdpFields
        guard f.count == 3, f[0] == "IN" else {
            throw SDPError(line: nil, field: "c", message: "'\(line.prefix(60))' is not 'IN IP4|IP6 <address>'")
        }
        switch f[1] {
        case "IP4":
            guard isIPv4(f[2]) else { throw SDPError(line: nil, field: "c", message: "'\(f[2].prefix(60))' is not an IPv4 address") }
        case "IP6":
            guard isIPv6(f[2]) else { throw SDPError(line: nil, field: "c", message: "'\(f[2].prefix(60))' is not an IPv6 address") }
        default:
            throw SDPError(line: nil, field: "c", message: "address type '\(f[1].prefix(16))' is not IP4 or IP6")
        }
        let ours = local.address.contains(":") ? "IP6" : "IP4"
        guard f[1] == ours else {
            throw SDPError(line: nil, field: "c", message: "an \(f[1]) address, and this appliance's media address \(local.address.prefix(60)) is \(ours)")
        }
        return Agreement.Address(host: f[2], port: port)
    }

    /// A dotted-quad IPv4 address as the socket layer (`inet_pton`) reads it: four decimal parts
    /// 0-255 without leading zeros. A looser check let `096.0.2.7` through to an agreement whose
    /// address no socket takes (the call fuzz target's second find): the call came up, then
    /// CallLink hung up on it.
    static func isIPv4(_ s: String) -> Bool {
        let parts = s.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            (1 ... 3).contains(part.count) && part.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
                && (part.count == 1 || part.first != 0x30) && Int(String(decoding: part, as: UTF8.self))! <= 255
        }
    }

    /// A textual IPv6 address as `inet_pton` reads it (RFC 4291 §2.2): eight groups of one to
    /// four hex digits, or fewer around one `::` that stands for at least one group of zeros,
    /// the last two groups possibly written as an IPv4 address. No zone (`%eth0`): SDP has none.
    static func isIPv6(_ s: String) -> Bool {
        guard (2 ... 45).contains(s.utf8.count) else { return false }
        var body = Substring(s)
        var groups = 8
        if let colon = body.lastIndex(of: ":"), body[body.index(after: colon)...].contains(".") {
            guard isIPv4(String(body[body.index(after: colon)...])) else { return false }
            body = body[...colon]
            if !body.hasSuffix("::") { body = body.dropLast() }
            groups = 6
        }
        /// The number of colon-separated hex groups in `text` ("" has none), nil if one is malformed.
        func hexGroups(_ text: Substring) -> Int? {
            if text.isEmpty { return 0 }
            let parts = text.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard parts.allSatisfy({ part in
                (1 ... 4).contains(part.count) && part.allSatisfy { c in
                    (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
                }
            }) else { return nil }
            return parts.count
        }
        guard let gap = body.firstRange(of: "::") else { return hexGroups(body) == groups }
        guard let left = hexGroups(body[..<gap.lowerBound]), let right = hexGroups(body[gap.upperBound...]) else { return false }
        return left + right <= groups - 1
    }

    private static func connectionLine(_ address: String) -> String {
        "IN \(address.contains(":") ? "IP6" : "IP4") \(address)"
    }
}

extension SessionDescription.Origin {
    func with(address: String) -> Self {
        var o = self
        o.addressType = address.contains(":") ? "IP6" : "IP4"
        o.address = address
        return o
    }
}

/// The codecs a SIP call can carry, in the order roomd prefers them by default.
public enum CallCodec: String, Sendable, Equatable, CaseIterable {
    case opus, g722, pcmu, pcma

    /// The `a=rtpmap` encoding. G.722's says 8000 though it samples at 16 kHz: an error in RFC
    /// 1890 kept by RFC 3551 §4.5.2 for compatibility, so its RTP clock runs at 8000.
    var rtpmapName: String {
        switch self {
        case .opus: "opus/48000/2"
        case .g722: "G722/8000"
        case .pcmu: "PCMU/8000"
        case .pcma: "PCMA/8000"
        }
    }

    /// The payload type in our offers (static ones from RFC 3551, Opus dynamic).
    var offeredPayloadType: UInt8 {
        switch self {
        case .opus: 111
        case .g722: 9
        case .pcmu: 0
        case .pcma: 8
        }
    }

    /// The RTP timestamp rate (G.722: 8000, see `rtpmapName`).
    public var rtpClockRate: Int { self == .opus ? 48_000 : 8_000 }
    /// The rate the codec really samples at.
    public var sampleRate: Int {
        switch self {
        case .opus: 48_000
        case .g722: 16_000
        case .pcmu, .pcma: 8_000
        }
    }

    public var channels: Int { self == .opus ? 2 : 1 }

    init?(rtpmap entry: (name: String, rate: Int, channels: Int)) {
        switch (entry.name.lowercased(), entry.rate) {
        case ("opus", 48_000) where entry.channels == 2: self = .opus
        case ("g722", 8_000): self = .g722
        case ("pcmu", 8_000): self = .pcmu
        case ("pcma", 8_000): self = .pcma
        default: return nil
        }
    }
}

/// The SDES crypto suites roomd answers (RFC 4568 §6.2; AES-CM with HMAC-SHA1, 80- or 32-bit tag).
public enum SRTPSuite: String, Sendable, Equatable {
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    case aesCM128HMACSHA1_32 = "AES_CM_128_HMAC_SHA1_32"
}

/// One side's SRTP master key and salt as SDES carries it: 30 bytes (16 key, 14 salt) in
/// standard base64, 40 characters. Kept as text because RoomSDP has no base64 of its own:
/// the media side decodes it with RoomBase's `Base64.decode` (which this shape passes).
public struct SDESKey: Sendable, Equatable, CustomStringConvertible {
    public let inline: String

    /// Nil unless `inline` is 40 characters of the base64 alphabet (30 bytes need no padding).
    public init?(inline: String) {
        guard inline.utf8.count == 40, inline.utf8.allSatisfy({ c in
            (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2B || c == 0x2F
        }) else { return nil }
        self.inline = inline
    }

    /// Never the key itself: descriptions end up in logs.
    public var description: String { "SDESKey(30 bytes)" }
}

/// What the local side brings to a call's negotiation (the media side owns the socket).
public struct CallLocalMedia: Sendable, Equatable {
    /// Our dynamic payload type for telephone-event in offers.
    public static let telephoneEventPayloadType: UInt8 = 101

    /// Whether SRTP is used, and our key when it is.
    public enum Security: Sendable, Equatable {
        /// Plain RTP only (RTP/AVP).
        case plain
        /// SRTP with SDES only: a plain offer is refused (the account default).
        case required(SDESKey)
        /// SRTP when the far end has it (RTP/SAVP, or a=crypto in an RTP/AVP offer), else plain.
        case preferred(SDESKey)

        var key: SDESKey? {
            switch self {
            case .plain: nil
            case .required(let k), .preferred(let k): k
            }
        }

        var offeredProto: String {
            if case .required = self { return "RTP/SAVP" }
            return "RTP/AVP"
        }
    }

    /// Our RTP address (an IP literal) and port, where the far end sends.
    public var address: String
    public var port: Int
    /// The codecs allowed, most preferred first.
    public var codecs: [CallCodec]
    public var security: Security
    /// sendrecv; sendonly to hold the far end; inactive.
    public var direction: MediaDirection
    public var ptime: Int

    public init(address: String, port: Int, codecs: [CallCodec] = CallCodec.allCases, security: Security,
                direction: MediaDirection = .sendrecv, ptime: Int = 20) {
        self.address = address
        self.port = port
        self.codecs = codecs
        self.security = security
        self.direction = direction
        self.ptime = ptime
    }
}

/// What both sides agreed on: everything the media side needs to send and receive.
public struct Agreement: Sendable, Equatable {
    public struct TelephoneEvent: Sendable, Equatable {
        public var payloadType: UInt8
        public var clockRate: Int
    }

    public struct Address: Sendable, Equatable {
        /// An IPv4 or IPv6 literal (from `c=`).
        public var host: String
        public var port: Int
    }

    public enum Security: Sendable, Equatable {
        case plain
        case sdes(suite: SRTPSuite, localKey: SDESKey, remoteKey: SDESKey)
    }

    public var codec: CallCodec
    public var payloadType: UInt8
    public var telephoneEvent: TelephoneEvent?
    /// Where to send RTP.
    public var remote: Address
    /// The far end's `a=ptime`, when it gave one.
    public var remotePtime: Int?
    /// Our direction as agreed (sendonly while we hold).
    public var localDirection: MediaDirection
    /// The far end's direction (sendonly or inactive: they hold us).
    public var remoteDirection: MediaDirection
    public var security: Security

    public var rtpClockRate: Int { codec.rtpClockRate }
    public var channels: Int { codec.channels }
    /// The far end holds the call (it no longer receives what we send).
    public var isHeldByRemote: Bool { !remoteDirection.receives }
}
