import RoomBase
import RoomJSON
import RoomSystem

/// The control socket of roomd: newline-delimited JSON requests on a Unix stream socket,
/// validated against `ControlCommands`, authorized by the caller's SO_PEERCRED credentials,
/// and handed to `handler`; events are pushed to subscribers with `broadcast`.
///
/// Loop-thread only, like everything on the `EventLoop`. Never blocks: a client that does not
/// read its answers or events is cut off when its outgoing buffer exceeds
/// `Configuration.outgoingLimit`, and everyone else keeps being served.
public final class ControlServer {
    public struct Configuration: Sendable {
        public var path: String
        /// File mode of the socket (connecting needs write permission on it).
        public var mode: FileMode = 0o660
        /// Group owning the socket, and allowed to run `control` commands. nil: only root
        /// and roomd's own user may change anything.
        public var group: GroupID?
        /// Longest request line in bytes (without the newline); a longer one is answered with
        /// `too_long` and the connection is closed.
        public var maxLineBytes = 64 * 1024
        /// Most bytes waiting to be sent to one client; beyond it the client is cut off.
        public var outgoingLimit = 256 * 1024
        /// More clients than this at once are refused (`too_many_clients`, then closed).
        public var maxClients = 64
        /// More clients than this from one user (uid) are refused the same way, so one stuck
        /// script cannot lock the rig or an installer out.
        public var maxClientsPerUser = 32
        /// A client that has nothing pending, subscribed to nothing and sent no line for this
        /// long is closed with `timeout` (roomctl's commands take milliseconds; a connection
        /// left open by a stuck script only holds a slot).
        public var idleTimeout: Duration = .seconds(30)
        /// A request line must be complete this long after its first byte arrived (or after
        /// the client connected): a client dripping a line a byte at a time is closed.
        public var lineTimeout: Duration = .seconds(15)
        /// Requests of one client waiting for the handler's answer; beyond it the server stops
        /// reading from that client until answers go out (pipelining is allowed, flooding is not).
        public var maxPendingPerClient = 16

        public init(path: String, mode: FileMode = 0o660, group: GroupID? = nil) {
            self.path = path
            self.mode = mode
            self.group = group
        }
    }

    public struct Statistics: Sendable, Equatable {
        public var clientsAccepted = 0
        public var clientsRefused = 0
        public var requests = 0
        public var errors = 0
        public var permissionDenied = 0
        public var tooLong = 0
        public var eventsSent = 0
        /// Subscribers cut off because they did not read their events.
        public var subscribersCutOff = 0
        /// Clients cut off because they did not read their answers.
        public var clientsCutOff = 0
        /// Clients closed for sending no complete line in time, or for sitting idle.
        public var timeouts = 0
        /// Request bytes read, and bytes examined looking for line ends: the work a client can
        /// cause stays proportional to what it sends (each byte looked at once).
        public var bytesRead = 0
        public var bytesScanned = 0
        public init() {}
    }

    /// Answers a validated request. Call `reply` exactly once, now or later (e.g. when the room
    /// service has answered), on the loop thread. Later calls are ignored; a reply for a client
    /// that has gone is dropped.
    public typealias Handler = (ControlRequest, _ reply: @escaping (ControlResult) -> Void) -> Void
    /// May this caller run this command? Asked only for `control` commands.
    public typealias Authorizer = (PeerCredentials, ControlCommandSpec) -> Bool

    public var handler: Handler
    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    public var clientCount: Int { clients.count }
    public var subscriberCount: Int { clients.values.filter { $0.subscription != nil }.count }
    /// True when some subscriber wants `levels` events (so roomd computes them only then).
    public var hasLevelSubscribers: Bool { clients.values.contains { $0.subscription?.levels == true } }

