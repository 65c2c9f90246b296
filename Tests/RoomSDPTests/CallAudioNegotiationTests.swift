import XCTest
@testable import RoomSDP

/// SIP offer/answer (issue 29) against descriptions real peers send: baresip's, a PBX's G.711
/// offer with a session-level c=, an SDES offer with several crypto lines, and hostile ones.
final class CallAudioNegotiationTests: XCTestCase {
    static let ourKey = SDESKey(inline: "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz")!
    static let theirKey = SDESKey(inline: "PS1uQCVeeCFCanVmcHRjamNoZUtTZ2oqJTJpVWtF")!
    let origin = SessionDescription.Origin(username: "roomd", sessionID: "42", sessionVersion: "1")

    func local(_ security: CallLocalMedia.Security = .plain, codecs: [CallCodec] = CallCodec.allCases,
               direction: MediaDirection = .sendrecv) -> CallLocalMedia {
        CallLocalMedia(address: "127.0.0.1", port: 40_000, codecs: codecs, security: security, direction: direction)
    }

    /// Debian's baresip 1.0.0 with board/sip-test/baresip/config, captured from its INVITE.
    static let baresipOffer = """
        v=0\r\no=- 876443176 1660696587 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
        a=tool:baresip 1.0.0\r\nm=audio 23988 RTP/AVP 96 9 0 8 101\r\na=rtpmap:96 opus/48000/2\r\n\
        a=fmtp:96 stereo=1;sprop-stereo=1\r\na=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\n\
        a=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\n\
        a=label:1\r\na=rtcp-rsize\r\na=ssrc:380183550 cname:sip:far@127.0.0.1:15999\r\na=minptime:20\r\na=ptime:20\r\n
        """

    /// The same baresip with `;mediaenc=srtp-mand` on its account, captured likewise.
    static let baresipSRTPOffer = """
        v=0\r\no=- 3470626076 1623863932 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
        a=tool:baresip 1.0.0\r\nm=audio 22746 RTP/SAVP 96 9 0 8 101\r\na=rtpmap:96 opus/48000/2\r\n\
        a=fmtp:96 stereo=1;sprop-stereo=1\r\na=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\n\
        a=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\n\
        a=label:1\r\na=rtcp-rsize\r\na=ssrc:2088039155 cname:sip:far@127.0.0.1:15999\r\n\
        a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:iZ4gAgFizbt5iRqAAuZrrwt/k8fihOFk8XPRRf7N\r\na=minptime:20\r\na=ptime:20\r\n
        """

    /// A PBX's G.711-only offer: static types without rtpmap, session-level c=, ptime.
    static let pbxOffer = """
        v=0\r\no=root 1193718427 1193718427 IN IP4 192.0.2.10\r\ns=Asterisk PBX 18.10.0\r\n\
        c=IN IP4 192.0.2.10\r\nt=0 0\r\nm=audio 12040 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\n\
        a=fmtp:101 0-16\r\na=ptime:20\r\na=maxptime:150\r\na=sendrecv\r\n
        """

    func testBaresipOfferIsAnsweredWithOpusAndTelephoneEvents() throws {
        let offer = try SessionDescription(parsing: Self.baresipOffer)
        let (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: local(), origin: origin)
        XCTAssertEqual(agreement.codec, .opus)
        XCTAssertEqual(agreement.payloadType, 96)
        XCTAssertEqual(agreement.rtpClockRate, 48_000)
        XCTAssertEqual(agreement.channels, 2)
        XCTAssertEqual(agreement.telephoneEvent, .init(payloadType: 101, clockRate: 8000), "no 48 kHz event offered: 8 kHz")
        XCTAssertEqual(agreement.remote, .init(host: "127.0.0.1", port: 23_988))
        XCTAssertEqual(agreement.remotePtime, 20)
        XCTAssertEqual(agreement.security, .plain)
        XCTAssertEqual(agreement.localDirection, .sendrecv)
        let m = answer.media[0]
        XCTAssertEqual(m.formats, ["96", "101"])
        XCTAssertEqual(m.port, 40_000)
        XCTAssertEqual(m.proto, "RTP/AVP")
        XCTAssertEqual(m.attributes("rtpmap"), ["96 opus/48000/2", "101 telephone-event/8000"])
        XCTAssertTrue(answer.text.contains("c=IN IP4 127.0.0.1\r\n"))
        // The answer reads back as an answer to an offer with those codecs.
        let reread = try SessionDescription(parsing: answer.text)
        XCTAssertEqual(reread, answer)
    }

