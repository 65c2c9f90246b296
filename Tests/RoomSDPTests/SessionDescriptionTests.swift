import XCTest
@testable import RoomSDP

/// Descriptions shaped like what Chromium and Janus 1.1 send (their line sets and orders, with
/// this test's own values), so the negotiation is tested against the peers issue 12 names.
final class SessionDescriptionTests: XCTestCase {
    static let fingerprintHex = (0..<32).map { i -> String in
        let s = String((i * 37 + 11) & 0xFF, radix: 16, uppercase: true)
        return s.count == 1 ? "0" + s : s
    }.joined(separator: ":")

    /// A browser's offer: audio (Opus among other codecs), video and a data channel, BUNDLEd.
    static let browserOffer = """
    v=0
    o=- 4611731400430051336 2 IN IP4 127.0.0.1
    s=-
    t=0 0
    a=group:BUNDLE 0 1 2
    a=extmap-allow-mixed
    a=msid-semantic: WMS stream0
    m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
    c=IN IP4 0.0.0.0
    a=rtcp:9 IN IP4 0.0.0.0
    a=candidate:2999745851 1 udp 2122260223 3f1c2a8e-0c5b-4a4e-9a57-1d2f0b8c9e01.local 54400 typ host generation 0 network-id 1
    a=candidate:1467250027 1 tcp 1518280447 3f1c2a8e-0c5b-4a4e-9a57-1d2f0b8c9e01.local 9 typ host tcptype active generation 0
    a=ice-ufrag:Fq3x
    a=ice-pwd:lq9Xo2m0HC0mXr7e2aIFg3c1
    a=ice-options:trickle
    a=fingerprint:sha-256 \(fingerprintHex)
    a=setup:actpass
    a=mid:0
    a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
    a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
    a=sendrecv
    a=msid:stream0 track0
    a=rtcp-mux
    a=rtpmap:111 opus/48000/2
    a=rtcp-fb:111 transport-cc
    a=fmtp:111 minptime=10;useinbandfec=1
    a=rtpmap:63 red/48000/2
    a=fmtp:63 111/111
    a=rtpmap:9 G722/8000
    a=rtpmap:0 PCMU/8000
    a=rtpmap:8 PCMA/8000
    a=rtpmap:13 CN/8000
    a=rtpmap:110 telephone-event/48000
    a=rtpmap:126 telephone-event/8000
    a=ssrc:3735928559 cname:browsercname
    m=video 9 UDP/TLS/RTP/SAVPF 96 97
    c=IN IP4 0.0.0.0
    a=mid:1
    a=sendrecv
    a=rtcp-mux
    a=rtpmap:96 VP8/90000
    a=rtpmap:97 rtx/90000
    m=application 9 UDP/DTLS/SCTP webrtc-datachannel
    c=IN IP4 0.0.0.0
    a=mid:2
    a=sctp-port:5000

    """

    /// Janus's answer to the appliance's offer (AudioBridge join).
    static let janusAnswer = """
    v=0\r
    o=- 1732460000000000 1732460000000001 IN IP4 127.0.0.1\r
    s=AudioBridge 1234\r
    t=0 0\r
    a=group:BUNDLE 0\r
    a=ice-options:trickle\r
    a=fingerprint:sha-256 \(fingerprintHex)\r
    a=extmap-allow-mixed\r
    a=msid-semantic: WMS janus\r
    m=audio 9 UDP/TLS/RTP/SAVPF 111\r
    c=IN IP4 127.0.0.1\r
    a=sendrecv\r
    a=mid:0\r
    a=rtcp-mux\r
    a=ice-ufrag:Jn5k\r
    a=ice-pwd:cxX3mFzP0gqB7tZ0n1aV4y\r
    a=ice-options:trickle\r
    a=setup:active\r
    a=rtpmap:111 opus/48000/2\r
    a=fmtp:111 useinbandfec=1\r
    a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r
    a=msid:janus janusa0\r
    a=ssrc:2882400001 cname:janus\r
    a=candidate:1 1 udp 2015363327 127.0.0.1 40022 typ host\r
    a=candidate:2 1 udp 1679819007 203.0.113.7 40022 typ srflx raddr 127.0.0.1 rport 40022\r
    a=end-of-candidates\r

    """

