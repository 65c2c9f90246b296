import RoomMedia
import RoomMediaCrypto
import RoomProtocol

/// A datagram as roomd's and roomserver's SRTP receivers see it: unprotected with a fixed key
/// (garbage must be refused, never trap or write past the datagram), and the same bytes taken as
/// RTP and protected, which must unprotect to exactly themselves with the same key.
/// Sessions are made per input (each input is a fresh stream; no state carries between inputs).
private let fuzzKey = SRTPMasterKey(bytes: Array(0 ..< 28))!

func fuzzSRTP(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count <= 4096,
          let receiver = try? SRTPSession(key: fuzzKey, direction: .unprotect),
          let sender = try? SRTPSession(key: fuzzKey, direction: .protect),
          let roundTrip = try? SRTPSession(key: fuzzKey, direction: .unprotect)
    else { return fuzzCheck(false, "libsrtp2 did not set up") }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096 + SRTPSession.trailerRoom, alignment: 8)
    defer { buffer.deallocate() }
    // Guard bytes after the datagram: unprotect must not touch them.
    buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
    buffer.baseAddress!.copyMemory(from: bytes.baseAddress ?? UnsafeRawPointer(buffer.baseAddress!), byteCount: bytes.count)
    let outcome = receiver.unprotect(buffer, length: bytes.count)
    note("unprotect: \(outcome)")
    if case let .rtp(n) = outcome { fuzzCheck(n >= 12 && n <= bytes.count - 16, "unprotected length \(n) of \(bytes.count)") }
    for i in bytes.count ..< bytes.count + 64 { fuzzCheck(buffer[i] == 0xA5, "unprotect wrote past the datagram at \(i)") }

    // Only what parses as RTP is protected (as the senders do).
    guard bytes.count >= 12, (try? RTPPacket.parse(bytes)) != nil else { return }
    buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    guard let n = sender.protect(buffer, length: bytes.count) else { return note("protect refused") }
    fuzzCheck(n == bytes.count + SRTPSession.overhead, "protected length \(n) for \(bytes.count) bytes")
    let back = roundTrip.unprotect(buffer, length: n)
    fuzzCheck(back == .rtp(length: bytes.count), "round trip: \(back)")
    fuzzCheck(UnsafeRawBufferPointer(rebasing: buffer[0 ..< bytes.count]).elementsEqual(bytes), "round trip changed the packet")
}
