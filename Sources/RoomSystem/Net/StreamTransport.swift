/// What the signalling client and server need of a connection, so the same code runs over a
/// plain `StreamConnection` and over TLS (RoomTLS's `TLSConnection`, which wraps one).
/// Loop-thread only, like `StreamConnection`, whose events, read and write results and
/// backpressure rules (all-or-nothing writes within `outgoingLimit`) every conformer keeps.
public protocol StreamTransport: AnyObject {
    /// Events on the loop thread; `.connected` comes once the connection can carry the
    /// caller's bytes (for TLS: after the handshake and the certificate checks).
    func setEventHandler(_ handler: ((StreamConnection.Event) -> Void)?)
    var peerAddress: SocketAddress { get }
    var isOpen: Bool { get }
    /// Bytes accepted by `write` and not yet handed to the kernel.
    var bufferedByteCount: Int { get }
    var outgoingLimit: Int { get }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> StreamConnection.ReadResult
    @discardableResult func write(_ bytes: [UInt8]) -> StreamConnection.WriteResult
    func close()
    func closeAfterFlush()
    /// Moving to another loop's thread: `leaveLoop` on the old one (false: it cannot move, close
    /// it), then `joinLoop` on the new one; nothing touches it in between. See StreamConnection.
    func leaveLoop() -> Bool
    func joinLoop(_ loop: EventLoop) throws(SystemError)
}

extension StreamConnection: StreamTransport {
    public func setEventHandler(_ handler: ((StreamConnection.Event) -> Void)?) {
        self.handler = handler.map { h in { _, event in h(event) } }
    }
}
