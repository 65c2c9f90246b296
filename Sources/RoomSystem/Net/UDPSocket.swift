import Glibc

/// A non-blocking UDP socket (IPv4 or IPv6; IPv6 sockets are IPv6-only). Sending and
/// receiving allocate nothing: the caller passes the buffer and the source address comes back
/// inline in a `Datagram`. Loop-thread only once registered with `onReadable`.
public final class UDPSocket {
    public struct Datagram: Sendable {
        /// Bytes stored in the buffer.
        public let count: Int
        public let source: SocketAddress
        /// The datagram was larger than the buffer; the rest was discarded.
        public let truncated: Bool
    }

    public private(set) var fileDescriptor: Int32
    public let localAddress: SocketAddress
    public var localPort: UInt16 { localAddress.port ?? 0 }
    private var loop: EventLoop?
    private var registration: EventLoop.IORegistration?

    /// Binds to `address` (port 0: an ephemeral port, see `localPort`).
    public init(bindingTo address: SocketAddress, reuseAddress: Bool = false) throws(SystemError) {
        guard address.family == .ipv4 || address.family == .ipv6 else {
            throw SystemError("UDP socket \(address): not an IP address")
        }
        let fd = try SocketSupport.openBound(address, type: Int32(SOCK_DGRAM.rawValue), reuseAddress: reuseAddress, what: "udp \(address)")
        fileDescriptor = fd
        localAddress = SocketSupport.localAddress(fd)
    }

    private init(adopting fd: Int32) {
        fileDescriptor = fd
        localAddress = SocketSupport.localAddress(fd)
    }

    /// `count` sockets bound to one address (an SO_REUSEPORT group), each datagram steered to
    /// one of them by its RTP SSRC or binding participant id modulo `count`
    /// (`clinux_reuseport_steer_by_ssrc`): socket n gets exactly the media of the participants
    /// whose numbers are n modulo `count`, so a worker thread owning socket n owns their
    /// media without any hand-over in user space. One socket, no SO_REUSEPORT, when `count` is 1.
    ///
    /// SO_REUSEPORT would also let another process of the same user bind the port and take a
    /// share of the datagrams; so the port is first bound once without it, which fails
    /// (EADDRINUSE, named in the error) when anything holds it.
    public static func steeredGroup(bindingTo address: SocketAddress, count: Int) throws(SystemError) -> [UDPSocket] {
        guard count > 1 else { return [try UDPSocket(bindingTo: address)] }
        guard address.family == .ipv4 || address.family == .ipv6 else {
            throw SystemError("UDP socket \(address): not an IP address")
        }
        let type = Int32(SOCK_DGRAM.rawValue)
        if address.port != 0 {
            let probe = try SocketSupport.openBound(address, type: type, reuseAddress: false, what: "udp \(address)")
            Glibc.close(probe)
        }
        var sockets: [UDPSocket] = []
        var bound = address
        for _ in 0 ..< count {
            let fd = try SocketSupport.openBound(bound, type: type, reuseAddress: false, reusePort: true, what: "udp \(bound)")
            let socket = UDPSocket(adopting: fd)
            if sockets.isEmpty { bound = socket.localAddress }
            sockets.append(socket)
        }
        if LinuxAPI.steerReusePortGroup(sockets[0].fileDescriptor, groups: count) != 0 {
            throw .errno("SO_ATTACH_REUSEPORT_CBPF on \(bound)")
        }
        return sockets
    }

    deinit { close() }

    /// Asks the kernel for larger socket buffers. A server that receives bursts (every client's
    /// keepalive at once, a stall of its loop) loses datagrams at the default ~200 KiB. The
    /// kernel caps the request at net.core.rmem_max/wmem_max; returns the sizes granted.
    @discardableResult
    public func setBufferSizes(receive: Int, send: Int) -> (receive: Int, send: Int) {
        var r = Int32(receive), w = Int32(send)
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_RCVBUF, &r, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_SNDBUF, &w, socklen_t(MemoryLayout<Int32>.size))
        var gotR: Int32 = 0, gotW: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fileDescriptor, SOL_SOCKET, SO_RCVBUF, &gotR, &len)
        len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fileDescriptor, SOL_SOCKET, SO_SNDBUF, &gotW, &len)
        return (Int(gotR), Int(gotW))
    }

    /// Receives one datagram, or nil when none is waiting.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Datagram? {
        var source = SocketAddress()
        while true {
            let n = retryingEINTR { source.fill { recvfrom(fileDescriptor, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC), $0, $1) } }
            if n >= 0 {
                return Datagram(count: min(n, buffer.count), source: source, truncated: n > buffer.count)
            }
            let e = errno
            // ECONNREFUSED: an ICMP error from an earlier send; it is consumed, go on.
            if e == ECONNREFUSED { continue }
            if Errno(rawValue: e).isWouldBlock { return nil }
            throw .errno("recvfrom on \(localAddress)", e)
        }
    }

    /// Sends one datagram. Returns false when the socket buffer is full (the datagram is
    /// dropped — media is loss-tolerant); throws for other errors (unreachable, too large).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress) throws(SystemError) -> Bool {
        let n = retryingEINTR { destination.withSockAddr { sendto(fileDescriptor, bytes.baseAddress, bytes.count, 0, $0, $1) } }
        if n >= 0 { return true }
        let e = errno
        if Errno(rawValue: e).isWouldBlock || e == ENOBUFS { return false }
        throw .errno("sendto \(destination)", e)
    }

    @discardableResult
    public func send(_ bytes: [UInt8], to destination: SocketAddress) throws(SystemError) -> Bool {
        var result: Result<Bool, SystemError> = .success(false)
        bytes.withUnsafeBytes { raw in result = Result { () throws(SystemError) -> Bool in try send(raw, to: destination) } }
        return try result.get()
    }

    /// Calls `handler` on the loop thread whenever datagrams are waiting; it should `receive`
    /// until nil (or a bounded number: level-triggered, it is called again). The loop holds
    /// the socket weakly.
    public func onReadable(loop: EventLoop, _ handler: @escaping (UDPSocket) -> Void) throws(SystemError) {
        if let registration, let old = self.loop { old.deregister(registration) }
        self.loop = loop
        registration = try loop.register(fileDescriptor, interest: .readable) { [weak self] _ in
            guard let self else { return }
            handler(self)
        }
    }

    public func close() {
        guard fileDescriptor >= 0 else { return }
        if let registration, let loop { loop.deregister(registration) }
        registration = nil
        Glibc.close(fileDescriptor)
        fileDescriptor = -1
    }
}
