import Glibc
import RoomSystem
import XCTest

/// Turns the loop until `condition` holds or `seconds` pass; returns whether it held.
@discardableResult
func runLoop(_ loop: EventLoop, seconds: Double = 5, until condition: () -> Bool) throws -> Bool {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    while !condition() {
        if monotonicNanoseconds() > deadline { return false }
        try loop.runOnce(timeout: .milliseconds(20))
    }
    return true
}


/// Reads everything available from a connection into `sink`; closes it at end of stream.
func drain(_ connection: StreamConnection, into sink: inout [UInt8]) {
    var buffer = [UInt8](repeating: 0, count: 16384)
    while true {
        let result = try? buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
        switch result {
        case .bytes(let n)?: sink.append(contentsOf: buffer[0..<n])
        case .wouldBlock?: return
        case .endOfStream?, nil: connection.close(); return
        }
    }
}

/// Echoes every byte back; drops connections at end of stream.
final class EchoServer {
    let loop: EventLoop
    var listener: TCPListener!
    var connections: [ObjectIdentifier: StreamConnection] = [:]
    var accepted = 0

    init(loop: EventLoop, address: SocketAddress, outgoingLimit: Int = 1 << 20) throws {
        self.loop = loop
        listener = try TCPListener(address: address, loop: loop, outgoingLimit: outgoingLimit) { [unowned self] connection in
            self.accepted += 1
            self.connections[ObjectIdentifier(connection)] = connection
            connection.handler = { [unowned self] c, event in
                switch event {
                case .readable:
                    var data: [UInt8] = []
                    drain(c, into: &data)
                    if !data.isEmpty { c.write(data) }
                    if !c.isOpen { self.connections[ObjectIdentifier(c)] = nil }
                case .closed:
                    self.connections[ObjectIdentifier(c)] = nil
                case .connected, .drained:
                    break
                }
            }
        }
    }
}
