import RoomSystem
import Synchronization

/// The room service on several cores: `count` workers, each a `RoomServer` on an event loop
/// thread of its own, each holding whole rooms (docs/roomserver.md, "Workers").
///
/// - A room lives on one worker, chosen by a fixed hash of its application and name
///   (`worker(for:)`), so its members, their media and its timers never cross threads.
/// - Worker 0 is the front door: it accepts every signalling connection, runs its TLS
///   handshake, applies the per-address and capacity budgets and reads the `hello`. Once the
///   token names a room held elsewhere, the connection (socket, TLS session, unread frames) is
///   handed to that worker's loop and joins there. Budgets on connections that have not joined
///   stay exact because they are all in one place.
/// - Media needs no hand-over: every worker has its own UDP socket bound to the one media
///   port (SO_REUSEPORT), and the kernel steers each datagram by its SSRC or binding
///   participant id modulo `count` (`UDPSocket.steeredGroup`). A worker gives its
///   participants ids and SSRCs equal to its index modulo `count`, so their datagrams reach it.
///
/// Sendable: what crosses threads is immutable, atomic or behind a `Mutex`; each `RoomServer`
/// is only touched on its own thread (through `perform`).
public final class RoomServerWorkers: Sendable {
    /// `server.workers` at most: beyond this a room's hash spreads thinner than anyone has
    /// cores for.
    public static let most = 64

    public let count: Int
    /// Connections open on every worker, joined or not: the capacity (`limits.max_connections`
    /// and the descriptor limit) is the process's.
    let openConnections = Atomic<Int>(0)
    private let workers: [Worker]
    private let threads: Mutex<[NativeThread]> = Mutex([])
    /// Addresses worker 0 bound, once it has started.
    private let bound = Mutex<(signalling: [SocketAddress], plain: [SocketAddress], media: SocketAddress?)>(([], [], nil))

    /// One worker's loop and server as other threads see them: the remote to post to, and the
    /// server, used only inside closures posted there.
    private final class Worker: @unchecked Sendable {
        let state = Mutex<(remote: EventLoopRemote?, started: Result<Void, SystemError>?, stopped: Bool)>((nil, nil, false))
        /// Written once on the worker's thread before its loop runs; read only on that thread
        /// (and by `totals` once the thread has ended).
        var server: RoomServer?
        /// The worker's media socket until its thread takes it.
        var media: UDPSocket?
    }

    /// Binds the media sockets, starts `count` worker threads and waits until each has bound
    /// its sockets and is running. Throws the first worker's error (a port in use, the TLS
    /// files), after stopping those that started.
    public init(configuration: RoomServerConfiguration, options: RoomServer.Options = RoomServer.Options(),
                count: Int) throws(SystemError) {
        precondition((1 ... Self.most).contains(count))
        self.count = count
        let sockets = try UDPSocket.steeredGroup(bindingTo: configuration.media, count: count)
        workers = sockets.map { socket in
            let worker = Worker()
            worker.media = socket
            return worker
        }
        // The front door (worker 0) last: by the time it accepts, every worker it may hand a
        // connection to is running.
        for index in (0 ..< count).reversed() {
            let worker = workers[index]
            do {
                let thread = try NativeThread(name: "roomserver-w\(index)") { [self] in
                    self.runWorker(index, worker: worker, configuration: configuration, options: options)
                }
                threads.withLock { $0.append(thread) }
            } catch {
                stopAll()
                throw error
            }
            // One at a time: an error (worker 0's listeners, say) stops those already running.
            while true {
                let result = worker.state.withLock { $0.started }
                if case .failure(let error)? = result {
                    stopAll()
                    throw error
                }
                if result != nil { break }
                sleepMilliseconds(1)
            }
        }
    }

