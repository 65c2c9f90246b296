import RoomBase


/// The client side of a WebSocket (RFC 6455), without a socket: the opening handshake as bytes
/// to send and a response to check, then frames in and out. Janus's WebSocket transport
/// (`janus-protocol`) pushes events — the SDP answer, `talking`, `hangup` — on the same
/// connection requests go on, so the appliance needs no long-polling and sees a restarted Janus
/// at once (the connection closes).
///
/// The caller owns the transport (plain TCP or TLS) and feeds `receive` whatever arrived;
/// `takeOutgoing` gives what to write. Limits keep a misbehaving server from growing memory:
/// `maximumMessageSize` for a reassembled message, and a 4 KiB cap on the handshake response.
public struct WebSocketClient {
    public enum Event: Sendable, Equatable {
        /// The server accepted the upgrade.
        case opened
        case text(String)
        case binary([UInt8])
        /// The server closed (code, reason), or the stream broke the protocol (1002) or a
        /// limit (1009); nothing more will be read.
        case closed(code: UInt16, reason: String)
    }

    public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { "WebSocket: " + message }
    }

    /// SHA-1 (20 bytes) of the given bytes; only the handshake's accept key needs it (RFC 6455
    /// §4.1 requires the client to check it). roomd passes OpenSSL's.
    public typealias SHA1 = @Sendable ([UInt8]) -> [UInt8]

    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    public var maximumMessageSize = 1 << 20

    public private(set) var isOpen = false
    public private(set) var isClosed = false
    private let key: String
    private let sha1: SHA1
    private var maskSource: () -> UInt32
    private var inbound: [UInt8] = []
    private var outbound: [UInt8] = []
    private var fragments: [UInt8] = []
    private var fragmentOpcode: UInt8?

    /// `nonce`: 16 random bytes (the Sec-WebSocket-Key); `maskSource`: the frame masks (RFC
    /// 6455 §5.3 wants them unpredictable; a CSPRNG in roomd).
    public init(nonce: [UInt8], sha1: @escaping SHA1, maskSource: @escaping () -> UInt32) {
        precondition(nonce.count == 16, "the WebSocket key is 16 random bytes")
        self.key = Base64.encode(nonce)
        self.sha1 = sha1
        self.maskSource = maskSource
    }

    /// The HTTP upgrade request. `path` e.g. "/", `host` as the server is named ("host:port").
    public mutating func open(host: String, path: String = "/", subprotocol: String? = "janus-protocol") {
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { request += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        request += "\r\n"
        outbound += Array(request.utf8)
    }

    /// What to write to the transport now (drains it).
    public mutating func takeOutgoing() -> [UInt8] {
        defer { outbound.removeAll(keepingCapacity: true) }
        return outbound
    }

    public mutating func send(text: String) { sendFrame(opcode: 0x1, payload: Array(text.utf8)) }

    /// Starts the closing handshake (the server answers with its close frame).
    public mutating func close(code: UInt16 = 1000, reason: String = "") {
        guard isOpen, !isClosed else { return }
        sendFrame(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8.prefix(123)))
    }

    /// Feeds received bytes; returns what they completed, in order.
    public mutating func receive(_ bytes: some Collection<UInt8>) -> [Event] {
        guard !isClosed else { return [] }
        inbound += bytes
        var events: [Event] = []
        if !isOpen {
            switch acceptHandshake() {
            case .needMore: return events
            case .failed(let why): return [fail(1002, why)]
            case .accepted:
                isOpen = true
                events.append(.opened)
            }
        }
        while !isClosed, let frame = nextFrame(&events) { events += frame }
        return events
    }

    // MARK: Handshake

    private enum HandshakeResult { case needMore, accepted, failed(String) }

    /// The most an upgrade response may take, its blank line included.
    private static let maximumResponseSize = 4096

    private mutating func acceptHandshake() -> HandshakeResult {
        // The cap is on the response, whatever the reads: a blank line past it is refused when
        // one read brings it all too, and without one the response cannot end within the cap
        // once that much is buffered.
        guard let end = headerEnd() else {
            return inbound.count >= Self.maximumResponseSize ? .failed("handshake response longer than 4 KiB") : .needMore
        }
        guard end + 4 <= Self.maximumResponseSize else { return .failed("handshake response longer than 4 KiB") }
        let head = String(decoding: inbound[0..<end], as: UTF8.self)
        inbound.removeSubrange(0..<(end + 4))
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { return .failed("empty handshake response") }
        let status = lines.removeFirst()
        let statusParts = status.split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), statusParts[1] == "101" else {
            return .failed("server answered '\(status.prefix(80))' instead of 101 Switching Protocols")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            var value = Substring(line[line.index(after: colon)...])
            while value.first == " " { value = value.dropFirst() }
            headers[name] = String(value)
        }
        guard headers["upgrade"]?.lowercased() == "websocket" else { return .failed("missing 'Upgrade: websocket'") }
        guard headers["connection"]?.lowercased().contains("upgrade") == true else { return .failed("missing 'Connection: Upgrade'") }
        let expected = Base64.encode(sha1(Array((key + Self.guid).utf8)))
        guard headers["sec-websocket-accept"] == expected else {
            return .failed("Sec-WebSocket-Accept is '\(headers["sec-websocket-accept"] ?? "missing")', expected '\(expected)'")
        }
        return .accepted
    }

    private func headerEnd() -> Int? {
        guard inbound.count >= 4 else { return nil }
        for i in 0...(inbound.count - 4) where inbound[i] == 13 && inbound[i + 1] == 10 && inbound[i + 2] == 13 && inbound[i + 3] == 10 {
            return i
        }
        return nil
    }

    // MARK: Frames

    private mutating func nextFrame(_ events: inout [Event]) -> [Event]? {
        guard inbound.count >= 2 else { return nil }
        let b0 = inbound[0], b1 = inbound[1]
        let fin = b0 & 0x80 != 0
        let opcode = b0 & 0x0F
        guard b0 & 0x70 == 0 else { return [fail(1002, "reserved bits set (no extension was negotiated)")] }
        guard b1 & 0x80 == 0 else { return [fail(1002, "the server masked a frame")] }
        var length = Int(b1 & 0x7F)
        var offset = 2
        if length == 126 {
            guard inbound.count >= 4 else { return nil }
            length = Int(inbound[2]) << 8 | Int(inbound[3])
            offset = 4
        } else if length == 127 {
            guard inbound.count >= 10 else { return nil }
            var l: UInt64 = 0
            for i in 2..<10 { l = l << 8 | UInt64(inbound[i]) }
            guard l <= UInt64(maximumMessageSize) else { return [fail(1009, "a frame of \(l) bytes, more than \(maximumMessageSize)")] }
            length = Int(l)
            offset = 10
        }
        guard length <= maximumMessageSize else { return [fail(1009, "a frame of \(length) bytes, more than \(maximumMessageSize)")] }
        guard inbound.count >= offset + length else { return nil }
        let payload = Array(inbound[offset..<(offset + length)])
        inbound.removeSubrange(0..<(offset + length))

        switch opcode {
        case 0x8:
            let code: UInt16 = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
            let reason = payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : ""
            if isOpen && !isClosed { sendFrame(opcode: 0x8, payload: Array(payload.prefix(2))) }
            isClosed = true
            return [.closed(code: code, reason: reason)]
        case 0x9:
            guard fin, length <= 125 else { return [fail(1002, "a fragmented or long ping")] }
            sendFrame(opcode: 0xA, payload: payload)
            return []
        case 0xA:
            return []
        case 0x1, 0x2:
            guard fragmentOpcode == nil else { return [fail(1002, "a new message inside a fragmented one")] }
            if fin { return [message(opcode, payload)] }
            fragmentOpcode = opcode
            fragments = payload
            return []
        case 0x0:
            guard let first = fragmentOpcode else { return [fail(1002, "a continuation without a message")] }
            guard fragments.count + payload.count <= maximumMessageSize else {
                return [fail(1009, "a message of more than \(maximumMessageSize) bytes")]
            }
            fragments += payload
            guard fin else { return [] }
            let whole = fragments
            fragments = []
            fragmentOpcode = nil
            return [message(first, whole)]
        default:
            return [fail(1002, "unknown opcode \(opcode)")]
        }
    }

    private func message(_ opcode: UInt8, _ payload: [UInt8]) -> Event {
        opcode == 0x1 ? .text(String(decoding: payload, as: UTF8.self)) : .binary(payload)
    }

    private mutating func fail(_ code: UInt16, _ why: String) -> Event {
        if isOpen && !isClosed { sendFrame(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)]) }
        isClosed = true
        inbound = []
        return .closed(code: code, reason: why)
    }

    /// Client frames are always masked (RFC 6455 §5.3), whole (no fragmentation needed here).
    private mutating func sendFrame(opcode: UInt8, payload: [UInt8]) {
        guard isOpen || opcode == 0x8 else { return }
        outbound.append(0x80 | opcode)
        let n = payload.count
        if n < 126 {
            outbound.append(0x80 | UInt8(n))
        } else if n <= 0xFFFF {
            outbound.append(0x80 | 126)
            outbound += [UInt8(n >> 8), UInt8(n & 0xFF)]
        } else {
            outbound.append(0x80 | 127)
            for i in (0..<8).reversed() { outbound.append(UInt8(truncatingIfNeeded: UInt64(n) >> (8 * UInt64(i)))) }
        }
        let m = maskSource()
        let mask = [UInt8(m >> 24), UInt8((m >> 16) & 0xFF), UInt8((m >> 8) & 0xFF), UInt8(m & 0xFF)]
        outbound += mask
        for (i, b) in payload.enumerated() { outbound.append(b ^ mask[i & 3]) }
    }
}
