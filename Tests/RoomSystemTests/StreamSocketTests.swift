import Glibc
import RoomSystem
import RoomTestSupport
import XCTest

final class StreamSocketTests: XCTestCase {
    func testTCPEchoRoundTripThroughTheLoop() throws {
        let loop = try EventLoop()
        let server = try EchoServer(loop: loop, address: .ipv4Loopback(port: 0))
        XCTAssertNotEqual(server.listener.localPort, 0)

        var connected = false
        var received: [UInt8] = []
        let client = try TCPConnection.connect(to: .ipv4Loopback(port: server.listener.localPort), loop: loop) { c, event in
            switch event {
            case .connected: connected = true
            case .readable: drain(c, into: &received)
            case .closed(let error): XCTFail("client closed: \(error)")
            case .drained: break
            }
        }
        // Written before the connect completes: queued, then flushed. Large enough to need
        // several partial writes through the buffer.
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        XCTAssertEqual(client.write(payload), .accepted)
        XCTAssertTrue(try runLoop(loop) { received.count >= payload.count })
        XCTAssertTrue(connected)
        XCTAssertEqual(received, payload)
        XCTAssertEqual(client.peerAddress, .ipv4Loopback(port: server.listener.localPort))
        XCTAssertEqual(server.connections.values.first?.peerAddress.host, "127.0.0.1")

        client.close()
        XCTAssertTrue(try runLoop(loop) { server.connections.isEmpty }, "server saw end of stream")
    }

    /// `leaveLoop` / `joinLoop` (roomserver hands a joined connection to its room's worker):
    /// what was queued to send still goes, what arrived meanwhile is read on the new loop.
    func testAConnectionMovesToAnotherLoopWithNothingLost() throws {
        let first = try EventLoop(), second = try EventLoop()
        var accepted: StreamConnection?
        let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: first, outgoingLimit: 8 << 20) { accepted = $0 }
        var toClient: [UInt8] = []
        let client = try TCPConnection.connect(to: .ipv4Loopback(port: listener.localPort), loop: first) { c, event in
            if case .readable = event { drain(c, into: &toClient) }
        }
        client.isReadingPaused = true  // so the server's big write stays partly queued
        XCTAssertTrue(try runLoop(first) { accepted != nil && client.isConnected })
        let server = try XCTUnwrap(accepted)
        var toServer: [UInt8] = []
        server.handler = { c, event in if case .readable = event { drain(c, into: &toServer) } }
        client.write(Array("one".utf8))
        XCTAssertTrue(try runLoop(first) { toServer.count == 3 })

        let big = (0 ..< 4_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        XCTAssertEqual(server.write(big), .accepted)
        XCTAssertGreaterThan(server.bufferedByteCount, 0, "the kernel took it all: nothing queued to move")
        client.write(Array("two".utf8))
        XCTAssertTrue(server.leaveLoop())
        try server.joinLoop(second)
        client.isReadingPaused = false
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while (toClient.count < big.count || toServer.count < 6) && monotonicNanoseconds() < deadline {
            _ = try first.runOnce(timeout: .milliseconds(1))
            _ = try second.runOnce(timeout: .milliseconds(1))
        }
        XCTAssertEqual(String(decoding: toServer, as: UTF8.self), "onetwo")
        XCTAssertEqual(toClient.count, big.count)
        XCTAssertTrue(toClient == big)

        server.close()
        XCTAssertFalse(server.leaveLoop(), "a closed connection does not move")
    }

