import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomWebRTC

/// A datagram as `WebRTCMediaTransport` sees RTCP from a WebRTC peer (issue 12):
/// - read as a compound RTCP packet (`RTCPReader`): refused or read, never a trap; a datagram that
///   is read gives the same items twice (the reader keeps no state), and an `RTCPSession` takes
///   it (round trip, loss, BYE) without trapping;
/// - unprotected as SRTCP with a fixed key (garbage refused, nothing written past the datagram);
///   when it reads as RTCP, protected then unprotected with fresh sessions: exactly itself again;
/// - taken as an RTP packet received (the receive statistics), after which the session's report
///   must be RTCP the reader accepts.
private let fuzzKey = SRTPMasterKey(bytes: Array(0 ..< 28))!

func fuzzRTCP(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count <= 4096 else { return }
    var items: [RTCPItem] = []
    var read = false
    do {
        items = try RTCPReader.items(bytes)
        read = true
        fuzzCheck((try? RTCPReader.items(bytes)) == items, "a second read gave other items")
    } catch {
        note("rtcp refused: \(error)")
    }
    note("rtcp items: \(items)")

    var session = RTCPSession(localSSRC: 0x0102_0304, cname: "fuzz", wallClockNTP: 0xE000_0000_0000_0000, monotonicNow: 0)
    do {
        try session.receive(rtcp: bytes, at: 1_000_000_000)
        fuzzCheck(read, "the session took a datagram the reader refuses")
    } catch {
        fuzzCheck(!read, "the session refused a datagram the reader reads: \(error)")
    }
    if let rtt = session.roundTripMs { fuzzCheck(rtt >= 0 && rtt < 65536 * 1000, "round trip \(rtt) ms") }
    if let lost = session.remoteFractionLost { fuzzCheck(lost >= 0 && lost < 1, "fraction lost \(lost)") }

    // The same bytes as RTP received, then our report about them must read back.
    session.received(rtp: bytes, at: 1_020_000_000)
    session.received(rtp: bytes, at: 1_040_000_000)
    let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500 + SRTPSession.rtcpTrailerRoom, alignment: 8)
    defer { out.deallocate() }
    let n = session.writeReport(into: UnsafeMutableRawBufferPointer(rebasing: out[0 ..< 1500]), at: 2_000_000_000, random: 0.5)
    fuzzCheck(n > 0, "no report written")
    fuzzCheck((try? RTCPReader.items(UnsafeRawBufferPointer(rebasing: out[0 ..< n]))) != nil, "our own report does not read")

    // SRTCP: garbage refused without writing past the datagram; RTCP round-trips.
    guard let receiver = try? SRTPSession(key: fuzzKey, direction: .unprotect),
          let sender = try? SRTPSession(key: fuzzKey, direction: .protect),
          let roundTrip = try? SRTPSession(key: fuzzKey, direction: .unprotect)
    else { return fuzzCheck(false, "libsrtp2 did not set up") }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096 + SRTPSession.rtcpTrailerRoom, alignment: 8)
    defer { buffer.deallocate() }
    buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
    if let base = bytes.baseAddress { buffer.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
    let outcome = receiver.unprotectRTCP(buffer, length: bytes.count)
    note("unprotectRTCP: \(outcome)")
    if case let .rtcp(length) = outcome {
        fuzzCheck(length >= 8 && length <= bytes.count - SRTPSession.rtcpOverhead, "unprotected length \(length) of \(bytes.count)")
    }
    for i in bytes.count ..< bytes.count + 64 { fuzzCheck(buffer[i] == 0xA5, "unprotectRTCP wrote past the datagram at \(i)") }

    guard read, bytes.count >= 8 else { return }
    buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    guard let protected = sender.protectRTCP(buffer, length: bytes.count) else { return note("protectRTCP refused") }
    fuzzCheck(protected == bytes.count + SRTPSession.rtcpOverhead, "protected length \(protected) for \(bytes.count) bytes")
    let back = roundTrip.unprotectRTCP(buffer, length: protected)
    fuzzCheck(back == .rtcp(length: bytes.count), "round trip: \(back)")
    fuzzCheck(UnsafeRawBufferPointer(rebasing: buffer[0 ..< bytes.count]).elementsEqual(bytes), "round trip changed the packet")
}
