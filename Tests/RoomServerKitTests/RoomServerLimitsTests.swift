import Foundation
import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// What one peer may take from the server (issue 11): connections that never say hello are
/// closed at a deadline whatever else they send, one address cannot hold every slot, and one
/// publisher's flood is cut before every listener pays a copy.
final class RoomServerLimitsTests: XCTestCase {
    /// A connection that keeps sending pings (each answered `not_joined`, which used to reset
    /// its silence timer forever) is closed at the hello deadline; one that joins in time stays.
    func testNoHelloWithinTheDeadlineIsClosedWhateverElseArrives() throws {
        var limits = RoomServerLimits()
        limits.helloTimeoutMs = 400
        let h = try ServerHarness(limits: limits) { $0.tickIntervalMs = 50 }
        let idle = try h.connect()
        let member = try h.join("alice")
        var sent = 0
        let closed = h.run(seconds: 3) {
            if sent < 40 { idle.send(.ping(t: Int64(sent))); sent += 1 }
            return idle.closed
        }
        XCTAssertTrue(closed, "closed at the deadline despite \(sent) pings")
        XCTAssertEqual(idle.lastError()?.code, .notJoined)
        XCTAssertTrue(idle.lastError()?.message.contains("no hello") == true, "\(String(describing: idle.lastError()))")
        XCTAssertEqual(h.server.statistics.helloTimeouts, 1)
        h.settle(seconds: 0.6)
        XCTAssertFalse(member.closed, "a joined participant is not touched")
    }

    /// Issue 27: accepting a connection scanned every session (and formatted each peer's
    /// address), so 4000 silent connections from 40 addresses cost the server 6.3 s of CPU and a
    /// real join 3.5 s. Now accepting is constant time: 4000 silent connections from 40 loopback
    /// addresses, then a join, both timed on this thread (which turns the server's loop too).
    /// Loose bounds here; the figures are printed, and `scripts/bench server` measures the
    /// released build.
    func testThousandsOfSilentConnectionsCostLittleAndAJoinStaysQuick() throws {
        var limits = RoomServerLimits()
        limits.maxConnections = 10_000
        let h = try ServerHarness(limits: limits)
        let quietJoin = try timed { _ = try h.join("first", bind: false) }
        var silent: [Int32] = []
        defer { for fd in silent { close(fd) } }
        let cpuBefore = processCPUSeconds()
        let t0 = Date()
        for i in 0 ..< 4000 {
            silent.append(try rawConnect(from: "127.0.1.\(i % 40 + 1)", port: h.signallingPort))
            if i % 50 == 49 { h.run(seconds: 0.005) { false } }
        }
        XCTAssertTrue(h.run(seconds: 20) { h.server.connectionCount >= 4001 }, "accepted: \(h.server.connectionCount)")
        let acceptCPU = processCPUSeconds() - cpuBefore, acceptWall = Date().timeIntervalSince(t0)
        let loadedJoin = try timed { _ = try h.join("second", bind: false) }
        print("4000 silent connections: accepted in \(acceptWall) s, \(acceptCPU) s of CPU (server and test); join \(quietJoin * 1000) ms quiet, \(loadedJoin * 1000) ms with them open")
        XCTAssertLessThan(acceptCPU, 4, "accepting 4000 connections (the test's connects included)")
        XCTAssertLessThan(loadedJoin, 0.5, "a join among 4000 silent connections")
        XCTAssertEqual(h.server.statistics.connectionsRefused, 0)
    }

    private func timed(_ body: () throws -> Void) throws -> Double {
        let t0 = Date()
        try body()
        return Date().timeIntervalSince(t0)
    }

