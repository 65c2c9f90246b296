/// The signalling protocol version sent in the first exchange (docs/protocol.md).
public let roomProtocolVersion = 1
