import CLinux
import Glibc

/// Datagrams gathered to leave in one system call (`UDPSocket.send(_:)`, sendmmsg): a fan-out
/// of one packet to a room's listeners costs one kernel entry instead of one per listener.
/// Holds pointers to the caller's bytes, not copies: they must stay valid and unchanged until the
/// batch is sent. Preallocated; appending and sending allocate nothing. Loop-thread only.
public final class UDPSendBatch {
    public let capacity: Int
    public private(set) var count = 0
    let datagrams: UnsafeMutablePointer<clinux_datagram>
    private let addresses: UnsafeMutablePointer<sockaddr_storage>

    public init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        datagrams = .allocate(capacity: capacity)
        addresses = .allocate(capacity: capacity)
    }

    deinit {
        datagrams.deallocate()
        addresses.deallocate()
    }

    public var isFull: Bool { count == capacity }

    /// Adds a datagram of `bytes` (kept by reference) to `address`. False when the batch is full.
    @discardableResult
    public func append(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) -> Bool {
        guard count < capacity else { return false }
        (addresses + count).pointee = address.storage
        datagrams[count] = clinux_datagram(bytes: bytes.baseAddress, length: UInt(bytes.count),
                                           address: UnsafeRawPointer(addresses + count), address_length: address.length)
        count += 1
        return true
    }

    func removeAll() { count = 0 }
}

extension UDPSocket {
    /// Sends every datagram in `batch` (one sendmmsg per CLINUX_SENDMMSG_MAX) and empties it.
    /// Returns how many were sent. The others were dropped as `send(_:to:)` drops one: a full
    /// socket buffer, or an error for that destination (the kernel stops a batch at a datagram
    /// that fails; it is skipped and the rest go on).
    @discardableResult
    public func send(_ batch: UDPSendBatch) -> Int {
        var next = 0, sent = 0
        while next < batch.count {
            let n = clinux_sendmmsg(fileDescriptor, batch.datagrams + next, UInt32(batch.count - next))
            if n > 0 {
                sent += Int(n)
                next += Int(n)
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                next += 1
            }
        }
        batch.removeAll()
        return sent
    }
}
