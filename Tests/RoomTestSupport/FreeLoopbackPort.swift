import Glibc

public struct NoFreePort: Error {}

/// A TCP port on 127.0.0.1 nobody listens on now (bound to port 0 and released): for a helper
/// process that must be told its port. A random port in the ephemeral range can be in use.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    sin.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &sin) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else { throw NoFreePort() }
    return Int(UInt16(bigEndian: sin.sin_port))
}