    private let loop: EventLoop
    private var authorize: Authorizer
    /// Set when the caller supplied its own authorizer: `setAllowedGroup` leaves it alone.
    private let customAuthorizer: Bool
    private var listener: UnixListener?
    private var clients: [Int: Client] = [:]
    private var nextClientID = 1
    private var sweepTimer: EventLoop.TimerID?
    /// Refusals are logged once per burst: the first, then a count when the burst is over.
    private var refusedSinceLog = 0
    private var lastRefusalNs: UInt64 = 0
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    /// Listens at `configuration.path` (replacing a stale socket file; see `UnixListener`).
    /// `authorize` defaults to `ControlAuthorization.policy(allowedGroup: configuration.group)`.
    public init(
        configuration: Configuration, loop: EventLoop, authorize: Authorizer? = nil, handler: @escaping Handler
    ) throws(SystemError) {
        self.configuration = configuration
        self.loop = loop
        self.handler = handler
        self.authorize = authorize ?? ControlAuthorization.policy(allowedGroup: configuration.group)
        customAuthorizer = authorize != nil
        listener = try UnixListener(path: configuration.path, mode: configuration.mode, group: configuration.group,
                                    loop: loop, outgoingLimit: configuration.outgoingLimit) { [weak self] connection in
            self?.accept(connection)
        }
        let every = Duration.milliseconds(max(50, min(1000, configuration.lineTimeout.monotonicNanosecondCount / 5_000_000)))
        sweepTimer = loop.schedule(after: every, repeating: every) { [weak self] in self?.sweep() }
    }

    deinit { close() }

    /// A reloaded configuration names another control group: the socket file changes group
    /// and `control` commands are checked against the new one from the next request on.
    /// Connected clients stay connected (their credentials are re-checked per request).
    public func setAllowedGroup(_ group: GroupID?) throws(SystemError) {
        try Files.changeGroup(configuration.path, to: group ?? ProcessIdentity.groupID)
        if !customAuthorizer { authorize = ControlAuthorization.policy(allowedGroup: group) }
    }

    /// Stops listening, removes the socket file and closes every client.
    public func close() {
        if let sweepTimer { loop.cancel(sweepTimer) }
        sweepTimer = nil
        listener?.close()
        listener = nil
        for client in clients.values { client.connection.close() }
        clients.removeAll()
    }

    /// Sends `event` to every subscriber that asked for it. A subscriber whose outgoing buffer
    /// cannot take it is cut off (counted in `statistics.subscribersCutOff`).
    public func broadcast(_ event: ControlEvent) {
        var line: [UInt8]?
        for client in Array(clients.values) {
            guard let subscription = client.subscription, subscription.wants(event.name) else { continue }
            if line == nil { line = event.line }
            switch client.connection.write(line!) {
            case .accepted: statistics.eventsSent += 1
            case .backpressure:
                statistics.subscribersCutOff += 1
                cutOff(client, "does not read its events (over \(configuration.outgoingLimit) bytes queued)")
            case .closed: remove(client)
            }
        }
    }

    public func broadcast(event name: String, _ fields: [String: JSONValue] = [:]) {
        broadcast(ControlEvent(name, fields))
    }

    // MARK: Clients

    private struct Subscription {
        var events: Set<String>?
        var levels: Bool
        func wants(_ name: String) -> Bool {
            if name == "levels" { return levels || events?.contains(name) == true }
            return events?.contains(name) ?? true
        }
    }

    private final class Client {
        let id: Int
        let connection: StreamConnection
        let credentials: PeerCredentials?
        var buffer: [UInt8] = []
        /// How much of `buffer` has been searched for a line end already.
        var scanned = 0
        /// When the client connected, when the line now in `buffer` started, and when it last
        /// completed a line or got an answer; how many lines it completed.
        let connectedNs: UInt64
        var lineStartNs: UInt64
        var lastActivityNs: UInt64
        var linesReceived = 0
        var subscription: Subscription?
        var pending = 0
        var inputEnded = false
        var closing = false
        /// Inside `processLines` (a handler may reply synchronously: no re-entry).
        var processing = false
        init(id: Int, connection: StreamConnection, credentials: PeerCredentials?, now: UInt64) {
            self.id = id
            self.connection = connection
            self.credentials = credentials
            connectedNs = now
            lineStartNs = now
            lastActivityNs = now
        }
        var who: String {
            guard let c = credentials else { return "control client \(id) (credentials unknown)" }
            return "control client \(id) (pid \(c.pid) uid \(c.uid) gid \(c.gid))"
        }
    }

