/// Offer/answer (RFC 3264, JSEP RFC 8829) for the one thing the appliance sends and receives over
/// WebRTC: a single Opus audio stream, BUNDLEd and rtcp-muxed on one ICE component, secured by
/// DTLS-SRTP, with the RFC 6464 audio level so the server can pick who speaks.
///
/// Everything else in a peer's description (video, data channels, other codecs) is declined in
/// the answer, never half-accepted: an SFU or a browser then knows exactly what the appliance
/// does. The Opus parameters follow RFC 7587: `useinbandfec` and `usedtx` are what the *author*
/// asks the other side's encoder to do; `minptime` is the shortest frame the author accepts.
public enum OpusAudioNegotiation {
    /// What this side brings to the negotiation.
    public struct LocalEndpoint: Sendable {
        public var iceUfrag: String
        public var icePassword: String
        public var fingerprint: DTLSFingerprint
        /// Known now; more may trickle later. The first is the default (its address and port go
        /// on the `m=`/`c=` lines, as RFC 8839 asks); none: port 9 and 0.0.0.0 (JSEP §5.2.1).
        public var candidates: [ICECandidate]
        public var ssrc: UInt32
        public var cname: String
        public var sends: Bool
        public var receives: Bool
        /// The dynamic payload type offered for Opus (an answer uses the offerer's).
        public var payloadType: UInt8
        /// Asks the far encoder for in-band FEC: the engine's decoder uses it.
        public var wantsFEC: Bool
        /// Asks the far encoder for DTX: the jitter buffer plays the gaps as comfort silence.
        public var wantsDTX: Bool
        /// The engine's frame, ms: 10 (issue 9's latency budget).
        public var minPtime: Int
        /// The one-byte header extension id offered for the audio level.
        public var audioLevelExtensionID: UInt8
        public var mid: String

        public init(iceUfrag: String, icePassword: String, fingerprint: DTLSFingerprint, candidates: [ICECandidate] = [],
                    ssrc: UInt32, cname: String, sends: Bool = true, receives: Bool = true, payloadType: UInt8 = 111,
                    wantsFEC: Bool = true, wantsDTX: Bool = true, minPtime: Int = 10, audioLevelExtensionID: UInt8 = 1,
                    mid: String = "0") {
            self.iceUfrag = iceUfrag
            self.icePassword = icePassword
            self.fingerprint = fingerprint
            self.candidates = candidates
            self.ssrc = ssrc
            self.cname = cname
            self.sends = sends
            self.receives = receives
            self.payloadType = payloadType
            self.wantsFEC = wantsFEC
            self.wantsDTX = wantsDTX
            self.minPtime = minPtime
            self.audioLevelExtensionID = audioLevelExtensionID
            self.mid = mid
        }
    }

    /// Which end of the DTLS handshake this side plays.
    public enum DTLSRole: Sendable, Equatable {
        /// Sends the ClientHello (`a=setup:active` on this side).
        case client
        case server
    }

    /// What both sides agreed, as this side must act on it.
    public struct Agreement: Sendable, Equatable {
        public var mid: String
        public var payloadType: UInt8
        /// This side's direction, as it appears in this side's description.
        public var direction: MediaDirection
        public var dtlsRole: DTLSRole
        public var remoteUfrag: String
        public var remotePassword: String
        public var remoteFingerprint: DTLSFingerprint
        public var remoteCandidates: [ICECandidate]
        /// `a=end-of-candidates` seen: no more will trickle.
        public var remoteCandidatesComplete: Bool
        /// The audio-level extension id both use; nil when the peer did not take it.
        public var audioLevelExtensionID: UInt8?
        /// The peer's decoder uses in-band FEC: our encoder should send it.
        public var peerWantsFEC: Bool
        public var peerWantsDTX: Bool
        /// The shortest frame the peer accepts (our encoder's frame must be at least this).
        public var peerMinPtime: Int?
        /// From the peer's `a=ssrc` (Janus and browsers send it; it may also change mid-call).
        public var peerSSRC: UInt32?
    }

    static let audioLevelURI = "urn:ietf:params:rtp-hdrext:ssrc-audio-level"
    static let proto = "UDP/TLS/RTP/SAVPF"

