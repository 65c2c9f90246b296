import RoomProtocol

/// Signalling as roomserver and roomd read it: the input is one frame's payload (a message),
/// and also a TCP byte stream (length-prefixed frames) whose frames are messages.
func fuzzSignal(_ bytes: UnsafeRawBufferPointer) {
    decodeMessage(bytes)

    // Framing must not depend on how recv cut the stream: all at once and in odd-sized
    // pieces give the same frames and the same error.
    var whole = FrameDecoder(maxFrameSize: 4096)
    var wholeFrames: [[UInt8]] = []
    let wholeError: FrameError?
    do { try whole.feed(bytes, into: &wholeFrames); wholeError = nil } catch { wholeError = error }

    var pieces = FrameDecoder(maxFrameSize: 4096)
    var pieceFrames: [[UInt8]] = []
    var pieceError: FrameError?
    var at = 0, cut = 0
    let sizes = [1, 2, 3, 5, 7, 11, 64]
    while at < bytes.count {
        let end = min(bytes.count, at + sizes[cut % sizes.count])
        do { try pieces.feed(UnsafeRawBufferPointer(rebasing: bytes[at..<end]), into: &pieceFrames) } catch {
            pieceError = error
            break
        }
        at = end
        cut += 1
    }
    fuzzCheck(wholeFrames == pieceFrames && wholeError == pieceError,
              "frames depend on chunking: \(wholeFrames.count) vs \(pieceFrames.count), \(String(describing: wholeError)) vs \(String(describing: pieceError))")
    fuzzCheck(whole.bufferedByteCount <= SignalFraming.headerSize + 4096, "decoder holds \(whole.bufferedByteCount) bytes")
    for frame in wholeFrames { decodeMessage(frame) }
}

private func decodeMessage(_ payload: some Collection<UInt8>) {
    _ = SignalMessage.peek(payload)
    let message: SignalMessage
    do { message = try SignalMessage.decode(payload) } catch {
        note("message refused: \(error)")
        return
    }
    note("message \(message)")
    // What one side sends, the other reads back as the same message.
    guard let encoded = try? message.encode() else { return }
    do {
        let again = try SignalMessage.decode(encoded)
        fuzzCheck(again == message, "message changed in a round trip: \(message) vs \(again)")
    } catch {
        fuzzCheck(false, "an encoded message does not decode: \(error): \(String(decoding: encoded, as: UTF8.self))")
    }
}
