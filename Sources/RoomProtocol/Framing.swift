/// Why a signalling stream cannot be read any further. Every case is fatal for the
/// connection: once a length prefix is wrong there is no way to find the next frame
/// boundary, so the caller closes the connection (after answering with an `error` frame
/// where that is still useful).
public enum FrameError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The length prefix announced more than the limit. Detected from the 4-byte header
    /// alone, so a peer cannot make us buffer the oversize body first.
    case oversize(declared: Int, limit: Int)
    /// A length prefix of zero: never a valid JSON object, and accepting it would let a peer
    /// spin us on empty frames.
    case emptyFrame
    /// Encoding side: the payload does not fit the limit the peer enforces.
    case payloadTooLarge(size: Int, limit: Int)

    public var description: String {
        switch self {
        case let .oversize(declared, limit): "frame length \(declared) exceeds the limit of \(limit) bytes"
        case .emptyFrame: "frame length 0"
        case let .payloadTooLarge(size, limit): "payload of \(size) bytes exceeds the frame limit of \(limit) bytes"
        }
    }
}

/// Frame limits shared by encoder and decoder.
public enum SignalFraming {
    /// Size of the big-endian length prefix.
    public static let headerSize = 4
    /// 64 KiB: a `welcome` for a full room (participants plus attributes) fits comfortably,
    /// while one connection can pin at most this much memory in a half-received frame.
    public static let defaultMaxFrameSize = 64 * 1024
    /// What a length prefix can express at all.
    public static let absoluteMaxFrameSize = Int(UInt32.max)

    static func clamp(_ limit: Int) -> Int { min(max(limit, 1), absoluteMaxFrameSize) }
}

/// Cuts a TCP byte stream into frames (4-byte big-endian payload length, then the payload).
///
/// Incremental: feed whatever `recv` returned — one byte, half a header, many frames at once
/// — and complete payloads come out in order. Buffering is bounded: it holds at most one
/// partial frame (`maxFrameSize` bytes) plus a partial header; a complete frame is handed
/// out as soon as its last byte arrives. The decoder does not look inside payloads (JSON
/// and UTF-8 are checked by `SignalMessage.decode`, whose errors are not fatal).
///
/// After an error the decoder stays failed and repeats the error: the stream has lost
/// framing and nothing after the bad header can be trusted.
public struct FrameDecoder: Sendable {
    public let maxFrameSize: Int
    private var header: UInt32 = 0
    private var headerBytes = 0
    private var body: [UInt8] = []
    private var bodyLength = 0
    private var failure: FrameError?

    /// `maxFrameSize` is clamped to `1...UInt32.max`: a configuration mistake should not
    /// trap the daemon.
    public init(maxFrameSize: Int = SignalFraming.defaultMaxFrameSize) {
        self.maxFrameSize = SignalFraming.clamp(maxFrameSize)
    }

    /// Bytes held for the frame in progress (header included): what the bound is about.
    public var bufferedByteCount: Int { headerBytes + body.count }

    /// The error that stopped the decoder, if any.
    public var error: FrameError? { failure }

    /// Consumes `chunk`, appending each payload completed by it to `frames`.
    ///
    /// When it throws, `frames` already holds the payloads that preceded the bad header, so
    /// the caller can still act on them (a `leave` followed by garbage is still a leave).
    public mutating func feed(_ chunk: some Collection<UInt8>, into frames: inout [[UInt8]]) throws(FrameError) {
        if let failure { throw failure }
        // Errors are recorded in `failure` rather than thrown through
        // `withContiguousStorageIfAvailable`, whose rethrows is untyped.
        let done: Void? = chunk.withContiguousStorageIfAvailable { buffer in
            consume(UnsafeRawBufferPointer(buffer), into: &frames)
        }
        if done == nil {
            // Not contiguous (a lazy sequence, a Deque…): copy once.
            Array(chunk).withUnsafeBytes { consume($0, into: &frames) }
        }
        if let failure { throw failure }
    }

    /// Convenience for callers that do not need the frames preceding an error.
    public mutating func feed(_ chunk: some Collection<UInt8>) throws(FrameError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        try feed(chunk, into: &frames)
        return frames
    }

    private mutating func consume(_ input: UnsafeRawBufferPointer, into frames: inout [[UInt8]]) {
        var i = 0
        while i < input.count {
            if headerBytes < SignalFraming.headerSize {
                header = header << 8 | UInt32(input[i])
                headerBytes += 1
                i += 1
                guard headerBytes == SignalFraming.headerSize else { continue }
                let length = Int(header)
                if length == 0 { return fail(.emptyFrame) }
                if length > maxFrameSize { return fail(.oversize(declared: length, limit: maxFrameSize)) }
                bodyLength = length
                body.reserveCapacity(length)
                continue
            }
            let take = min(bodyLength - body.count, input.count - i)
            body.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i ..< i + take]))
            i += take
            if body.count == bodyLength {
                frames.append(body)
                body = []
                header = 0
                headerBytes = 0
                bodyLength = 0
            }
        }
    }

    private mutating func fail(_ error: FrameError) {
        failure = error
        body = []
        header = 0
        headerBytes = 0
    }
}

/// Writes the length prefix in front of a payload.
public struct FrameEncoder: Sendable {
    public let maxFrameSize: Int

    /// Use the peer's limit: a frame the peer would refuse is better refused here, with the
    /// connection still alive.
    public init(maxFrameSize: Int = SignalFraming.defaultMaxFrameSize) {
        self.maxFrameSize = SignalFraming.clamp(maxFrameSize)
    }

    public func frame(_ payload: some Collection<UInt8>) throws(FrameError) -> [UInt8] {
        let size = payload.count
        guard size > 0 else { throw .emptyFrame }
        guard size <= maxFrameSize else { throw .payloadTooLarge(size: size, limit: maxFrameSize) }
        var out = [UInt8]()
        out.reserveCapacity(SignalFraming.headerSize + size)
        let length = UInt32(size)
        out.append(UInt8(truncatingIfNeeded: length >> 24))
        out.append(UInt8(truncatingIfNeeded: length >> 16))
        out.append(UInt8(truncatingIfNeeded: length >> 8))
        out.append(UInt8(truncatingIfNeeded: length))
        out.append(contentsOf: payload)
        return out
    }
}
