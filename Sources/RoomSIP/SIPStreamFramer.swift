/// Cuts a SIP byte stream (TCP or TLS, RFC 3261 §18.3) into messages. On a stream nothing but
/// Content-Length says where a message ends, so a message without it is an error, not a guess;
/// and the stream comes from the network, so the header section and the body each have a
/// budget: a peer cannot make the agent buffer without end by never finishing a message.
///
/// Between messages the stream may carry RFC 5626 §4.4.1 keep-alives: a double CRLF is a
/// ping (answer it with a single CRLF), a single CRLF is the pong to ours.
///
/// After an error the stream has lost its framing for good (the next byte's place in a message
/// cannot be known): the connection must be closed. The framer refuses further input.
public struct SIPStreamFramer: Sendable {
    public enum Item: Equatable, Sendable {
        /// One whole message, start line to the end of its body.
        case message([UInt8])
        /// A keep-alive ping (CRLF CRLF) from the peer: answer with CRLF.
        case ping
        /// A pong (CRLF): the peer answered our ping.
        case pong
    }

    public enum FramingError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The header section grew past the budget without its blank line.
        case headerTooLong(limit: Int)
        /// A message's header has no Content-Length (required on a stream).
        case missingContentLength
        /// A Content-Length that is not a number, or two that disagree.
        case badContentLength(String)
        /// The body announced is over the budget.
        case bodyTooLong(length: Int, limit: Int)

        public var description: String {
            switch self {
            case .headerTooLong(let limit): "a SIP header section longer than \(limit) bytes"
            case .missingContentLength: "a SIP message without Content-Length (required on a stream)"
            case .badContentLength(let text): "a SIP message with an unusable Content-Length (\(text))"
            case .bodyTooLong(let length, let limit): "a SIP body of \(length) bytes (at most \(limit) taken)"
            }
        }
    }

    /// The most a header section (start line to the blank line) may take. A call's INVITE
    /// through a proxy or two is 1-2 KB; 16 KiB leaves room for long Via and Record-Route lists.
    public let headerLimit: Int
    /// The most a body may take: an SDP offer is well under 4 KB.
    public let bodyLimit: Int

    private var buffer: [UInt8] = []
    /// How far the search for the blank line got, so a header arriving byte by byte is not
    /// scanned again from its start each time.
    private var scanned = 0
    private var failure: FramingError?

    public init(headerLimit: Int = 16 * 1024, bodyLimit: Int = 32 * 1024) {
        self.headerLimit = headerLimit
        self.bodyLimit = bodyLimit
    }

    /// Bytes received and not yet part of a whole message.
    public var bufferedByteCount: Int { buffer.count }

    /// Takes received bytes and returns what they complete, in order. Throws once the stream's
    /// framing is lost; every later call throws the same error.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) throws(FramingError) -> [Item] {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        return try drain()
    }

    public mutating func append(_ bytes: [UInt8]) throws(FramingError) -> [Item] {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        return try drain()
    }

    private mutating func drain() throws(FramingError) -> [Item] {
        var items: [Item] = []
        do throws(FramingError) {
            while let item = try next() { items.append(item) }
        } catch {
            failure = error
            buffer = []
            throw error
        }
        return items
    }

    /// Forgets everything: a new connection starts a new stream.
    public mutating func reset() {
        buffer = []
        scanned = 0
        failure = nil
    }

    private mutating func next() throws(FramingError) -> Item? {
        // Keep-alives, between messages only.
        // (A CR without its LF is no keep-alive: it is read as the start of a message, whose
        // start line then does not parse and is dropped.)
        if buffer.first == 0x0D {
            guard buffer.count >= 2 else { return nil }
        }
        if buffer.first == 0x0D, buffer[1] == 0x0A {
            if buffer.count >= 4, buffer[2] == 0x0D, buffer[3] == 0x0A {
                buffer.removeFirst(4)
                return .ping
            }
            // "\r\n\r" might be a ping whose last byte has not arrived.
            if buffer.count == 3, buffer[2] == 0x0D { return nil }
            buffer.removeFirst(2)
            return .pong
        }
        guard !buffer.isEmpty else { return nil }
        guard let headerEnd = blankLine() else {
            if buffer.count > headerLimit { throw .headerTooLong(limit: headerLimit) }
            return nil
        }
        guard headerEnd <= headerLimit else { throw .headerTooLong(limit: headerLimit) }
        let length = try contentLength(buffer[0 ..< headerEnd])
        guard length <= bodyLimit else { throw .bodyTooLong(length: length, limit: bodyLimit) }
        let total = headerEnd + length
        guard buffer.count >= total else { return nil }
        let message = Array(buffer[0 ..< total])
        buffer.removeFirst(total)
        scanned = 0
        return .message(message)
    }

    /// The index just past the header's blank line (CRLF CRLF), or nil while it has not come.
    private mutating func blankLine() -> Int? {
        var i = max(scanned, 3)
        while i < buffer.count {
            if buffer[i] == 0x0A, buffer[i - 1] == 0x0D, buffer[i - 2] == 0x0A, buffer[i - 3] == 0x0D { return i + 1 }
            i += 1
        }
        scanned = max(3, buffer.count)
        return nil
    }

    /// The Content-Length (or compact `l`) of a header section: digits only; several must agree.
    private func contentLength(_ header: ArraySlice<UInt8>) throws(FramingError) -> Int {
        var found: Int?
        var lineStart = header.startIndex
        // The start line is not a header; header lines follow it. A folded line (starting with
        // a space or tab) continues the previous header and cannot start Content-Length.
        var isFirstLine = true
        for i in header.indices where header[i] == 0x0A {
            let line = header[lineStart ..< i]
            lineStart = i + 1
            if isFirstLine { isFirstLine = false; continue }
            if let first = line.first, first == 0x20 || first == 0x09 { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[line.startIndex ..< colon], as: UTF8.self).trimmed.lowercased()
            guard name == "content-length" || name == "l" else { continue }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
                .trimmingSuffix("\r").trimmed
            guard !value.isEmpty, value.utf8.count <= 9, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(value) else {
                throw .badContentLength(String(value.prefix(20)))
            }
            if let found, found != n { throw .badContentLength("\(found) and \(n)") }
            found = n
        }
        guard let found else { throw .missingContentLength }
        return found
    }
}

private extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
