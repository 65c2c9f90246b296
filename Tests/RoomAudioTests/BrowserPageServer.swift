import Foundation
import Glibc

/// The test's side of scripts/janus-page: a small HTTP/1.1 server on 127.0.0.1 that serves the
/// page and collects what the browsers send back — event lines (`POST /events?peer=P`), the
/// recording (`POST /upload?peer=P`) — and hands them the test's commands
/// (`GET /command?peer=P`, polled every 200 ms by the page). One server serves every browser
/// of a test; the `peer` parameter keeps them apart.
///
/// Plain sockets, one short-lived thread per connection, `Connection: close`: Foundation on
/// Linux has no HTTP server, and a handful of requests a second need nothing more. A
/// connection that sends nothing (Chromium opens spare ones) times out after 5 s on its own
/// thread without holding up the others.
final class BrowserPageServer: @unchecked Sendable {
    /// scripts/janus-page in this checkout.
    static let pageDirectory = SimCard.repoRoot + "/scripts/janus-page"

    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var eventLines: [String: [String]] = [:]
    private var uploads: [String: Data] = [:]
    private var commands: [String: [String]] = [:]
    private var stopped = false
    private let acceptThreadDone = DispatchSemaphore(value: 0)

    var origin: String { "http://127.0.0.1:\(port)" }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BrowserError.server("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard bound == 0, listen(fd, 64) == 0 else { close(fd); throw BrowserError.server("bind/listen: errno \(errno)") }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        listener = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "BrowserPageServer"
        thread.start()
    }

    /// Stops accepting (connections in progress finish on their own threads).
    func stop() {
        lock.lock()
        let wasStopped = stopped
        stopped = true
        lock.unlock()
        guard !wasStopped else { return }
        shutdown(listener, Int32(SHUT_RDWR)) // wakes accept() with an error
        acceptThreadDone.wait()
        close(listener)
    }

    /// Queues a command line for `peer`'s page (it runs them in order; see room.js).
    func send(_ command: String, to peer: String) {
        lock.lock(); defer { lock.unlock() }
        commands[peer, default: []].append(command)
    }

    /// The event lines `peer` reported so far, decoded, in order.
    func events(_ peer: String) -> [BrowserEvent] {
        lock.lock()
        let lines = eventLines[peer] ?? []
        lock.unlock()
        return lines.compactMap { BrowserEvent(line: $0) }
    }

    /// The raw JSON lines of `peer` (for failure messages).
    func eventLog(_ peer: String) -> String {
        lock.lock(); defer { lock.unlock() }
        return (eventLines[peer] ?? []).joined(separator: "\n")
    }

    /// The WAV `peer` uploaded, if it has.
    func upload(_ peer: String) -> Data? {
        lock.lock(); defer { lock.unlock() }
        return uploads[peer]
    }

    private func acceptLoop() {
        defer { acceptThreadDone.signal() }
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            let connection = Thread { [self] in serve(fd) }
            connection.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { return }
            buffer += chunk[0 ..< n]
            headerEnd = Self.find(separator, in: buffer)
            if headerEnd == nil && buffer.count > 16384 { return }
        }
        guard let end = headerEnd else { return }
        let head = String(decoding: buffer[0 ..< end], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = head[0].split(separator: " ")
        guard requestLine.count >= 2 else { return }
        let method = String(requestLine[0]), target = String(requestLine[1])
        var length = 0
        for line in head.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        var body = Array(buffer[(end + 4)...])
        while body.count < length {
            let n = recv(fd, &chunk, min(chunk.count, length - body.count), 0)
            guard n > 0 else { return }
            body += chunk[0 ..< n]
        }
        let (status, type, reply) = respond(method: method, target: target, body: Data(body))
        var out = Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(reply.count)\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".utf8)
        out += reply
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            sent += n
        }
    }

    private func respond(method: String, target: String, body: Data) -> (String, String, [UInt8]) {
        let components = URLComponents(string: target)
        let path = components?.path ?? target
        let peer = components?.queryItems?.first { $0.name == "peer" }?.value ?? ""
        switch (method, path) {
        case ("POST", "/events"):
            let lines = String(decoding: body, as: UTF8.self).split(separator: "\n").map(String.init)
            lock.lock(); eventLines[peer, default: []] += lines; lock.unlock()
            return ("200 OK", "text/plain", Array("ok".utf8))
        case ("POST", "/upload"):
            lock.lock(); uploads[peer] = body; lock.unlock()
            return ("200 OK", "text/plain", Array("ok".utf8))
        case ("GET", "/command"):
            lock.lock()
            let pending = commands[peer] ?? []
            commands[peer] = []
            lock.unlock()
            return ("200 OK", "text/plain", Array(pending.map { $0 + "\n" }.joined().utf8))
        case ("GET", _):
            // The page's own files only: a name without a slash, from scripts/janus-page.
            let name = path == "/" ? "index.html" : String(path.dropFirst())
            guard !name.contains("/"), !name.hasPrefix("."),
                  let data = FileManager.default.contents(atPath: Self.pageDirectory + "/" + name) else {
                return ("404 Not Found", "text/plain", Array("not found".utf8))
            }
            let type = name.hasSuffix(".html") ? "text/html; charset=utf-8" : name.hasSuffix(".js") ? "text/javascript" : "application/octet-stream"
            return ("200 OK", type, [UInt8](data))
        default:
            return ("405 Method Not Allowed", "text/plain", Array("no".utf8))
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0 ... (haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i ..< i + needle.count]) == needle { return i }
        }
        return nil
    }
}

/// One line the page reported (room.js `report`): its kind and the fields the tests read.
/// `participant` lines carry the AudioBridge's view of another participant (`display`,
/// `muted`, `setup`, `talking`); `talking` lines a talking/stopped-talking event; `leaving` the
/// participant who left; `status` the page's own steps (`recording`, `microphone`, `pc-connected`,
/// `ws-closed`, `uploaded` …); `janus` Janus's core events (`webrtcup`, `media`, `hangup`).
struct BrowserEvent: Decodable, Sendable {
    let peer: String
    let type: String
    /// Milliseconds since the page loaded, and the browser's wall clock (ms since 1970).
    let t: Double
    let wall: Double
    let status: String?
    let id: UInt64?
    let display: String?
    let muted: Bool?
    let setup: Bool?
    let talking: Bool?
    let janus: String?
    let receiving: Bool?
    let command: String?
    let error: String?
    let candidate: String?
    var line = ""

    enum CodingKeys: String, CodingKey {
        case peer, type, t, wall, status, id, display, muted, setup, talking, janus, receiving, command, error, candidate
    }

    init?(line: String) {
        guard var event = try? JSONDecoder().decode(BrowserEvent.self, from: Data(line.utf8)) else { return nil }
        event.line = line
        self = event
    }
}

enum BrowserError: Error, CustomStringConvertible {
    case server(String)
    case tool(String)
    var description: String {
        switch self {
        case .server(let s): "page server: \(s)"
        case .tool(let s): s
        }
    }
}