    private func accept(_ connection: StreamConnection) {
        let credentials = try? connection.peerCredentials()
        let fromUser = credentials.map { c in clients.values.filter { $0.credentials?.uid == c.uid }.count } ?? 0
        if clients.count >= configuration.maxClients || fromUser >= configuration.maxClientsPerUser {
            let reason = clients.count >= configuration.maxClients
                ? "roomd has \(clients.count) control clients, its limit"
                : "uid \(credentials.map { "\($0.uid)" } ?? "?") has \(fromUser) control connections open, the limit per user"
            refuse(connection, reason)
            return
        }
        let now = monotonicNanoseconds()
        let client = Client(id: nextClientID, connection: connection, credentials: credentials, now: now)
        nextClientID += 1
        clients[client.id] = client
        statistics.clientsAccepted += 1
        Log.debug("control: \(client.who) connected")
        connection.handler = { [weak self, weak client] _, event in
            guard let self, let client else { return }
            switch event {
            case .readable: self.readFrom(client)
            case .closed(let error):
                Log.debug("control: \(client.who): \(error)")
                self.remove(client)
            case .connected, .drained: break
            }
        }
    }

    /// Says why, closes; logs the first refusal of a burst and, once refusals have stopped
    /// for 10 s, how many followed (a script retrying in a loop must not flood the journal).
    private func refuse(_ connection: StreamConnection, _ reason: String) {
        statistics.clientsRefused += 1
        let now = monotonicNanoseconds()
        if refusedSinceLog == 0 {
            Log.warning("control: refusing a client: \(reason) (idle clients are closed after \(configuration.idleTimeout))")
        }
        refusedSinceLog += 1
        lastRefusalNs = now
        let error = ControlError(.tooManyClients, "\(reason); try again later (idle clients are closed after \(configuration.idleTimeout))",
                                 details: ["limit": .int(configuration.maxClients), "limit_per_user": .int(configuration.maxClientsPerUser)])
        closeAfterError(connection, error)
    }

    /// Sends `error` (no id), ends our side once it is out, drops whatever the client still
    /// sends and closes after a second. Closing with unread input would reset the connection
    /// and could destroy the error before the client reads it (then roomctl could only say
    /// "connection lost").
    private func closeAfterError(_ connection: StreamConnection, _ error: ControlError) {
        connection.write(ControlResponse.failure(id: nil, error: error))
        connection.handler = { c, event in
            switch event {
            case .readable:
                var sink = [UInt8](repeating: 0, count: 4096)
                while case .bytes? = try? sink.withUnsafeMutableBytes({ try c.read(into: $0) }) {}
                if case .endOfStream? = try? sink.withUnsafeMutableBytes({ try c.read(into: $0) }) { c.close() }
            case .drained: c.shutdownWriting()
            case .closed, .connected: break
            }
        }
        if connection.bufferedByteCount == 0 { connection.shutdownWriting() }
        loop.schedule(after: .seconds(1)) { connection.close() }
    }

    /// Closes clients that hold a slot without using it, and ends a refusal burst's log.
    private func sweep() {
        let now = monotonicNanoseconds()
        if refusedSinceLog > 0, now - lastRefusalNs > 10_000_000_000 {
            if refusedSinceLog > 1 { Log.warning("control: refused \(refusedSinceLog - 1) more clients in that burst") }
            refusedSinceLog = 0
        }
        let lineLimit = UInt64(configuration.lineTimeout.monotonicNanosecondCount)
        let idleLimit = UInt64(configuration.idleTimeout.monotonicNanosecondCount)
        for client in Array(clients.values) where !client.closing {
            if client.pending > 0 { continue }   // waiting for roomd's answer: not the client's doing
            if !client.buffer.isEmpty {
                if now - client.lineStartNs >= lineLimit { timeOut(client, "request line not completed within \(configuration.lineTimeout)") }
            } else if client.linesReceived == 0 {
                if now - client.connectedNs >= lineLimit { timeOut(client, "no request within \(configuration.lineTimeout) of connecting") }
            } else if client.subscription == nil && now - client.lastActivityNs >= idleLimit {
                timeOut(client, "idle for \(configuration.idleTimeout)")
            }
        }
    }

    private func timeOut(_ client: Client, _ why: String) {
        statistics.timeouts += 1
        statistics.errors += 1
        Log.info("control: closing \(client.who): \(why)")
        drop(client, ControlError(.timeout, "\(why); closing the connection"))
    }

    /// Ends a client with an error line (`too_long`, `timeout`): it is gone from `clients` at
    /// once and its connection closes as `closeAfterError` does.
    private func drop(_ client: Client, _ error: ControlError) {
        clients[client.id] = nil
        client.closing = true
        closeAfterError(client.connection, error)
    }

