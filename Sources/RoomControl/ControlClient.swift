import RoomJSON
import RoomSystem

/// Why a `ControlClient` call failed.
public enum ControlClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No daemon at the socket (missing, refused, connection lost).
    case unreachable(String)
    /// The socket is there but this user may not open it (EACCES): a group membership question.
    case permissionDenied(String)
    /// No answer (or event) within the timeout.
    case timeout(String)
    /// The daemon answered with an error.
    case refused(ControlError)
    /// The daemon sent something that is not control API 1.
    case protocolError(String)

    public var description: String {
        switch self {
        case .unreachable(let m): m
        case .permissionDenied(let m): m
        case .timeout(let m): m
        case .refused(let e): "\(e)"
        case .protocolError(let m): "protocol error: \(m)"
        }
    }
}

/// A simple blocking client of the control socket (roomctl, tests, scripts in Swift): send a
/// request, wait for its answer; after `subscribe`, read events. Events that arrive while an
/// answer is awaited are queued for `nextEvent`. Not thread-safe: one thread uses it (it runs
/// a private `EventLoop` only while waiting).
public final class ControlClient {
    public let path: String
    private let loop: EventLoop
    private var connection: StreamConnection?
    private var buffer: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    private var answers: [ControlRequestID: JSONValue] = [:]
    private var events: [ControlEvent] = []
    private var eventHead = 0
    private var lost: String?
    /// An error the daemon sent with no request to answer — `too_many_clients` right after
    /// connecting, `timeout` before closing an idle connection: why the connection ends, which
    /// is what to tell the user instead of "connection lost".
    private var closingError: ControlError?
    private var nextID = 1
    /// Longest line accepted from the daemon (participant lists can be long; a runaway is not).
    public var maxLineBytes = 16 << 20

    /// Connects to the socket at `path`, waiting at most `timeout`.
    public init(path: String, timeout: Duration = .seconds(5)) throws(ControlClientError) {
        self.path = path
        do {
            loop = try EventLoop()
        } catch {
            throw .unreachable("event loop: \(error)")
        }
        let address: SocketAddress
        do {
            address = try SocketAddress(unixPath: path)
        } catch {
            throw .unreachable("\(path): \(error)")
        }
        var connected = false
        do {
            connection = try StreamConnection.connect(to: address, loop: loop, outgoingLimit: 1 << 20) { [weak self] c, event in
                switch event {
                case .connected: connected = true
                case .readable: self?.readAvailable(c)
                case .closed(let error): self?.lost = "\(error)"
                case .drained: break
                }
            }
        } catch {
            if error.errno == .accessDenied || error.errno == .notPermitted {
                throw .permissionDenied("no permission to open roomd's control socket \(path): \(Self.permissionHint(path))")
            }
            throw .unreachable("cannot connect to roomd at \(path): \(error)")
        }
        try waitUntil(timeout, "connecting to \(path)") { connected || self.lost != nil }
        if let lost { throw .unreachable("cannot connect to roomd at \(path): \(lost)") }
    }

    deinit { connection?.close() }

    /// What to do about EACCES: join the socket's group (it names it), or use root.
    static func permissionHint(_ path: String) -> String {
        guard let gid = Files.owningGroup(of: path) else { return "run as root or as a member of the control group" }
        let group = Groups.name(of: gid) ?? "\(gid)"
        return "add yourself to group \(group) (e.g. `sudo usermod -aG \(group) $USER`, then log in again) or run as root"
    }

    public func close() {
        connection?.close()
        connection = nil
    }

    /// Sends a request and waits for its answer: the `result` object, or `.refused` with the
    /// daemon's error.
    public func request(_ command: String, _ arguments: [String: JSONValue] = [:],
                        timeout: Duration = .seconds(10)) throws(ControlClientError) -> [String: JSONValue] {
        let answer = try requestRaw(command, arguments, timeout: timeout)
        if answer["ok"]?.boolValue == true { return answer["result"]?.objectValue ?? [:] }
        guard let errorValue = answer["error"], let error = ControlError(json: errorValue) else {
            throw .protocolError("answer without ok/result or error: \(answer.jsonText)")
        }
        throw .refused(error)
    }

