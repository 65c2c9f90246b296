import Glibc
import RoomSystem
import XCTest

final class DatagramTests: XCTestCase {
    private func roundTrip(_ loopback: SocketAddress) throws {
        let loop = try EventLoop()
        let a = try UDPSocket(bindingTo: loopback)
        let b = try UDPSocket(bindingTo: loopback)
        XCTAssertNotEqual(a.localPort, 0)
        var got: [(String, SocketAddress)] = []
        var buffer = [UInt8](repeating: 0, count: 1500)
        try b.onReadable(loop: loop) { socket in
            while let d = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
                got.append((String(decoding: buffer[0..<d.count], as: UTF8.self), d.source))
            }
        }
        XCTAssertTrue(try a.send(Array("one".utf8), to: b.localAddress))
        XCTAssertTrue(try a.send(Array("two".utf8), to: b.localAddress))
        XCTAssertTrue(try runLoop(loop) { got.count == 2 })
        XCTAssertEqual(got.map(\.0), ["one", "two"])
        XCTAssertEqual(got[0].1, a.localAddress)
        XCTAssertEqual(got[0].1.hashValue, a.localAddress.hashValue)
        XCTAssertNotEqual(got[0].1, b.localAddress)
        let peers: Set<SocketAddress> = [got[0].1, got[1].1, a.localAddress]
        XCTAssertEqual(peers.count, 1)

        // Reply to the source address just received, as the server does.
        var reply = [UInt8](repeating: 0, count: 16)
        XCTAssertTrue(try b.send(Array("back".utf8), to: got[0].1))
        var d: UDPSocket.Datagram?
        XCTAssertTrue(try runLoop(loop) {
            d = try? reply.withUnsafeMutableBytes { try a.receive(into: $0) }
            return d != nil
        })
        XCTAssertEqual(String(decoding: reply[0..<d!.count], as: UTF8.self), "back")
        XCTAssertEqual(d!.source, b.localAddress)
        XCTAssertFalse(d!.truncated)
    }

    func testUDPRoundTripIPv4() throws {
        try roundTrip(.ipv4Loopback(port: 0))
    }

    func testUDPRoundTripIPv6() throws {
        do { _ = try UDPSocket(bindingTo: .ipv6Loopback(port: 0)) } catch { throw XCTSkip("no IPv6 loopback: \(error)") }
        try roundTrip(.ipv6Loopback(port: 0))
    }

    func testOversizeDatagramIsReportedTruncatedAndEmptySocketGivesNil() throws {
        let a = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let b = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        var small = [UInt8](repeating: 0, count: 8)
        XCTAssertNil(try small.withUnsafeMutableBytes { try b.receive(into: $0) })
        try a.send([UInt8](repeating: 7, count: 100), to: b.localAddress)
        var d: UDPSocket.Datagram?
        for _ in 0..<100 where d == nil {
            d = try small.withUnsafeMutableBytes { try b.receive(into: $0) }
            if d == nil { sleepMilliseconds(5) }
        }
        XCTAssertEqual(d?.count, 8)
        XCTAssertEqual(d?.truncated, true)
    }

    func testReceiveAllocatesNothingWhenTheProbeIsLoaded() throws {
        let probe = AllocationProbe()
        guard probe.isAvailable else { throw XCTSkip("libroomallocprobe.so not preloaded") }
        XCTAssertTrue(probe.verify(), "the probe counts")
        // The audio thread's wake-up: no allocation either.
        let loop = try EventLoop()
        let source = try EventSignalSource(loop: loop) { _ in }
        let signal = source.signal
        signal.signal()
        let beforeSignals = probe.threadAllocations()
        for _ in 0..<100 { signal.signal() }
        XCTAssertEqual(probe.threadAllocations() - beforeSignals, 0)
        let a = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let b = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let payload = [UInt8](repeating: 1, count: 200)
        var buffer = [UInt8](repeating: 0, count: 1500)
        let destination = b.localAddress
        var received = 0
        for round in 0..<2 { // the first round warms up
            for _ in 0..<50 { try payload.withUnsafeBytes { _ = try a.send($0, to: destination) } }
            sleepMilliseconds(20)
            let before = probe.threadAllocations()
            try buffer.withUnsafeMutableBytes { raw in
                while let d = try b.receive(into: raw) { received += d.count }
            }
            let allocations = probe.threadAllocations() - before
            if round == 1 { XCTAssertEqual(allocations, 0) }
        }
        XCTAssertEqual(received, 100 * 200)
    }

    /// A batch leaves in order, in more than one sendmmsg when it is larger than one call takes
    /// (64), and a datagram the kernel refuses (an IPv6 destination on an IPv4 socket) is dropped
    /// alone: the ones after it are still sent.
    func testSendBatchDeliversInOrderAndSkipsARefusedDatagram() throws {
        let loop = try EventLoop()
        let a = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let b = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let c = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        var got: [ObjectIdentifier: [UInt8]] = [:]
        var buffer = [UInt8](repeating: 0, count: 64)
        for socket in [b, c] {
            try socket.onReadable(loop: loop) { socket in
                while let d = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
                    XCTAssertEqual(d.count, 1)
                    XCTAssertEqual(d.source, a.localAddress)
                    got[ObjectIdentifier(socket), default: []].append(buffer[0])
                }
            }
        }
        let payloads = (0 ..< 100).map { UInt8($0) }
        let batch = UDPSendBatch(capacity: 100)
        payloads.withUnsafeBytes { bytes in
            for i in 0 ..< 100 {
                let destination: SocketAddress = i == 40 ? .ipv6Loopback(port: b.localPort) : i % 2 == 0 ? b.localAddress : c.localAddress
                XCTAssertTrue(batch.append(UnsafeRawBufferPointer(rebasing: bytes[i ..< i + 1]), to: destination))
            }
            XCTAssertTrue(batch.isFull)
            XCTAssertFalse(batch.append(UnsafeRawBufferPointer(rebasing: bytes[0 ..< 1]), to: b.localAddress))
            XCTAssertEqual(a.send(batch), 99)
        }
        XCTAssertEqual(batch.count, 0)
        XCTAssertTrue(try runLoop(loop) { got[ObjectIdentifier(b), default: []].count + got[ObjectIdentifier(c), default: []].count == 99 })
        XCTAssertEqual(got[ObjectIdentifier(b)], payloads.filter { $0 % 2 == 0 && $0 != 40 })
        XCTAssertEqual(got[ObjectIdentifier(c)], payloads.filter { $0 % 2 == 1 })
    }
}