    func local(sends: Bool = true, receives: Bool = true) throws -> OpusAudioNegotiation.LocalEndpoint {
        OpusAudioNegotiation.LocalEndpoint(
            iceUfrag: "rmd1", icePassword: "appliance-ice-password-0001",
            fingerprint: try DTLSFingerprint(parsing: "sha-256 " + Self.fingerprintHex),
            candidates: [ICECandidate(foundation: "1", priority: ICECandidate.priority(kind: .host),
                                      address: "192.0.2.10", port: 50000, kind: .host)],
            ssrc: 0x1234_5678, cname: "roomd", sends: sends, receives: receives)
    }

    // MARK: Parsing

    func testTheBrowserOfferParsesIntoItsSections() throws {
        let d = try SessionDescription(parsing: Self.browserOffer)
        XCTAssertEqual(d.origin.sessionID, "4611731400430051336")
        XCTAssertEqual(d.bundleMids, ["0", "1", "2"])
        XCTAssertEqual(d.media.map(\.kind), ["audio", "video", "application"])
        XCTAssertEqual(d.media[0].formats.first, "111")
        XCTAssertEqual(d.media[0].connection, "IN IP4 0.0.0.0")
        XCTAssertEqual(d.media[0].attributes("candidate").count, 2)
        XCTAssertEqual(d.media[0].direction, .sendrecv)
        XCTAssertEqual(d.attribute("msid-semantic"), " WMS stream0")
        XCTAssertEqual(OpusAudioNegotiation.opusPayloadType(in: d.media[0]), 111)
        XCTAssertNil(OpusAudioNegotiation.opusPayloadType(in: d.media[1]))
    }

    func testTextRoundTripsThroughTheParser() throws {
        for source in [Self.browserOffer, Self.janusAnswer] {
            let d = try SessionDescription(parsing: source)
            let again = try SessionDescription(parsing: d.text)
            XCTAssertEqual(again, d)
            XCTAssertTrue(d.text.hasSuffix("\r\n"))
            XCTAssertFalse(d.text.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "every line ends in CRLF")
        }
    }

    func testMalformedDescriptionsNameTheLineAndField() {
        func error(_ text: String) -> SDPError? {
            do { _ = try SessionDescription(parsing: text); return nil } catch { return error }
        }
        XCTAssertEqual(error("o=- 1 2 IN IP4 x\ns=-\nt=0 0\n")?.field, "v")
        XCTAssertEqual(error("v=1\n")?.message, "version 1, only 0 exists")
        let badLine = error("v=0\no=- 1 2 IN IP4 127.0.0.1\ns=-\nt=0 0\nthis is not sdp\n")
        XCTAssertEqual(badLine?.line, 5)
        XCTAssertEqual(badLine?.field, "line")
        XCTAssertEqual(error("v=0\no=- x 2 IN IP4 127.0.0.1\ns=-\nt=0 0\n")?.field, "o")
        XCTAssertEqual(error("v=0\no=- 1 2 IN IP4 127.0.0.1\ns=-\nt=0 0\nm=audio 70000 RTP/AVP 0\n")?.line, 5)
        XCTAssertEqual(error("v=0\no=- 1 2 IN IP4 127.0.0.1\ns=-\n")?.field, "t")
        XCTAssertEqual(error("v=0\no=- 1 2 IN IP4 127.0.0.1\ns=-\nt=0 0\na=x\u{1b}[2J\n")?.message, "control character in the value")
        XCTAssertEqual(error("")?.field, "v")
        XCTAssertEqual(error(String(repeating: "a", count: SessionDescription.maximumSize + 1))?.field, "size")
    }