    func testBaresipSRTPOfferIsAnsweredWithOurKeyUnderItsTag() throws {
        let offer = try SessionDescription(parsing: Self.baresipSRTPOffer)
        let (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: local(.required(Self.ourKey)), origin: origin)
        let theirs = try XCTUnwrap(SDESKey(inline: "iZ4gAgFizbt5iRqAAuZrrwt/k8fihOFk8XPRRf7N"))
        XCTAssertEqual(agreement.security, .sdes(suite: .aesCM128HMACSHA1_80, localKey: Self.ourKey, remoteKey: theirs))
        XCTAssertEqual(answer.media[0].proto, "RTP/SAVP")
        XCTAssertEqual(answer.media[0].attributes("crypto"), ["1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.ourKey.inline)"])
        XCTAssertThrowsError(try CallAudioNegotiation.answer(to: offer, local: local(.plain), origin: origin)) { error in
            XCTAssertTrue("\(error)".contains("SRTP is off"), "\(error)")
        }
    }

    func testOurPreferenceWinsOverTheOfferersOrder() throws {
        let offer = try SessionDescription(parsing: Self.baresipOffer)
        let g722 = try CallAudioNegotiation.answer(to: offer, local: local(codecs: [.g722, .pcmu]), origin: origin).agreement
        XCTAssertEqual(g722.codec, .g722)
        XCTAssertEqual(g722.payloadType, 9)
        XCTAssertEqual(g722.rtpClockRate, 8000, "G.722's RTP clock is 8000 (RFC 3551), its audio 16 kHz")
        XCTAssertEqual(g722.codec.sampleRate, 16_000)
        let pcma = try CallAudioNegotiation.answer(to: offer, local: local(codecs: [.pcma]), origin: origin).agreement
        XCTAssertEqual(pcma.codec, .pcma)
        XCTAssertEqual(pcma.payloadType, 8)
    }

    func testPBXOfferWithStaticTypesAndSessionConnection() throws {
        let offer = try SessionDescription(parsing: Self.pbxOffer)
        let (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: local(), origin: origin)
        XCTAssertEqual(agreement.codec, .pcmu)
        XCTAssertEqual(agreement.payloadType, 0)
        XCTAssertEqual(agreement.remote, .init(host: "192.0.2.10", port: 12_040))
        XCTAssertEqual(agreement.remotePtime, 20)
        XCTAssertEqual(answer.media[0].formats, ["0", "101"])
    }

    func testPlainOfferIsRefusedWhenSRTPIsRequired() throws {
        let offer = try SessionDescription(parsing: Self.pbxOffer)
        XCTAssertThrowsError(try CallAudioNegotiation.answer(to: offer, local: local(.required(Self.ourKey)), origin: origin)) { error in
            XCTAssertTrue("\(error)".contains("requires SRTP"), "\(error)")
        }
        // Preferred SRTP falls back to plain.
        let agreement = try CallAudioNegotiation.answer(to: offer, local: local(.preferred(Self.ourKey)), origin: origin).agreement
        XCTAssertEqual(agreement.security, .plain)
    }