    private func runWorker(_ index: Int, worker: Worker, configuration: RoomServerConfiguration, options: RoomServer.Options) {
        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            worker.state.withLock { $0.started = .failure(error) }
            return
        }
        let server = RoomServer(configuration: configuration, loop: loop, options: options, workers: self, index: index,
                                media: worker.media.take())
        worker.server = server
        do {
            try server.start()
        } catch {
            worker.state.withLock { $0.started = .failure(error) }
            return
        }
        if index == 0 {
            bound.withLock { $0 = (server.signallingAddresses, server.plainSignallingAddresses, server.mediaAddress) }
        }
        worker.state.withLock {
            $0.remote = loop.remote
            $0.started = .success(())
        }
        do { try loop.run() } catch { Log.error("roomserver: worker \(index): event loop: \(error)") }
        worker.state.withLock { $0.stopped = true }
    }

    /// Runs `body` with worker `index`'s server on its thread (later, in posting order). Not
    /// run once that worker has stopped; false when it has not started.
    @discardableResult
    public func perform(on index: Int, _ body: @escaping @Sendable (RoomServer) -> Void) -> Bool {
        let worker = workers[index]
        guard let remote = worker.state.withLock({ $0.remote }) else { return false }
        remote.post {
            guard let server = worker.server else { return }
            body(server)
        }
        return true
    }

    /// The worker that holds the room `key`: FNV-1a of its application and name, modulo
    /// `count` — the same in every run, so a test (or an operator reading logs) can tell.
    public func worker(for key: RoomKey) -> Int {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in key.app.utf8 + [0] + key.name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        return Int(hash % UInt64(count))
    }

    /// The bound TLS and plain signalling addresses and the media address (worker 0's).
    public var signallingAddresses: [SocketAddress] { bound.withLock { $0.signalling } }
    public var plainSignallingAddresses: [SocketAddress] { bound.withLock { $0.plain } }
    public var mediaAddress: SocketAddress? { bound.withLock { $0.media } }

    /// Every worker takes the configuration (`RoomServer.reload`); `completion` gets worker 0's
    /// report (all apply the same file) with any worker's refusals, on worker 0's thread.
    public func reload(_ configuration: RoomServerConfiguration, completion: @escaping @Sendable (RoomServer.ReloadReport) -> Void) {
        let refusals = Mutex<[String]>([])
        let remaining = Atomic<Int>(count)
        let first = Mutex<RoomServer.ReloadReport?>(nil)
        for index in 0 ..< count {
            perform(on: index) { server in
                let report = server.reload(configuration)
                if index == 0 { first.withLock { $0 = report } } else { refusals.withLock { $0 += report.refused } }
                if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                    guard var report = first.withLock({ $0 }) else { return }
                    for refusal in refusals.withLock({ $0 }) where !report.refused.contains(refusal) { report.refused.append(refusal) }
                    completion(report)
                }
            }
        }
    }

    /// Every worker closes its rooms (`RoomServer.shutdown`) and stops its loop; then `wait()`
    /// returns.
    public func shutdown() {
        for index in 0 ..< count {
            perform(on: index) { server in
                let loop = server.loop
                server.shutdown { loop.stop() }
            }
        }
    }

    /// Waits for every worker thread to end (after `shutdown`).
    public func wait() {
        for thread in threads.withLock({ $0 }) { thread.join() }
    }

    private func stopAll() {
        for worker in workers { worker.state.withLock { $0.remote }?.stop() }
        wait()
    }

    /// The workers' statistics and per-application figures, summed. Call after `wait()` (each
    /// server's figures are read on the calling thread once its loop has ended).
    public func totals() -> (statistics: RoomServerStatistics, tenants: [String: TenantStatistics]) {
        var statistics = RoomServerStatistics()
        var tenants: [String: TenantStatistics] = [:]
        for worker in workers {
            guard worker.state.withLock({ $0.stopped }), let server = worker.server else { continue }
            statistics.add(server.statistics)
            for (app, figures) in server.tenantStatistics { tenants[app, default: TenantStatistics()].add(figures) }
        }
        return (statistics, tenants)
    }
}