    private func remove(_ client: Client) {
        client.connection.close()
        clients[client.id] = nil
    }

    /// Closes a client that does not keep up, at once (its queued bytes are dropped).
    private func cutOff(_ client: Client, _ why: String) {
        Log.warning("control: cutting off \(client.who): \(why)")
        remove(client)
    }

    /// Sends what is queued, then closes; a peer that does not read is closed after 2 s anyway.
    private func finish(_ client: Client) {
        guard !client.closing else { return }
        client.closing = true
        client.connection.isReadingPaused = true
        client.connection.closeAfterFlush()
        clients[client.id] = nil
        let connection = client.connection
        if connection.isOpen { loop.schedule(after: .seconds(2)) { connection.close() } }
    }

    private func readFrom(_ client: Client) {
        let result: StreamConnection.ReadResult
        do {
            result = try scratch.withUnsafeMutableBytes { try client.connection.read(into: $0) }
        } catch {
            Log.debug("control: \(client.who): \(error)")
            remove(client)
            return
        }
        switch result {
        case .wouldBlock: return
        case .bytes(let n):
            statistics.bytesRead += n
            if client.buffer.isEmpty { client.lineStartNs = monotonicNanoseconds() }
            client.buffer.append(contentsOf: scratch[0..<n])
        case .endOfStream:
            // A last line without a newline still counts (`printf '{…}' | socat`).
            client.inputEnded = true
            client.connection.isReadingPaused = true
            if !client.buffer.isEmpty { client.buffer.append(0x0A) }
        }
        processLines(client)
        if client.inputEnded && !client.closing && client.pending == 0 && client.subscription == nil {
            finish(client)
        }
    }

    private func processLines(_ client: Client) {
        guard !client.processing else { return }
        client.processing = true
        var start = 0
        defer {
            client.processing = false
            if clients[client.id] === client {
                if start > 0 {
                    client.buffer.removeSubrange(0..<start)
                    client.scanned = max(0, client.scanned - start)
                    client.lineStartNs = monotonicNanoseconds()   // what is left began now, at the latest
                }
            }
        }
        while clients[client.id] === client, !client.closing {
            // Search only what has not been searched: a line dripped a byte at a time costs
            // its length once, not its length squared.
            let from = max(start, client.scanned)
            guard let newline = client.buffer[from...].firstIndex(of: 0x0A) else {
                statistics.bytesScanned += client.buffer.count - from
                client.scanned = client.buffer.count
                break
            }
            statistics.bytesScanned += newline + 1 - from
            client.scanned = newline + 1
            let lineLength = newline - start
            if lineLength > configuration.maxLineBytes { tooLong(client); return }
            var end = newline
            if end > start && client.buffer[end - 1] == 0x0D { end -= 1 }
            let line = Array(client.buffer[start..<end])
            start = newline + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            client.linesReceived += 1
            client.lastActivityNs = monotonicNanoseconds()
            handleLine(line, client)
            if client.pending >= configuration.maxPendingPerClient {
                client.connection.isReadingPaused = true
                break
            }
        }
        if clients[client.id] === client, !client.closing, client.buffer.count - start > configuration.maxLineBytes {
            tooLong(client)
        }
    }

    private func tooLong(_ client: Client) {
        statistics.tooLong += 1
        statistics.errors += 1
        Log.warning("control: \(client.who): request line over \(configuration.maxLineBytes) bytes; closing")
        let error = ControlError(.tooLong, "request line longer than \(configuration.maxLineBytes) bytes; closing the connection",
                                 details: ["limit": .int(configuration.maxLineBytes)])
        drop(client, error)
    }