    /// Several crypto lines: the first supported one (after an unknown suite and one with an
    /// MKI) is answered, with its tag and our key.
    func testSDESOfferWithSeveralCryptoLines() throws {
        let text = """
            v=0\r\no=- 1 1 IN IP6 ::1\r\ns=-\r\nt=0 0\r\nm=audio 5004 RTP/SAVP 0 9\r\nc=IN IP6 2001:db8::7\r\n\
            a=crypto:1 AEAD_AES_256_GCM inline:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n\
            a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:\(Self.ourKey.inline)|2^20|1:4\r\n\
            a=crypto:3 AES_CM_128_HMAC_SHA1_32 inline:\(Self.theirKey.inline)|2^31\r\n\
            a=crypto:4 AES_CM_128_HMAC_SHA1_80 inline:\(Self.ourKey.inline)\r\na=sendonly\r\n
            """
        let offer = try SessionDescription(parsing: text)
        var ours = local(.required(Self.ourKey))
        ours.address = "2001:db8::1"   // an IPv6 offer is answered by an appliance on IPv6
        let (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: ours, origin: origin)
        XCTAssertEqual(agreement.security, .sdes(suite: .aesCM128HMACSHA1_32, localKey: Self.ourKey, remoteKey: Self.theirKey))
        XCTAssertEqual(answer.media[0].attributes("crypto"), ["3 AES_CM_128_HMAC_SHA1_32 inline:\(Self.ourKey.inline)"])
        XCTAssertEqual(answer.media[0].proto, "RTP/SAVP")
        XCTAssertEqual(agreement.codec, .g722, "our preference: G.722 before PCMU")
        XCTAssertEqual(agreement.remote, .init(host: "2001:db8::7", port: 5004))
        XCTAssertEqual(agreement.remoteDirection, .sendonly, "they hold us")
        XCTAssertEqual(agreement.localDirection, .recvonly)
        XCTAssertTrue(agreement.isHeldByRemote)
        XCTAssertEqual(answer.media[0].direction, .recvonly)
    }

    func testOfferAndAcceptingTheAnswerRoundTrip() throws {
        let us = local(.required(Self.ourKey))
        let offer = CallAudioNegotiation.offer(us, origin: origin)
        XCTAssertEqual(offer.media[0].proto, "RTP/SAVP")
        XCTAssertEqual(offer.media[0].formats, ["111", "9", "0", "8", "101"])
        XCTAssertEqual(offer.media[0].attributes("crypto"), ["1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.ourKey.inline)"])
        // The far end answers with its own key, as a peer that implements the same code would.
        let them = CallLocalMedia(address: "127.0.0.2", port: 50_000, codecs: [.pcma, .opus], security: .required(Self.theirKey))
        let (answer, theirs) = try CallAudioNegotiation.answer(to: SessionDescription(parsing: offer.text), local: them, origin: origin)
        XCTAssertEqual(theirs.codec, .pcma)
        let ours = try CallAudioNegotiation.accept(answer: SessionDescription(parsing: answer.text), to: us)
        XCTAssertEqual(ours.codec, .pcma)
        XCTAssertEqual(ours.remote, .init(host: "127.0.0.2", port: 50_000))
        XCTAssertEqual(ours.security, .sdes(suite: .aesCM128HMACSHA1_80, localKey: Self.ourKey, remoteKey: Self.theirKey))
        XCTAssertEqual(ours.telephoneEvent, .init(payloadType: 101, clockRate: 8000))

        // Hold: our sendonly offer, answered recvonly.
        let held = CallAudioNegotiation.offer(local(direction: .sendonly), origin: origin)
        XCTAssertEqual(held.media[0].direction, .sendonly)
        let heldAnswer = try CallAudioNegotiation.answer(to: held, local: local(), origin: origin).answer
        XCTAssertEqual(try CallAudioNegotiation.accept(answer: heldAnswer, to: local(direction: .sendonly)).remoteDirection, .recvonly)
    }

    func testOpusWith48kTelephoneEvent() throws {
        let text = """
            v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 107 101 110\r\nc=IN IP4 10.0.0.1\r\n\
            a=rtpmap:107 opus/48000/2\r\na=rtpmap:101 telephone-event/8000\r\na=rtpmap:110 telephone-event/48000\r\n
            """
        let (answer, agreement) = try CallAudioNegotiation.answer(to: SessionDescription(parsing: text), local: local(), origin: origin)
        XCTAssertEqual(agreement.telephoneEvent, .init(payloadType: 110, clockRate: 48_000))
        XCTAssertEqual(answer.media[0].formats, ["107", "110"])
    }