    /// The appliance's offer: one audio section, `a=setup:actpass`.
    public static func offer(_ local: LocalEndpoint, sessionID: String, version: Int = 2) -> SessionDescription {
        var section = MediaSection(kind: "audio", port: 9, proto: proto, formats: [String(local.payloadType)])
        section.attributes = mediaAttributes(local, setup: .actpass, payloadType: local.payloadType,
                                             direction: MediaDirection(sends: local.sends, receives: local.receives),
                                             audioLevelID: local.audioLevelExtensionID)
        placeDefaultCandidate(local.candidates, in: &section)
        return SessionDescription(origin: .init(sessionID: sessionID, sessionVersion: String(version)),
                                  attributes: [SDPAttribute("group", "BUNDLE \(local.mid)"), SDPAttribute("msid-semantic", " WMS")],
                                  media: [section])
    }

    /// Answers `offer`: accepts its first usable Opus audio section and declines every other one.
    /// Throws, naming the field, when there is nothing to accept or a required line is missing.
    public static func answer(to offer: SessionDescription, local: LocalEndpoint,
                              sessionID: String) throws(SDPError) -> (answer: SessionDescription, agreement: Agreement) {
        var chosen: (index: Int, payloadType: UInt8)?
        for (i, m) in offer.media.enumerated() where m.kind == "audio" && !m.isRejected {
            if let pt = opusPayloadType(in: m) { chosen = (i, pt); break }
        }
        guard let chosen else {
            throw SDPError(line: nil, field: "m=audio", message: "no audio section offers opus/48000/2")
        }
        let offered = offer.media[chosen.index]
        let remote = try remoteParameters(offered, session: offer)
        let theirSetup = remote.setup ?? .actpass
        let ourSetup: DTLSSetup
        switch theirSetup {
        case .actpass, .passive: ourSetup = .active
        case .active: ourSetup = .passive
        case .holdconn: throw SDPError(line: nil, field: "a=setup", message: "holdconn: the offerer will not open DTLS")
        }
        let direction = offered.direction.answer(wantingToSend: local.sends, receive: local.receives)
        let audioLevelID = audioLevelExtensionID(in: offered)
        let mid = offered.mid ?? local.mid

        var answerMedia: [MediaSection] = []
        var bundle: [String] = []
        for (i, m) in offer.media.enumerated() {
            if i == chosen.index {
                var section = MediaSection(kind: "audio", port: 9, proto: m.proto, formats: [String(chosen.payloadType)])
                var ours = local
                ours.mid = mid
                section.attributes = mediaAttributes(ours, setup: ourSetup, payloadType: chosen.payloadType,
                                                     direction: direction, audioLevelID: audioLevelID)
                placeDefaultCandidate(local.candidates, in: &section)
                answerMedia.append(section)
                bundle.append(mid)
            } else {
                // Declined: port 0, the same media and proto, one format (RFC 3264 §6); its mid kept
                // so the offerer can match it, and left out of BUNDLE (RFC 8843 §7.3.3).
                var declined = MediaSection(kind: m.kind, port: 0, proto: m.proto, formats: [m.formats.first ?? "0"])
                if let mid = m.mid { declined.attributes = [SDPAttribute("mid", mid)] }
                answerMedia.append(declined)
            }
        }
        let answer = SessionDescription(origin: .init(sessionID: sessionID),
                                        attributes: [SDPAttribute("group", "BUNDLE " + bundle.joined(separator: " "))],
                                        media: answerMedia)
        let agreement = Agreement(
            mid: mid, payloadType: chosen.payloadType, direction: direction,
            dtlsRole: ourSetup == .active ? .client : .server,
            remoteUfrag: remote.ufrag, remotePassword: remote.password, remoteFingerprint: remote.fingerprint,
            remoteCandidates: remote.candidates, remoteCandidatesComplete: remote.candidatesComplete,
            audioLevelExtensionID: audioLevelID, peerWantsFEC: remote.fmtp["useinbandfec"] == "1",
            peerWantsDTX: remote.fmtp["usedtx"] == "1", peerMinPtime: remote.fmtp["minptime"].flatMap { Int($0) },
            peerSSRC: remote.ssrc)
        return (answer, agreement)
    }

