import Foundation
@testable import RoomJanus
import RoomSystem
import RoomTLS
import XCTest

/// Turns `loop` until `condition` holds or `seconds` pass; returns the condition.
@discardableResult
func turn(_ loop: EventLoop, seconds: Double, until condition: () -> Bool) -> Bool {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    while !condition() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(5)) }
    return condition()
}

/// What the roomserver signalling path (RoomSession's `TLSConnection` client) says about the
/// server at `address` with `settings`: the sentence an installer already knows, which
/// `JanusConnection` must give unchanged.
func tlsRefusalSentence(loop: EventLoop, address: SocketAddress, serverName: String, settings: TLSClientSettings) throws -> String? {
    let context = try TLSClientContext(settings: settings)
    let connection = try TLSConnection(stream: try StreamConnection.connect(to: address, loop: loop),
                                       role: .client(context, serverName: serverName), loop: loop)
    var sentence: String?
    var connected = false
    connection.setEventHandler { event in
        switch event {
        case .closed(let error): sentence = "\(error)"
        case .connected: connected = true
        default: break
        }
    }
    turn(loop, seconds: 5) { sentence != nil || connected }
    connection.close()
    return sentence
}

/// A stand-in for Janus's WebSocket transport, plain or TLS, on 127.0.0.1: it records each
/// opening handshake's request and accepts it (101 with the right Sec-WebSocket-Accept), so
/// tests can see what the appliance sends without a Janus.
final class FakeWebSocketServer {
    let loop: EventLoop
    let tls: TLSServerContext?
    /// Records requests but never answers them (a Janus that hangs).
    var silent = false
    private var listener: TCPListener?
    private var connections: [any StreamTransport] = []
    private(set) var requests: [String] = []
    var port: UInt16 { listener?.localPort ?? 0 }
    var address: SocketAddress { try! SocketAddress(ip: "127.0.0.1", port: port) }

    init(loop: EventLoop, tls: TLSServerContext? = nil) throws {
        self.loop = loop
        self.tls = tls
        listener = try TCPListener(address: try SocketAddress(ip: "127.0.0.1", port: 0), loop: loop) { [weak self] stream in
            self?.accept(stream)
        }
    }

    deinit {
        listener?.close()
        for c in connections { c.close() }
    }

    private func accept(_ stream: StreamConnection) {
        let transport: any StreamTransport
        if let tls {
            guard let t = try? TLSConnection(stream: stream, role: .server(tls), loop: loop) else { return stream.close() }
            transport = t
        } else {
            transport = stream
        }
        var received: [UInt8] = []
        var answered = false
        transport.setEventHandler { [weak self, weak transport] event in
            guard let self, let transport, case .readable = event else { return }
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let result = try? chunk.withUnsafeMutableBytes { (raw) throws(SystemError) in try transport.read(into: raw) }
                guard case .bytes(let n)? = result else { break }
                received += chunk[0 ..< n]
            }
            guard !answered, let request = String(bytes: received, encoding: .utf8), let end = request.range(of: "\r\n\r\n") else { return }
            answered = true
            let head = String(request[..<end.lowerBound])
            self.requests.append(head)
            if self.silent { return }
            let key = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let accept = Data(WebSocketClient.sha1(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
            let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n"
            transport.write(Array(answer.utf8))
        }
        connections.append(transport)
    }
}