    func testUnusableOffersGiveClearReasons() throws {
        func reason(_ media: String, session: String = "c=IN IP4 10.0.0.1\r\n", security: CallLocalMedia.Security = .plain) -> String {
            let text = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\n\(session)t=0 0\r\n" + media
            do {
                _ = try CallAudioNegotiation.answer(to: SessionDescription(parsing: text), local: local(security), origin: origin)
                return "answered"
            } catch { return "\(error)" }
        }
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 3\r\n").contains("no codec in common"))
        XCTAssertTrue(reason("m=video 4000 RTP/AVP 96\r\n").contains("no audio section"))
        XCTAssertTrue(reason("m=audio 4000 UDP/TLS/RTP/SAVPF 0\r\n").contains("transport"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 0\r\n", session: "").contains("no connection address"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 0\r\n", session: "c=IN IP4 999.1.1.1\r\n").contains("not an IPv4 address"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 0\r\n", session: "c=IN IPX foo\r\n").contains("address type"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 0 300\r\n").contains("payload type '300'"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 0\r\na=ptime:99999999999999999999\r\n").contains("a=ptime"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 96\r\na=rtpmap:96 opus/48000/99\r\n").contains("channels"))
        XCTAssertTrue(reason("m=audio 4000 RTP/AVP 96\r\na=rtpmap:96 opus\r\n").contains("a=rtpmap"))
        XCTAssertTrue(reason("m=audio 4000 RTP/SAVP 0\r\n").contains("SRTP is off"))
        XCTAssertTrue(reason("m=audio 4000 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:short\r\n",
                             security: .required(Self.ourKey)).contains("40 base64"))
        XCTAssertTrue(reason("m=audio 4000 RTP/SAVP 0\r\na=crypto:1 F8_128_HMAC_SHA1_80 inline:x\r\n",
                             security: .required(Self.ourKey)).contains("no crypto line with a suite we support"))
        let manyFormats = "m=audio 4000 RTP/AVP " + (0 ..< 100).map { _ in "0" }.joined(separator: " ") + "\r\n"
        XCTAssertTrue(reason(manyFormats).contains("more than 64"))
        let manyCrypto = "m=audio 4000 RTP/SAVP 0\r\n" + String(repeating: "a=crypto:1 X inline:y\r\n", count: 20)
        XCTAssertTrue(reason(manyCrypto, security: .required(Self.ourKey)).contains("more than 16"))
        let hugeField = "m=audio 4000 RTP/AVP 0\r\na=rtpmap:0 " + String(repeating: "P", count: 50_000) + "/8000\r\n"
        XCTAssertTrue(reason(hugeField).contains("a=rtpmap"))
        XCTAssertEqual(reason("m=audio 0 RTP/AVP 0\r\nm=audio 4000 RTP/AVP 8\r\n"), "answered", "a refused first section is skipped")
    }

    /// Every prefix of a real offer either answers or throws: nothing traps.
    func testEveryPrefixOfAnOfferAnswersOrThrows() {
        let text = Self.baresipOffer
        for end in text.utf8.indices {
            let prefix = String(decoding: text.utf8[..<end], as: UTF8.self)
            if let offer = try? SessionDescription(parsing: prefix) {
                _ = try? CallAudioNegotiation.answer(to: offer, local: local(.preferred(Self.ourKey)), origin: origin)
                _ = try? CallAudioNegotiation.accept(answer: offer, to: local(.preferred(Self.ourKey)))
            }
        }
    }

    func testKeysStayOutOfDescriptions() {
        XCTAssertFalse("\(Self.ourKey)".contains(Self.ourKey.inline))
        XCTAssertNil(SDESKey(inline: String(repeating: "A", count: 39) + "="))
    }
}
