import RoomJanus

/// What a (possibly hostile) Janus — or whatever answers at `room.janus_url` — sends on the
/// WebSocket, as `JanusConnection` feeds it to `WebSocketClient.receive`: the HTTP upgrade
/// response, then frames. The input is that byte stream; an input not starting with `H` is
/// frames only, after a valid upgrade response the harness puts in front (the accept key of
/// RFC 6455's sample nonce, which the clients here use, with OpenSSL's SHA-1 as roomd's do), so
/// mutations of the frames are not spent on the handshake. The clients refuse messages over
/// 1 KiB (`maximumMessageSize`; roomd's is 1 MiB) so that the limits are reached within a
/// 4 KiB input.
///
/// Checked:
/// - events, what the client writes back (pongs, its close) and its open/closed state do not
///   depend on how the reads were cut: all at once, in pieces of 1, 2, 3, 5, 7, 11, 64 bytes,
///   and the frames a byte at a time;
/// - `opened` comes first, `closed` last, nothing is read after it; no message is longer
///   than the limit; what the client writes is final, masked control frames of at most 125
///   bytes, nothing after its close;
/// - buffered bytes stay bounded (the buffer itself is private, so through what can be seen):
///   a response without its blank line is still waited for only while shorter than 4 KiB; a
///   frame whose header announces more than the limit is refused (1009) by the very byte that
///   completes its header, not waited for; and when the stream ends on a frame boundary, a
///   ping sent next is answered at once (nothing of the input is left in the buffer).
func fuzzWebSocket(_ bytes: UnsafeRawBufferPointer) {
    let stream = bytes.first == UInt8(ascii: "H") ? Array(bytes) : wsUpgrade + Array(bytes)

    var whole = wsClient()
    let wholeEvents = whole.receive(stream)
    let wholeOut = whole.takeOutgoing()
    note("websocket: \(wholeEvents.map(describe))")

    var pieces = wsClient()
    var pieceEvents: [WebSocketClient.Event] = []
    var pieceOut: [UInt8] = []
    var at = 0, cut = 0
    let sizes = [1, 2, 3, 5, 7, 11, 64]
    while at < stream.count {
        let end = min(stream.count, at + sizes[cut % sizes.count])
        pieceEvents += pieces.receive(stream[at ..< end])
        pieceOut += pieces.takeOutgoing()
        at = end
        cut += 1
    }

    // The response in one read (through its blank line, or all of it), then a byte at a time,
    // noting which byte each event came with. The client searches the whole buffer for the
    // blank line at every read, so a response fed a byte at a time costs its length squared:
    // 50-140 ms for a 3 KiB one under ASan, most of the target's time (the pieces above cut the
    // response too). What the client writes is taken at the end (after every byte it would be
    // an allocation per byte; the pieces take it after every read, as `JanusConnection` does).
    let head = stream.blankLineEnd ?? stream.count
    var single = wsClient()
    var singleEvents: [(at: Int, event: WebSocketClient.Event)] = single.receive(stream[0 ..< head]).map { (head - 1, $0) }
    for i in head ..< stream.count {
        for event in single.receive(CollectionOfOne(stream[i])) { singleEvents.append((i, event)) }
    }
    let singleOut = single.takeOutgoing()

    fuzzCheck(pieceEvents == wholeEvents && singleEvents.map(\.event) == wholeEvents,
              "events depend on how the stream was cut: \(wholeEvents.map(describe)) vs \(pieceEvents.map(describe)) vs \(singleEvents.map { describe($0.event) })")
    fuzzCheck(pieceOut == wholeOut && singleOut == wholeOut,
              "what the client writes depends on how the stream was cut: \(wholeOut.count) vs \(pieceOut.count) vs \(singleOut.count) bytes")
    for client in [pieces, single] {
        fuzzCheck(client.isOpen == whole.isOpen && client.isClosed == whole.isClosed, "open/closed depends on how the stream was cut")
    }

    for (i, event) in wholeEvents.enumerated() {
        switch event {
        case .opened: fuzzCheck(i == 0, "opened as event \(i)")
        case .closed: fuzzCheck(i == wholeEvents.count - 1, "closed as event \(i) of \(wholeEvents.count)")
        case .text(let text): fuzzCheck(text.unicodeScalars.count <= wsLimit, "a text message of \(text.unicodeScalars.count) characters")
        case .binary(let payload): fuzzCheck(payload.count <= wsLimit, "a binary message of \(payload.count) bytes")
        }
    }
    fuzzCheck(whole.isOpen == (wholeEvents.first == .opened), "isOpen \(whole.isOpen) after \(wholeEvents.map(describe))")
    fuzzCheck(whole.isClosed == wholeEvents.contains(where: isClose), "isClosed \(whole.isClosed) after \(wholeEvents.map(describe))")
    checkClientFrames(wholeOut)

    if whole.isClosed {
        fuzzCheck(whole.receive(wsProbe).isEmpty && whole.takeOutgoing().isEmpty, "the client read on after it closed")
        return
    }
    guard let openedAt = singleEvents.first(where: { $0.event == .opened })?.at else {
        // Still waiting for the end of the response: only while it can end within 4 KiB.
        fuzzCheck(stream.count < 4096 && stream.blankLineEnd == nil, "a response of \(stream.count) bytes still waited for")
        return
    }

    // Walk the frames after the response: a frame announcing more than the limit must be
    // refused by the byte completing its header. `boundary`: the stream ends after a frame.
    let closedAt = singleEvents.first(where: { isClose($0.event) })
    var p = openedAt + 1
    var boundary = false
    while true {
        if p == stream.count { boundary = closedAt == nil; break }
        guard p + 2 <= stream.count else { break }
        let short = Int(stream[p + 1] & 0x7F)
        let headerSize = short == 126 ? 4 : short == 127 ? 10 : 2
        guard p + headerSize <= stream.count else { break }
        let length = short < 126 ? UInt64(short) : stream[(p + 2) ..< (p + headerSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let headerEnd = p + headerSize - 1
        if let closedAt, closedAt.at < headerEnd { break }   // refused for something else first
        if length > UInt64(wsLimit) {
            let code: UInt16? = if case .closed(let code, _)? = closedAt?.event { code } else { nil }
            fuzzCheck(closedAt?.at == headerEnd && code == 1009,
                      "a frame announcing \(length) bytes (header ends at byte \(headerEnd)) was not refused then: \(closedAt.map { "\($0.at): \(describe($0.event))" } ?? "not refused")")
            break
        }
        let frameEnd = headerEnd + Int(length)
        if let closedAt, closedAt.at <= frameEnd { break }
        p = frameEnd + 1
    }
    if boundary {
        fuzzCheck(whole.receive(wsProbe).isEmpty, "a ping gave events")
        let pong = whole.takeOutgoing()
        fuzzCheck(pong.count == 2 + 4 + 5 && pong[0] == 0x8A && pong[1] == 0x85
                  && (0 ..< 5).allSatisfy { pong[6 + $0] ^ pong[2 + $0 % 4] == wsProbe[2 + $0] },
                  "a ping after \(stream.count) bytes that end on a frame boundary was not answered at once (bytes left in the buffer?)")
    }
}

private let wsLimit = 1024
/// RFC 6455 §1.3's sample: this nonce's key is answered with s3pPLMBiTxaQ9kYGzzhZRbK+xOo=.
private let wsNonce = Array("the sample nonce".utf8)
private let wsUpgrade = Array(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n").utf8)
/// A ping with the payload "probe".
private let wsProbe: [UInt8] = [0x89, 0x05] + Array("probe".utf8)

/// A client as `JanusConnection` makes one (OpenSSL's SHA-1; a fixed nonce and masks so that
/// every client of an input writes the same bytes), its upgrade request already taken.
private func wsClient() -> WebSocketClient {
    var mask: UInt32 = 0x0102_0304
    var client = WebSocketClient(nonce: wsNonce, sha1: WebSocketClient.sha1, maskSource: {
        mask = mask &* 1_664_525 &+ 1_013_904_223
        return mask
    })
    client.maximumMessageSize = wsLimit
    client.open(host: "janus.example:8188", path: "/janus")
    _ = client.takeOutgoing()
    return client
}

/// What the client writes back: final, masked control frames (close, pong) of at most 125
/// bytes, nothing after a close.
private func checkClientFrames(_ out: [UInt8]) {
    var p = 0
    var closed = false
    while p < out.count {
        fuzzCheck(!closed, "the client wrote a frame after its close")
        fuzzCheck(out.count - p >= 6, "a truncated frame from the client")
        let b0 = out[p], b1 = out[p + 1]
        fuzzCheck(b0 & 0xF0 == 0x80 && b1 & 0x80 != 0, "a client frame not final or not masked: \(b0) \(b1)")
        let opcode = b0 & 0x0F
        fuzzCheck(opcode == 0x8 || opcode == 0xA, "the client answered with opcode \(opcode)")
        let length = Int(b1 & 0x7F)
        fuzzCheck(length <= 125, "a control frame of \(length) bytes from the client")
        fuzzCheck(p + 6 + length <= out.count, "a truncated frame from the client")
        if opcode == 0x8 { closed = true }
        p += 6 + length
    }
}

private func isClose(_ event: WebSocketClient.Event) -> Bool {
    if case .closed = event { return true }
    return false
}

private func describe(_ event: WebSocketClient.Event) -> String {
    switch event {
    case .opened: "opened"
    case .text(let text): "text(\(text.utf8.count) bytes)"
    case .binary(let payload): "binary(\(payload.count) bytes)"
    case .closed(let code, let reason): "closed(\(code), \(reason))"
    }
}

private extension Array where Element == UInt8 {
    /// Where the first CR LF CR LF ends (the index after it).
    var blankLineEnd: Int? {
        guard count >= 4 else { return nil }
        return (0 ... count - 4).first { self[$0] == 13 && self[$0 + 1] == 10 && self[$0 + 2] == 13 && self[$0 + 3] == 10 }.map { $0 + 4 }
    }
}