    /// Cut anywhere, a description parses or is refused — never traps. (Each prefix of both
    /// samples, byte by byte: ~3,500 parses.)
    func testEveryPrefixParsesOrThrows() {
        for source in [Self.browserOffer, Self.janusAnswer] {
            let bytes = Array(source.utf8)
            for n in 0...bytes.count {
                let text = String(decoding: bytes[0..<n], as: UTF8.self)
                if let d = try? SessionDescription(parsing: text) {
                    XCTAssertEqual(d.origin.networkType, "IN", "a prefix that parses still has the origin it had")
                }
            }
        }
    }

    // MARK: Candidates and fingerprints

    func testCandidatesParseAndPrint() throws {
        let srflx = try ICECandidate(parsing: "candidate:2 1 UDP 1679819007 203.0.113.7 40022 typ srflx raddr 10.0.0.2 rport 40022 generation 0")
        XCTAssertEqual(srflx.kind, .srflx)
        XCTAssertEqual(srflx.transport, "udp")
        XCTAssertEqual(srflx.relatedAddress, "10.0.0.2")
        XCTAssertEqual(srflx.relatedPort, 40022)
        XCTAssertEqual(srflx.extensions.map(\.name), ["generation"])
        XCTAssertEqual(try ICECandidate(parsing: srflx.attributeValue), srflx)

        XCTAssertEqual(ICECandidate.priority(kind: .host), 2_130_706_431, "RFC 8445's host priority with local preference 65535")
        XCTAssertLessThan(ICECandidate.priority(kind: .srflx), ICECandidate.priority(kind: .prflx))
        XCTAssertLessThan(ICECandidate.priority(kind: .relay), ICECandidate.priority(kind: .srflx))

        func field(_ text: String) -> String? {
            do { _ = try ICECandidate(parsing: text); return nil } catch { return error.field }
        }
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 99999 typ host"), "a=candidate port")
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 5000 type host"), "a=candidate typ")
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 5000 typ nat"), "a=candidate type")
        XCTAssertEqual(field("1 0 udp 100 10.0.0.1 5000 typ host"), "a=candidate component")
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 5000 typ host raddr"), "a=candidate raddr")
        XCTAssertEqual(field("1 1 udp"), "a=candidate ")
        // A field starting with a combining mark would fuse with the space before it when printed.
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 5000 typ host raddr 10.0.0.2 \u{301}x 1"), "a=candidate extension name")
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1\r 5000 typ host"), "a=candidate address")
        XCTAssertEqual(field("1 1 udp 100 10.0.0.1 5000 typ host generation \u{0}"), "a=candidate generation")
    }

    func testFingerprintsCheckTheirLength() throws {
        let f = try DTLSFingerprint(parsing: "SHA-256 " + Self.fingerprintHex.lowercased())
        XCTAssertEqual(f.algorithm, "sha-256")
        XCTAssertEqual(f.digest.count, 32)
        XCTAssertEqual(f.description, "sha-256 " + Self.fingerprintHex)
        XCTAssertThrowsError(try DTLSFingerprint(parsing: "sha-256 AB:CD"))
        XCTAssertThrowsError(try DTLSFingerprint(parsing: "md5 " + Self.fingerprintHex))
        XCTAssertThrowsError(try DTLSFingerprint(parsing: "sha-256 " + Self.fingerprintHex.replacingOccurrences(of: ":", with: "")))
    }

    // MARK: Offer / answer