    private func handleLine(_ line: [UInt8], _ client: Client) {
        statistics.requests += 1
        let request: ControlRequest
        do {
            request = try ControlRequest.parse(line: line)
        } catch {
            Log.debug("control: \(client.who): \(error.error)")
            send(.failure(error.error), id: error.id, to: client)
            return
        }
        if request.spec.access == .control {
            let allowed = client.credentials.map { authorize($0, request.spec) } ?? false
            guard allowed else {
                statistics.permissionDenied += 1
                Log.warning("control: \(client.who): \(request.name) refused (not root and not in the allowed group)")
                send(.failure(ControlError(.permissionDenied, "\(request.name) changes the appliance: run it as root or as a member of the control group")),
                     id: request.id, to: client)
                return
            }
            Log.notice("control: \(client.who): \(Self.describe(request))")
        } else {
            Log.debug("control: \(client.who): \(request.name)")
        }
        switch request.command {
        case .subscribe(let events, let levels):
            client.subscription = Subscription(events: events.map(Set.init), levels: levels)
            let names = events ?? ControlEventName.all.filter { $0 != "levels" || levels }
            send(.success(["events": .array(names.map(JSONValue.string)), "levels": .bool(levels)]), id: request.id, to: client)
        case .version:
            send(.success(["api": .int(controlAPIVersion), "roomd": .string(roomdVersion)]), id: request.id, to: client)
        default:
            client.pending += 1
            var answered = false
            let id = request.id
            handler(request) { [weak self, weak client] result in
                guard !answered else { return }
                answered = true
                guard let self, let client else { return }
                client.pending -= 1
                if case .failure(let e) = result { Log.info("control: \(client.who): \(request.name): \(e)") }
                self.send(result, id: id, to: client)
                self.resumeIfIdle(client)
            }
        }
    }

    /// After an answer: read again if the client was paused for too many pending requests,
    /// or close a client whose input ended once everything is answered.
    private func resumeIfIdle(_ client: Client) {
        guard clients[client.id] === client, !client.closing, !client.processing else { return }
        if client.pending < configuration.maxPendingPerClient {
            if !client.inputEnded { client.connection.isReadingPaused = false }
            processLines(client) // lines already buffered while paused
        }
        if clients[client.id] === client, !client.closing, client.inputEnded, client.pending == 0, client.subscription == nil {
            finish(client)
        }
    }

    private func send(_ result: ControlResult, id: ControlRequestID?, to client: Client) {
        if case .failure = result { statistics.errors += 1 }
        client.lastActivityNs = monotonicNanoseconds()
        guard clients[client.id] === client || client.closing else { return }
        switch client.connection.write(ControlResponse.line(id: id, result)) {
        case .accepted: break
        case .backpressure:
            statistics.clientsCutOff += 1
            cutOff(client, "does not read its answers (over \(configuration.outgoingLimit) bytes queued)")
        case .closed: remove(client)
        }
    }

    /// "mute", "kick participant=7 reason=…" — for the log; tokens are never logged.
    static func describe(_ request: ControlRequest) -> String {
        let args = request.arguments.keys.sorted().map { key -> String in
            if key == "token" { return "token=<redacted>" }
            let value = request.arguments[key]!
            let text = value.stringValue.map { $0.utf8.count > 80 ? String($0.prefix(80)) + "…" : $0 } ?? value.jsonText
            return "\(key)=\(text)"
        }
        return ([request.name] + args).joined(separator: " ")
    }
}

/// The default authorization policy for `control` commands.
public enum ControlAuthorization {
    /// Root, roomd's own user, and members of `allowedGroup` (primary group from SO_PEERCRED,
    /// supplementary groups from SO_PEERGROUPS: both as they were when the peer connected) may
    /// run `control` commands. /proc/<pid>/status is read only where the kernel has no
    /// SO_PEERGROUPS: a connection can outlive its process, and the pid then names another one.
    public static func policy(allowedGroup: GroupID?) -> ControlServer.Authorizer {
        let me = ProcessIdentity.effectiveUserID
        return { credentials, _ in
            isAllowed(uid: credentials.uid, gid: credentials.gid, groups: credentials.groups ?? supplementaryGroups(pid: credentials.pid),
                      allowedGroup: allowedGroup, daemonUID: me)
        }
    }

    /// The rule behind `policy`, on plain numbers (testable without a peer).
    public static func isAllowed(uid: UserID, gid: GroupID, groups: [GroupID], allowedGroup: GroupID?, daemonUID: UserID) -> Bool {
        if uid == 0 || uid == daemonUID { return true }
        guard let group = allowedGroup else { return false }
        return gid == group || groups.contains(group)
    }

    /// The supplementary groups of a running process (empty when it has gone).
    public static func supplementaryGroups(pid: ProcessID) -> [GroupID] {
        guard let text = try? Files.readText("/proc/\(pid)/status") else { return [] }
        for line in text.split(separator: "\n") where line.hasPrefix("Groups:") {
            return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { GroupID($0) }
        }
        return []
    }
}