    /// Sends a request and returns the whole answer object (`{"id", "ok", "result"|"error"}`).
    public func requestRaw(_ command: String, _ arguments: [String: JSONValue] = [:],
                           timeout: Duration = .seconds(10)) throws(ControlClientError) -> JSONValue {
        let id = ControlRequestID.int(nextID)
        nextID += 1
        var request: [String: JSONValue] = ["id": id.json, "cmd": .string(command)]
        if !arguments.isEmpty { request["args"] = .object(arguments) }
        try sendLine(JSONValue.object(request).jsonBytes + [0x0A])
        try waitUntil(timeout, "waiting for roomd to answer \(command)") { self.answers[id] != nil || self.lost != nil }
        if let answer = answers.removeValue(forKey: id) { return answer }
        throw lostError()
    }

    /// Sends raw bytes (tests: malformed input). The caller adds the newline.
    public func sendLine(_ bytes: [UInt8]) throws(ControlClientError) {
        // A refusal may already be waiting (roomd answers a connection it cannot take at once).
        _ = try? loop.runOnce(timeout: .zero)
        guard let connection, lost == nil else { throw lostError() }
        switch connection.write(bytes) {
        case .accepted: break
        case .backpressure: throw .unreachable("roomd does not read its control socket")
        case .closed: throw lostError()
        }
    }

    /// The next event (after `subscribe`), waiting at most `timeout` (nil: forever). nil when
    /// the timeout passed; throws `.unreachable` when the daemon closed the connection.
    public func nextEvent(timeout: Duration?) throws(ControlClientError) -> ControlEvent? {
        if let event = popEvent() { return event }
        if lost != nil { throw lostError() }
        let deadline = timeout.map { monotonicNanoseconds() + $0.monotonicNanosecondCount }
        while eventHead >= events.count && lost == nil {
            var wait: Duration? = nil
            if let deadline {
                let now = monotonicNanoseconds()
                if now >= deadline { return nil }
                wait = .nanoseconds(Int64(deadline - now))
            }
            do { _ = try loop.runOnce(timeout: wait) } catch { throw .unreachable("event loop: \(error)") }
        }
        if let event = popEvent() { return event }
        throw lostError()
    }

    /// The daemon's own reason when it sent one (`closingError`), else "connection lost".
    private func lostError() -> ControlClientError {
        if let closingError { return .refused(closingError) }
        return .unreachable("connection to roomd lost: \(lost ?? "closed")")
    }

    /// Lines that were neither answers nor events, and answers nobody waited for, are dropped.
    private func popEvent() -> ControlEvent? {
        guard eventHead < events.count else { return nil }
        let e = events[eventHead]
        eventHead += 1
        if eventHead == events.count { events.removeAll(keepingCapacity: true); eventHead = 0 }
        return e
    }

    private func waitUntil(_ timeout: Duration, _ what: String, _ done: () -> Bool) throws(ControlClientError) {
        let deadline = monotonicNanoseconds() + timeout.monotonicNanosecondCount
        while !done() {
            let now = monotonicNanoseconds()
            if now >= deadline { throw .timeout("timed out \(what)") }
            do { _ = try loop.runOnce(timeout: .nanoseconds(Int64(deadline - now))) } catch {
                throw .unreachable("event loop: \(error)")
            }
        }
    }

    private func readAvailable(_ c: StreamConnection) {
        let result: StreamConnection.ReadResult
        do {
            result = try scratch.withUnsafeMutableBytes { try c.read(into: $0) }
        } catch {
            lost = "\(error)"
            c.close()
            return
        }
        switch result {
        case .wouldBlock: return
        case .endOfStream:
            lost = "roomd closed the connection"
            c.close()
            return
        case .bytes(let n): buffer.append(contentsOf: scratch[0..<n])
        }
        var start = 0
        while let newline = buffer[start...].firstIndex(of: 0x0A) {
            let line = buffer[start..<newline]
            start = newline + 1
            guard let value = try? JSONValue.parse(line) else { continue }
            if let event = ControlEvent(json: value) {
                events.append(event)
            } else {
                switch value["id"] {
                case .int(let i)?: answers[.int(i)] = value
                case .string(let s)?: answers[.string(s)] = value
                default:
                    // An error without an id (too_long, too many clients, timeout): it answers
                    // whatever we are waiting for, and says why the connection will end.
                    if let error = value["error"].flatMap(ControlError.init(json:)) { closingError = error }
                    if let id = nextIDWaiting(), answers[id] == nil { answers[id] = value }
                }
            }
        }
        if start > 0 { buffer.removeSubrange(0..<start) }
        if buffer.count > maxLineBytes {
            lost = "roomd sent a line over \(maxLineBytes) bytes"
            c.close()
        }
    }

    private func nextIDWaiting() -> ControlRequestID? {
        let id = nextID - 1
        return id >= 1 ? .int(id) : nil
    }
}