    private func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// A blocking TCP connect from `source` (a loopback address: each counts as a host).
    private func rawConnect(from source: String, port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let ok = withUnsafePointer(to: &local) { l in
            l.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        } && withUnsafePointer(to: &remote) { r in
            r.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard ok else { close(fd); throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return fd
    }

    /// One address may hold only so many connections that have not joined: the next is closed
    /// at once and counted; once they join, room is made again.
    func testOneAddressCannotHoldEveryUnjoinedSlot() throws {
        var limits = RoomServerLimits()
        limits.maxUnjoinedPerAddress = 3
        let h = try ServerHarness(limits: limits)
        let waiting = try (0 ..< 3).map { _ in try h.connect() }
        h.settle(seconds: 0.2)
        let fourth = try h.connect()
        XCTAssertTrue(h.run(seconds: 2) { fourth.closed }, "the fourth unjoined connection from one address is refused")
        XCTAssertEqual(h.server.statistics.connectionsRefused, 1)
        XCTAssertFalse(waiting.contains { $0.closed })
        // Joining frees the slot: a join from the same address goes through.
        waiting[0].send(.hello(.init(client: "test/1", token: h.token(user: "bob"), role: .audience)))
        XCTAssertTrue(h.run { waiting[0].welcome != nil })
        _ = try h.join("carol")
    }

    /// At capacity the oldest connection that has not joined makes room for the newcomer;
    /// joined participants are never closed for it, and only when every slot is joined is the
    /// newcomer refused.
    func testAtCapacityTheOldestUnjoinedConnectionGivesWay() throws {
        var limits = RoomServerLimits()
        limits.maxConnections = 3
        let h = try ServerHarness(limits: limits)
        let member = try h.join("alice")
        let oldest = try h.connect()
        h.settle(seconds: 0.05)
        let newer = try h.connect()
        h.settle(seconds: 0.1)
        let newcomer = try h.connect()
        XCTAssertTrue(h.run(seconds: 2) { oldest.closed }, "the oldest silent connection gives way")
        XCTAssertEqual(h.server.statistics.connectionsEvicted, 1)
        XCTAssertEqual(h.server.statistics.connectionsRefused, 0)
        XCTAssertFalse(newer.closed)
        XCTAssertFalse(member.closed, "a joined participant is never evicted")
        newcomer.send(.hello(.init(client: "test/1", token: h.token(user: "bob"), role: .audience)))
        XCTAssertTrue(h.run { newcomer.welcome != nil }, "the newcomer joins")
        newer.send(.hello(.init(client: "test/1", token: h.token(user: "carol"), role: .audience)))
        XCTAssertTrue(h.run { newer.welcome != nil })
        // Every slot joined: the next one is refused, nobody is evicted.
        let refused = try h.connect()
        XCTAssertTrue(h.run(seconds: 2) { refused.closed })
        XCTAssertEqual(h.server.statistics.connectionsRefused, 1)
        XCTAssertEqual(h.server.statistics.connectionsEvicted, 1)
        XCTAssertFalse(member.closed || newer.closed || newcomer.closed)
    }

    /// A publisher sending far beyond any codec's rate is forwarded only up to its budget; the
    /// rest is dropped and counted. A normal stream stays untouched.
    func testAFloodingPublisherIsForwardedOnlyUpToItsBudget() throws {
        var limits = RoomServerLimits()
        limits.mediaPacketsPerSecond = 100
        let h = try ServerHarness(limits: limits)
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        // A normal stream (10 ms packets for 0.3 s) is all forwarded.
        for _ in 0 ..< 30 {
            _ = try a.sendRTP()
            h.settle(seconds: 0.01)
        }
        h.settle(seconds: 0.1)
        XCTAssertEqual(h.server.statistics.dropped.rateLimited, 0)
        let before = h.server.statistics.packetsForwarded
        // A flood: 2000 packets at once.
        for _ in 0 ..< 2000 { _ = try a.sendRTP() }
        h.settle(seconds: 0.5)
        let forwarded = h.server.statistics.packetsForwarded - before
        XCTAssertLessThanOrEqual(forwarded, 170, "at most the bucket (100) plus its refill while the flood is read")
        XCTAssertGreaterThan(forwarded, 50, "the budget itself still goes through")
        XCTAssertGreaterThan(h.server.statistics.dropped.rateLimited, 1000, "the rest is dropped and counted")
        XCTAssertLessThanOrEqual(b.datagrams.count, 30 + 170 + 2)
    }

    func testLimitsAreReadFromTheConfigurationAndCheckedNamingTheKey() throws {
        let base = "[server]\nplain_listen = 127.0.0.1:7702\n[keys]\ndev = app:hex:" + String(repeating: "ab", count: 32) + "\n"
        let c = try RoomServerConfiguration.parse(text: base + "[limits]\nhello_timeout_ms = 2500\nmax_unjoined_per_address = 8\n"
                                                  + "media_packets_per_second = 300\n", file: "s.conf")
        XCTAssertEqual(c.limits.helloTimeoutMs, 2500)
        XCTAssertEqual(c.limits.maxUnjoinedPerAddress, 8)
        XCTAssertEqual(c.limits.mediaPacketsPerSecond, 300)
        XCTAssertEqual(c.limits.maxConnections, RoomServerLimits().maxConnections)
        XCTAssertThrowsError(try RoomServerConfiguration.parse(text: base + "[limits]\nhello_timeout_ms = 0\n", file: "s.conf")) {
            XCTAssertTrue("\($0)".contains("limits.hello_timeout_ms") && "\($0)".contains("s.conf:"), "\($0)")
        }
        XCTAssertThrowsError(try RoomServerConfiguration.parse(text: base + "[limits]\nmax_conections = 5\n", file: "s.conf")) {
            XCTAssertTrue("\($0)".contains("max_conections"), "\($0)")
        }
    }
}