    /// Reads the answer to `local`'s offer (made by `offer`). Throws when the answer declined the
    /// audio, chose a codec that was not offered, or misses a required line.
    public static func accept(answer: SessionDescription, to local: LocalEndpoint) throws(SDPError) -> Agreement {
        guard let section = answer.media.first(where: { $0.kind == "audio" && ($0.mid == nil || $0.mid == local.mid) }) else {
            throw SDPError(line: nil, field: "m=audio", message: "the answer has no audio section")
        }
        guard !section.isRejected else { throw SDPError(line: nil, field: "m=audio", message: "the answer declined the audio (port 0)") }
        guard section.formats.first == String(local.payloadType), opusPayloadType(in: section) == local.payloadType else {
            throw SDPError(line: nil, field: "m=audio", message: "the answer's format \(section.formats.first ?? "none") is not the offered opus \(local.payloadType)")
        }
        let remote = try remoteParameters(section, session: answer)
        let role: DTLSRole
        switch remote.setup {
        case .active: role = .server
        case .passive: role = .client
        case .actpass, .holdconn, nil:
            throw SDPError(line: nil, field: "a=setup", message: "an answer must say active or passive, says \(remote.setup?.rawValue ?? "nothing")")
        }
        let theirs = section.direction
        let ours = MediaDirection(sends: local.sends && theirs.receives, receives: local.receives && theirs.sends)
        let level = audioLevelExtensionID(in: section)
        return Agreement(
            mid: local.mid, payloadType: local.payloadType, direction: ours, dtlsRole: role,
            remoteUfrag: remote.ufrag, remotePassword: remote.password, remoteFingerprint: remote.fingerprint,
            remoteCandidates: remote.candidates, remoteCandidatesComplete: remote.candidatesComplete,
            audioLevelExtensionID: level == local.audioLevelExtensionID ? level : nil,
            peerWantsFEC: remote.fmtp["useinbandfec"] == "1", peerWantsDTX: remote.fmtp["usedtx"] == "1",
            peerMinPtime: remote.fmtp["minptime"].flatMap { Int($0) }, peerSSRC: remote.ssrc)
    }

    // MARK: Pieces

    private struct Remote {
        var ufrag: String
        var password: String
        var fingerprint: DTLSFingerprint
        var setup: DTLSSetup?
        var candidates: [ICECandidate]
        var candidatesComplete: Bool
        var fmtp: [String: String]
        var ssrc: UInt32?
    }

    /// The peer's ICE, DTLS and Opus parameters for `m` (media level first, then session level,
    /// as RFC 8839/8842 allow either).
    private static func remoteParameters(_ m: MediaSection, session: SessionDescription) throws(SDPError) -> Remote {
        guard m.proto.hasPrefix("UDP/TLS/RTP/SAVP") else {
            throw SDPError(line: nil, field: "m=audio", message: "proto \(m.proto) is not DTLS-SRTP (UDP/TLS/RTP/SAVPF)")
        }
        guard let ufrag = m.attribute("ice-ufrag") ?? session.attribute("ice-ufrag"), (4...256).contains(ufrag.utf8.count) else {
            throw SDPError(line: nil, field: "a=ice-ufrag", message: "missing or not 4-256 characters")
        }
        guard let password = m.attribute("ice-pwd") ?? session.attribute("ice-pwd"), (22...256).contains(password.utf8.count) else {
            throw SDPError(line: nil, field: "a=ice-pwd", message: "missing or not 22-256 characters")
        }
        guard let fingerprintText = m.attribute("fingerprint") ?? session.attribute("fingerprint") else {
            throw SDPError(line: nil, field: "a=fingerprint", message: "missing: DTLS cannot be authenticated")
        }
        let fingerprint = try DTLSFingerprint(parsing: fingerprintText)
        var setup: DTLSSetup?
        if let text = m.attribute("setup") ?? session.attribute("setup") {
            guard let s = DTLSSetup(rawValue: text) else { throw SDPError(line: nil, field: "a=setup", message: "'\(text)' is not actpass, active, passive or holdconn") }
            setup = s
        }
        guard m.has("rtcp-mux") else {
            throw SDPError(line: nil, field: "a=rtcp-mux", message: "missing: the appliance sends RTP and RTCP on one port only")
        }
        var candidates: [ICECandidate] = []
        for text in m.attributes("candidate") {
            let c = try ICECandidate(parsing: text)
            if c.component == 1 && c.transport == "udp" { candidates.append(c) }   // TCP candidates: not spoken here
        }
        var fmtp: [String: String] = [:]
        if let pt = opusPayloadType(in: m) {
            for line in m.attributes("fmtp") where line.hasPrefix("\(pt) ") {
                for pair in line.dropFirst("\(pt) ".count).split(separator: ";") {
                    // Not omitting empty pieces: "=" is ["", ""] (a split that omits them gives
                    // [] for it, and indexing that trapped: issue 27).
                    let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    let key = kv[0].trimmingSpaces
                    guard !key.isEmpty else { continue }
                    fmtp[key] = kv.count == 2 ? kv[1].trimmingSpaces : ""
                }
            }
        }
        var ssrc: UInt32?
        if let first = m.attributes("ssrc").first, let number = first.split(separator: " ").first { ssrc = UInt32(number) }
        return Remote(ufrag: ufrag, password: password, fingerprint: fingerprint, setup: setup, candidates: candidates,
                      candidatesComplete: m.has("end-of-candidates"), fmtp: fmtp, ssrc: ssrc)
    }