    func testTCPOverIPv6() throws {
        let loop = try EventLoop()
        let server: EchoServer
        do { server = try EchoServer(loop: loop, address: .ipv6Loopback(port: 0)) } catch {
            throw XCTSkip("no IPv6 loopback: \(error)")
        }
        var received: [UInt8] = []
        let client = try TCPConnection.connect(to: .ipv6Loopback(port: server.listener.localPort), loop: loop) { c, event in
            if case .readable = event { drain(c, into: &received) }
        }
        client.write("hello over v6")
        XCTAssertTrue(try runLoop(loop) { received.count == 13 })
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "hello over v6")
        XCTAssertEqual(server.connections.values.first?.peerAddress.host, "::1")
    }

    func testManyConnectionsAtOnce() throws {
        let loop = try EventLoop()
        let server = try EchoServer(loop: loop, address: .ipv4Loopback(port: 0))
        let count = 200
        var replies = [[UInt8]](repeating: [], count: count)
        var clients: [StreamConnection] = []
        for i in 0..<count {
            let client = try TCPConnection.connect(to: .ipv4Loopback(port: server.listener.localPort), loop: loop) { c, event in
                if case .readable = event { drain(c, into: &replies[i]) }
            }
            client.write("client \(i)\n")
            clients.append(client)
        }
        XCTAssertTrue(try runLoop(loop, seconds: 10) {
            (0..<count).allSatisfy { replies[$0].count == "client \($0)\n".utf8.count }
        })
        for i in 0..<count { XCTAssertEqual(String(decoding: replies[i], as: UTF8.self), "client \(i)\n") }
        XCTAssertEqual(server.accepted, count)
        XCTAssertEqual(server.connections.count, count)
        clients.removeAll() // dropping a connection closes it
        XCTAssertTrue(try runLoop(loop) { server.connections.isEmpty })
        XCTAssertEqual(loop.registrationCount, 1, "only the listener is left")
    }

    func testPeerThatNeverReadsTriggersBackpressureNotUnboundedMemory() throws {
        let loop = try EventLoop()
        let limit = 256 * 1024
        var serverSide: StreamConnection?
        var drainedEvents = 0
        let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop, outgoingLimit: limit) { c in
            c.handler = { _, event in if case .drained = event { drainedEvents += 1 } }
            serverSide = c
        }
        let client = try TCPConnection.connect(to: .ipv4Loopback(port: listener.localPort), loop: loop)
        client.isReadingPaused = true // paused while connecting: connect must still complete
        XCTAssertTrue(try runLoop(loop) { serverSide != nil && client.isConnected })
        let server = try XCTUnwrap(serverSide)

        // The client never reads: the kernel buffers fill, then ours, then writes are refused.
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        var accepted = 0
        var result = StreamConnection.WriteResult.accepted
        while accepted < 512 << 20 {
            result = server.write(chunk)
            if result != .accepted { break }
            accepted += chunk.count
        }
        XCTAssertEqual(result, .backpressure)
        XCTAssertLessThanOrEqual(server.bufferedByteCount, limit)
        XCTAssertGreaterThan(server.bufferedByteCount, 0)
        let buffered = server.bufferedByteCount
        XCTAssertEqual(server.write(chunk), .backpressure, "refused whole, buffer unchanged")
        XCTAssertEqual(server.bufferedByteCount, buffered)
        XCTAssertTrue(server.isOpen, "the caller decides to cut it off")

        // Once the peer reads, the buffer drains and the server hears about it.
        var received = 0
        client.handler = { c, event in
            if case .readable = event {
                var sink: [UInt8] = []
                drain(c, into: &sink)
                received += sink.count
            }
        }
        client.isReadingPaused = false
        XCTAssertTrue(try runLoop(loop, seconds: 10) { drainedEvents == 1 && received == accepted })
        XCTAssertEqual(server.bufferedByteCount, 0)
        XCTAssertEqual(server.write(chunk), .accepted)
    }

    func testConnectToAClosedPortReportsClosedWithTheReason() throws {
        let loop = try EventLoop()
        let probe = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop) { _ in }
        let port = probe.localPort
        probe.close()
        var failure: SystemError?
        var client: StreamConnection? = try TCPConnection.connect(to: .ipv4Loopback(port: port), loop: loop) { _, event in
            if case .closed(let error) = event { failure = error }
        }
        XCTAssertTrue(try runLoop(loop) { failure != nil })
        XCTAssertTrue(failure!.description.contains("refused"), failure!.description)
        XCTAssertTrue(failure!.description.contains("127.0.0.1:\(port)"), failure!.description)
        XCTAssertFalse(client!.isOpen)
        client = nil
        XCTAssertEqual(loop.registrationCount, 0)
    }

    func testCloseAfterFlushSendsQueuedBytesThenHangsUp() throws {
        let loop = try EventLoop()
        var received: [UInt8] = []
        var serverSide: StreamConnection?
        let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop) { c in
            c.write("error: bye\n")
            c.closeAfterFlush()
            serverSide = c
        }
        let client = try TCPConnection.connect(to: .ipv4Loopback(port: listener.localPort), loop: loop) { c, event in
            if case .readable = event { drain(c, into: &received) }
        }
        XCTAssertTrue(try runLoop(loop) { !client.isOpen })
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "error: bye\n")
        XCTAssertEqual(serverSide?.isOpen, false)
    }

    func testHalfClosedPeerGetsItsReplyWithoutTheLoopSpinning() throws {
        let loop = try EventLoop()
        let reply = [UInt8](repeating: 0x42, count: 8 << 20) // more than the socket buffers hold
        var serverSide: StreamConnection?
        let listener = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop, outgoingLimit: 16 << 20) { c in
            serverSide = c
            c.handler = { c, event in
                guard case .readable = event else { return }
                var request: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 1024)
                while case .bytes(let n)? = try? buffer.withUnsafeMutableBytes({ try c.read(into: $0) }) {
                    request.append(contentsOf: buffer[0..<n])
                }
                if case .endOfStream? = try? buffer.withUnsafeMutableBytes({ try c.read(into: $0) }) {
                    c.write(reply)
                    c.closeAfterFlush()
                }
            }
        }
        let client = try TCPConnection.connect(to: .ipv4Loopback(port: listener.localPort), loop: loop)
        XCTAssertTrue(try runLoop(loop) { client.isConnected && serverSide != nil })
        client.isReadingPaused = true
        client.write("request")
        shutdown(client.fileDescriptor, Int32(SHUT_WR)) // like `nc -N`: request sent, then EOF
        XCTAssertTrue(try runLoop(loop) { (serverSide?.bufferedByteCount ?? 0) > 0 })
        // The client does not read yet: the server waits to write and must not busy-loop.
        var callbacks = 0
        let end = monotonicNanoseconds() + 100_000_000
        while monotonicNanoseconds() < end { callbacks += try loop.runOnce(timeout: .milliseconds(10)) }
        XCTAssertLessThan(callbacks, 50, "the loop spun while waiting to write")
        var received = 0
        client.handler = { c, event in
            if case .readable = event { var sink: [UInt8] = []; drain(c, into: &sink); received += sink.count }
        }
        client.isReadingPaused = false
        XCTAssertTrue(try runLoop(loop, seconds: 10) { !client.isOpen })
        XCTAssertEqual(received, reply.count)
        XCTAssertEqual(serverSide?.isOpen, false)
    }

    /// Issue 10: a connection that stopped reading (a `roomctl events` subscriber whose input
    /// ended) and whose peer then went away entirely was woken for EPOLLHUP on every loop turn.
    func testPeerGoneWhileReadingIsPausedClosesInsteadOfSpinning() throws {
        // A Unix socket, like the control socket: when its peer closes, both directions are
        // shut at once (EPOLLHUP); a TCP peer's FIN shuts only our reading side.
        let tmp = makeTemporaryDirectory("hup")
        defer { tmp.remove() }
        let path = tmp.path + "/control.sock"
        let loop = try EventLoop()
        var serverSide: StreamConnection?
        var readableEvents = 0
        var closedWith: SystemError?
        let listener = try UnixListener(path: path, loop: loop) { c in
            serverSide = c
            c.handler = { c, event in
                switch event {
                case .readable:
                    // Like the control server with a subscriber: at end of input it stops
                    // reading but keeps the connection, to send events.
                    readableEvents += 1
                    var buffer = [UInt8](repeating: 0, count: 256)
                    while case .bytes? = try? buffer.withUnsafeMutableBytes({ try c.read(into: $0) }) {}
                    if case .endOfStream? = try? buffer.withUnsafeMutableBytes({ try c.read(into: $0) }) {
                        c.isReadingPaused = true
                    }
                case .closed(let error): closedWith = error
                default: break
                }
            }
        }
        let client = try UnixConnection.connect(to: SocketAddress(unixPath: path), loop: loop)
        XCTAssertTrue(try runLoop(loop) { client.isConnected && serverSide != nil })
        client.write("subscribe\n")
        XCTAssertTrue(try runLoop(loop) { readableEvents > 0 })
        client.close()   // Ctrl-C on the subscriber
        var callbacks = 0
        let end = monotonicNanoseconds() + 100_000_000
        while monotonicNanoseconds() < end { callbacks += try loop.runOnce(timeout: .milliseconds(10)) }
        XCTAssertLessThan(callbacks, 20, "the loop spun on the hang-up")
        XCTAssertEqual(serverSide?.isOpen, false, "the hung-up connection is closed")
        XCTAssertNotNil(closedWith, "and its owner is told")
        XCTAssertLessThanOrEqual(readableEvents, 2)
        listener.close()
    }

    func testUnixSocketWithPeerCredentialsModeAndCleanup() throws {
        let tmp = makeTemporaryDirectory("unix")
        defer { tmp.remove() }
        let path = tmp.path + "/control.sock"
        let loop = try EventLoop()
        var serverSide: UnixConnection?
        var serverReceived: [UInt8] = []
        let listener = try UnixListener(path: path, mode: 0o660, loop: loop) { c in
            serverSide = c
            c.handler = { c, event in if case .readable = event { drain(c, into: &serverReceived) } }
        }
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o660)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)

        let client = try UnixConnection.connect(to: SocketAddress(unixPath: path), loop: loop)
        let request = "{\"id\":1,\"cmd\":\"status\"}\n"
        client.write(request)
        XCTAssertTrue(try runLoop(loop) { serverReceived.count == request.utf8.count })
        XCTAssertEqual(String(decoding: serverReceived, as: UTF8.self), request)
        let credentials = try XCTUnwrap(serverSide).peerCredentials()
        XCTAssertEqual(credentials.uid, getuid())
        XCTAssertEqual(credentials.gid, getgid())
        XCTAssertEqual(credentials.pid, getpid())
        XCTAssertEqual(try client.peerCredentials().uid, getuid())

        // A second daemon must not steal a live socket.
        XCTAssertThrowsError(try UnixListener(path: path, loop: loop) { _ in }) {
            XCTAssertTrue("\($0)".contains("another process is listening"), "\($0)")
        }
        listener.close()
        XCTAssertFalse(Files.exists(path), "close removes the socket file")
    }

    func testUnixListenerReplacesAStaleSocketFileButNotOtherFiles() throws {
        let tmp = makeTemporaryDirectory("stale")
        defer { tmp.remove() }
        let loop = try EventLoop()
        // A crashed daemon leaves its socket file behind: make one and close it without unlink.
        let stale = tmp.path + "/stale.sock"
        let leftover = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(stale.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(leftover, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        close(leftover) // bound, never listened, file stays: connecting to it is refused
        XCTAssertTrue(Files.exists(stale))
        let listener = try UnixListener(path: stale, loop: loop) { _ in }
        XCTAssertTrue(Files.exists(stale))
        listener.close()

        let regular = tmp.path + "/not-a-socket"
        try Files.writeAtomically(regular, Array("x".utf8))
        XCTAssertThrowsError(try UnixListener(path: regular, loop: loop) { _ in }) {
            XCTAssertTrue("\($0)".contains("not a socket"), "\($0)")
        }
        XCTAssertTrue(Files.exists(regular))
    }
}