    func testAnsweringABrowserAcceptsOpusAndDeclinesTheRest() throws {
        let offer = try SessionDescription(parsing: Self.browserOffer)
        let (answer, agreement) = try OpusAudioNegotiation.answer(to: offer, local: try local(), sessionID: "77")
        XCTAssertEqual(answer.media.count, 3, "one answer section per offered section")
        XCTAssertEqual(answer.media[0].formats, ["111"])
        XCTAssertFalse(answer.media[0].isRejected)
        XCTAssertTrue(answer.media[1].isRejected)
        XCTAssertTrue(answer.media[2].isRejected)
        XCTAssertEqual(answer.bundleMids, ["0"])
        XCTAssertEqual(answer.media[0].attribute("setup"), "active")
        XCTAssertEqual(answer.media[0].attribute("extmap"), "1 urn:ietf:params:rtp-hdrext:ssrc-audio-level")
        XCTAssertEqual(answer.media[0].attribute("fmtp"), "111 minptime=10;useinbandfec=1;usedtx=1")
        XCTAssertEqual(answer.media[0].port, 50000)
        XCTAssertEqual(answer.media[0].connection, "IN IP4 192.0.2.10")

        XCTAssertEqual(agreement.dtlsRole, .client)
        XCTAssertEqual(agreement.payloadType, 111)
        XCTAssertEqual(agreement.direction, .sendrecv)
        XCTAssertEqual(agreement.remoteUfrag, "Fq3x")
        XCTAssertEqual(agreement.audioLevelExtensionID, 1)
        XCTAssertTrue(agreement.peerWantsFEC)
        XCTAssertFalse(agreement.peerWantsDTX)
        XCTAssertEqual(agreement.peerMinPtime, 10)
        XCTAssertEqual(agreement.peerSSRC, 3_735_928_559)
        XCTAssertEqual(agreement.remoteCandidates.count, 1, "the TCP candidate is left out")
        XCTAssertFalse(agreement.remoteCandidatesComplete)

        // The answer is itself a description a peer can parse.
        XCTAssertEqual(try SessionDescription(parsing: answer.text), answer)
    }

    func testAnswerDirectionFollowsWhatEachSideDoes() throws {
        let offer = try SessionDescription(parsing: Self.browserOffer)
        let listening = try OpusAudioNegotiation.answer(to: offer, local: try local(sends: false), sessionID: "1")
        XCTAssertEqual(listening.agreement.direction, .recvonly)
        XCTAssertTrue(listening.answer.media[0].has("recvonly"))
        XCTAssertFalse(listening.answer.media[0].has("ssrc"), "a side that does not send names no source")

        // A server offering to send only (a subscription) gets recvonly even from a sending side.
        let sendOnly = Self.browserOffer.replacingOccurrences(of: "a=sendrecv\na=msid:stream0", with: "a=sendonly\na=msid:stream0")
        let subscribed = try OpusAudioNegotiation.answer(to: try SessionDescription(parsing: sendOnly), local: try local(), sessionID: "1")
        XCTAssertEqual(subscribed.agreement.direction, .recvonly)

        XCTAssertEqual(MediaDirection.recvonly.answer(wantingToSend: true, receive: true), .sendonly)
        XCTAssertEqual(MediaDirection.inactive.answer(wantingToSend: true, receive: true), .inactive)
    }