    /// The payload type mapped to opus/48000/2 among `m`'s formats (RFC 7587 §7: always 48000/2).
    static func opusPayloadType(in m: MediaSection) -> UInt8? {
        for line in m.attributes("rtpmap") {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let pt = UInt8(parts[0]), pt < 128, m.formats.contains(String(pt)) else { continue }
            if parts[1].lowercased() == "opus/48000/2" { return pt }
        }
        return nil
    }

    /// The one-byte extension id the section maps to the audio-level URI (1-14), if any.
    static func audioLevelExtensionID(in m: MediaSection) -> UInt8? {
        for line in m.attributes("extmap") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, parts[1] == audioLevelURI else { continue }
            let idText = parts[0].split(separator: "/").first ?? ""
            if let id = UInt8(idText), (1...14).contains(id) { return id }
        }
        return nil
    }

    private static func mediaAttributes(_ local: LocalEndpoint, setup: DTLSSetup, payloadType pt: UInt8,
                                        direction: MediaDirection, audioLevelID: UInt8?) -> [SDPAttribute] {
        var a: [SDPAttribute] = [
            SDPAttribute("rtcp", "9 IN IP4 0.0.0.0"),
            SDPAttribute("ice-ufrag", local.iceUfrag),
            SDPAttribute("ice-pwd", local.icePassword),
            SDPAttribute("ice-options", "trickle"),
            SDPAttribute("fingerprint", local.fingerprint.description),
            SDPAttribute("setup", setup.rawValue),
            SDPAttribute("mid", local.mid),
        ]
        if let audioLevelID { a.append(SDPAttribute("extmap", "\(audioLevelID) \(audioLevelURI)")) }
        a.append(SDPAttribute(direction.rawValue))
        a.append(SDPAttribute("rtcp-mux"))
        a.append(SDPAttribute("rtpmap", "\(pt) opus/48000/2"))
        var fmtp = "\(pt) minptime=\(local.minPtime)"
        fmtp += ";useinbandfec=\(local.wantsFEC ? 1 : 0)"
        if local.wantsDTX { fmtp += ";usedtx=1" }
        a.append(SDPAttribute("fmtp", fmtp))
        if direction.sends { a.append(SDPAttribute("ssrc", "\(local.ssrc) cname:\(local.cname)")) }
        for c in local.candidates { a.append(SDPAttribute("candidate", c.attributeValue)) }
        return a
    }

    private static func placeDefaultCandidate(_ candidates: [ICECandidate], in section: inout MediaSection) {
        if let first = candidates.first {
            section.port = first.port
            section.connection = "IN \(first.address.contains(":") ? "IP6" : "IP4") \(first.address)"
        } else {
            section.connection = "IN IP4 0.0.0.0"
        }
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self[...]
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
