import RoomSDP

/// Session descriptions from a media server or browser (issue 12). An input whose first byte is
/// `c` is the rest as one ICE candidate line; otherwise the whole input is a description, which
/// is parsed, printed and parsed again (the text round-trips), then answered as an offer and
/// read as an answer.
func fuzzSDP(_ bytes: UnsafeRawBufferPointer) {
    if bytes.first == UInt8(ascii: "c") {
        let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
        guard let candidate = try? ICECandidate(parsing: text) else { return }
        let again = try? ICECandidate(parsing: candidate.attributeValue)
        fuzzCheck(again == candidate, "candidate changed when printed and parsed: \(candidate.attributeValue)")
        return
    }
    let text = String(decoding: bytes, as: UTF8.self)
    let description: SessionDescription
    do { description = try SessionDescription(parsing: text) } catch {
        note("sdp refused: \(error)")
        return
    }
    do {
        let again = try SessionDescription(parsing: description.text)
        fuzzCheck(again == description, "description changed when printed and parsed")
    } catch {
        fuzzCheck(false, "a printed description does not parse: \(error)")
    }
    if let (answer, _) = try? OpusAudioNegotiation.answer(to: description, local: sdpFuzzEndpoint, sessionID: "1") {
        fuzzCheck((try? SessionDescription(parsing: answer.text)) == answer, "an answer does not round-trip")
        fuzzCheck(answer.media.count == description.media.count, "an answer must have one section per offered one")
    }
    _ = try? OpusAudioNegotiation.accept(answer: description, to: sdpFuzzEndpoint)
}

private let sdpFuzzEndpoint = OpusAudioNegotiation.LocalEndpoint(
    iceUfrag: "fuzz", icePassword: "fuzz-ice-password-000001",
    fingerprint: DTLSFingerprint(algorithm: "sha-256", digest: [UInt8](repeating: 0xAB, count: 32)),
    candidates: [ICECandidate(foundation: "1", priority: ICECandidate.priority(kind: .host), address: "192.0.2.1", port: 5000, kind: .host)],
    ssrc: 1, cname: "fuzz")