    func testOfferAndJanusAnswerAgree() throws {
        let me = try local()
        let offer = OpusAudioNegotiation.offer(me, sessionID: "99")
        let parsedOffer = try SessionDescription(parsing: offer.text)
        XCTAssertEqual(parsedOffer.media[0].attribute("setup"), "actpass")
        XCTAssertEqual(parsedOffer.bundleMids, ["0"])
        XCTAssertEqual(parsedOffer.media[0].attributes("candidate").count, 1)
        XCTAssertEqual(parsedOffer.media[0].attribute("ssrc"), "305419896 cname:roomd")

        let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: Self.janusAnswer), to: me)
        XCTAssertEqual(agreement.dtlsRole, .server, "Janus answers active: it opens DTLS")
        XCTAssertEqual(agreement.remoteUfrag, "Jn5k")
        XCTAssertEqual(agreement.remoteCandidates.map(\.kind), [.host, .srflx])
        XCTAssertTrue(agreement.remoteCandidatesComplete)
        XCTAssertEqual(agreement.peerSSRC, 2_882_400_001)
        XCTAssertEqual(agreement.audioLevelExtensionID, 1)
        XCTAssertEqual(agreement.direction, .sendrecv)

        // An appliance that offered to listen only sends nothing whatever the answer says.
        XCTAssertEqual(try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: Self.janusAnswer),
                                                       to: try local(sends: false)).direction, .recvonly)
    }

    /// Issue 27: a (fake) Janus answering `a=fmtp:111 =` made roomd exit with SIGILL (an index
    /// into the empty split of "="). Odd parameter lists are read, never trapped on: empty keys
    /// are skipped, the rest still counts.
    func testOddOpusParameterListsAreReadNotTrappedOn() throws {
        let me = try local()
        for (fmtp, fec) in [("111 =", false), ("111 ;;", false), ("111 =1", false), ("111 = ; =;", false),
                            ("111 useinbandfec=1;=;stereo", true), ("111 ;useinbandfec = 1", true), ("111 useinbandfec=", false)] {
            let answer = Self.janusAnswer.replacingOccurrences(of: "a=fmtp:111 useinbandfec=1", with: "a=fmtp:" + fmtp)
            XCTAssertTrue(answer.contains("a=fmtp:" + fmtp))
            let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: answer), to: me)
            XCTAssertEqual(agreement.peerWantsFEC, fec, fmtp)
            var offer = Self.browserOffer
            if let r = offer.range(of: "a=fmtp:111 ") {
                let end = offer[r.upperBound...].firstIndex(of: "\n") ?? offer.endIndex
                offer.replaceSubrange(r.lowerBound..<end, with: "a=fmtp:" + fmtp)
            }
            XCTAssertTrue(offer.contains("a=fmtp:" + fmtp), "the browser offer has an Opus fmtp line to replace")
            _ = try OpusAudioNegotiation.answer(to: try SessionDescription(parsing: offer), local: me, sessionID: "1")
        }
    }

    func testUnusableDescriptionsAreRefusedNamingTheField() throws {
        let me = try local()
        func answerError(_ text: String) -> SDPError? {
            do { _ = try OpusAudioNegotiation.answer(to: try SessionDescription(parsing: text), local: me, sessionID: "1"); return nil }
            catch { return error }
        }
        func acceptError(_ text: String) -> SDPError? {
            do { _ = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: text), to: me); return nil }
            catch { return error }
        }
        XCTAssertEqual(answerError(Self.browserOffer.replacingOccurrences(of: "opus/48000/2", with: "opus/16000/1"))?.field, "m=audio")
        XCTAssertEqual(answerError(Self.browserOffer.replacingOccurrences(of: "a=fingerprint:", with: "a=x-fingerprint:"))?.field, "a=fingerprint")
        XCTAssertEqual(answerError(Self.browserOffer.replacingOccurrences(of: "a=ice-pwd:", with: "a=x-ice-pwd:"))?.field, "a=ice-pwd")
        XCTAssertEqual(answerError(Self.browserOffer.replacingOccurrences(of: "a=rtcp-mux\na=rtpmap:111", with: "a=rtpmap:111"))?.field, "a=rtcp-mux")
        XCTAssertEqual(answerError(Self.browserOffer.replacingOccurrences(of: "m=audio 9 UDP/TLS/RTP/SAVPF", with: "m=audio 9 RTP/AVP"))?.field, "m=audio")

        XCTAssertEqual(acceptError(Self.janusAnswer.replacingOccurrences(of: "a=setup:active", with: "a=setup:actpass"))?.field, "a=setup")
        XCTAssertEqual(acceptError(Self.janusAnswer.replacingOccurrences(of: "m=audio 9 ", with: "m=audio 0 "))?.message, "the answer declined the audio (port 0)")
        XCTAssertEqual(acceptError(Self.janusAnswer.replacingOccurrences(of: "SAVPF 111", with: "SAVPF 0"))?.field, "m=audio")
        XCTAssertEqual(acceptError(Self.janusAnswer.replacingOccurrences(of: "typ host", with: "typ hots"))?.field, "a=candidate type")
    }
}
