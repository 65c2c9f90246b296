import CRoomDTLS
import RoomSDP

/// The C string CRoomDTLS wrote into `buffer` (its error texts, the profile name).
private func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Why DTLS could not be set up or did not complete.
public struct DTLSError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { "DTLS: " + message }
}

/// The appliance's DTLS certificate for WebRTC: self-signed, made at start, identified to the
/// peer only by its fingerprint in the SDP (RFC 8827: the signalling vouches for it).
public final class DTLSIdentity: @unchecked Sendable {
    let raw: OpaquePointer
    public let fingerprint: DTLSFingerprint

    public init() throws(DTLSError) {
        var err = [CChar](repeating: 0, count: 256)
        guard let raw = roomdtls_identity_generate(&err, err.count) else {
            throw DTLSError(message: text(err))
        }
        self.raw = raw
        var digest = [UInt8](repeating: 0, count: 32)
        roomdtls_identity_fingerprint(raw, &digest)
        fingerprint = DTLSFingerprint(algorithm: "sha-256", digest: digest)
    }

    deinit { roomdtls_identity_free(raw) }
}

/// One DTLS-SRTP handshake (RFC 5764) over datagrams the caller carries: the ICE agent's
/// socket sends what `takeOutgoing` gives and feeds `receive` what arrives with a first byte of
/// 20-63 (RFC 7983). On completion the peer's certificate must match the fingerprint its SDP
/// announced — that is what ties the keys to the signalling — and the SRTP master keys for both
/// directions come out of the TLS exporter. Event-loop thread only.
public final class DTLSEndpoint {
    public enum Role: Sendable, Equatable {
        /// Sends the ClientHello (`a=setup:active` on our side).
        case client
        case server
    }

    /// SRTP master key + salt per direction, as libsrtp takes them (key, then salt).
    public struct SRTPKeys: Sendable, Equatable {
        /// OpenSSL's profile name: "SRTP_AEAD_AES_128_GCM" or "SRTP_AES128_CM_SHA1_80".
        public var profile: String
        public var local: [UInt8]
        public var remote: [UInt8]
    }

    public enum State: Sendable, Equatable {
        case handshaking
        case connected(SRTPKeys)
        case failed(String)
    }

    /// What we offer, best first: AEAD-GCM (what roomd's SRTP runs), then the profile every
    /// WebRTC stack has.
    public static let profiles = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80"

    public private(set) var state = State.handshaking
    public let role: Role
    private let raw: OpaquePointer
    private let identity: DTLSIdentity
    private let expectedPeer: DTLSFingerprint
    private var outgoing: [[UInt8]] = []
    private var deadline: UInt64?

    /// `initialTimeoutMs`: the first retransmission (doubling to 10 s). OpenSSL's own default
    /// is 1 s; a lost first flight would then hold the call's audio back that long.
    public init(identity: DTLSIdentity, role: Role, expectedPeer: DTLSFingerprint, mtu: Int = 1200,
                initialTimeoutMs: Int = 100) throws(DTLSError) {
        var err = [CChar](repeating: 0, count: 256)
        guard let raw = roomdtls_new(identity.raw, role == .client ? 1 : 0, Self.profiles, Int32(mtu), Int32(initialTimeoutMs),
                                     &err, err.count) else {
            throw DTLSError(message: text(err))
        }
        self.raw = raw
        self.identity = identity
        self.role = role
        self.expectedPeer = expectedPeer
    }

    deinit { roomdtls_free(raw) }

    /// The client sends its ClientHello; a server waits.
    public func start(now: UInt64) { step(now: now) }

    /// A DTLS datagram from the peer. Also after the handshake: the side that sent the last
    /// flight learns it was lost only when the peer's previous flight arrives again, and answers
    /// it with a retransmission (RFC 6347 §4.2.4); alerts (the peer closing) arrive here too.
    public func receive(_ datagram: UnsafeRawBufferPointer, now: UInt64) {
        guard let base = datagram.baseAddress else { return }
        if case .failed = state { return }
        _ = roomdtls_feed(raw, base.assumingMemoryBound(to: UInt8.self), datagram.count)
        step(now: now)
    }

    /// Retransmits the last flight when its timer ran out. (OpenSSL keeps that timer on the real
    /// clock; `now` only decides when to ask it.)
    public func tick(now: UInt64) {
        guard case .handshaking = state, let deadline, now >= deadline else { return }
        _ = roomdtls_handle_timeout(raw)
        collect(now: now)
    }

    public var nextDeadline: UInt64? { if case .handshaking = state { deadline } else { nil } }

    public func takeOutgoing() -> [[UInt8]] {
        defer { outgoing.removeAll(keepingCapacity: true) }
        return outgoing
    }

    private func step(now: UInt64) {
        let rc = roomdtls_step(raw)
        collect(now: now)
        if rc == Int32(ROOMDTLS_FAILED) {
            state = .failed(String(cString: roomdtls_error(raw)))
        } else if rc == Int32(ROOMDTLS_DONE), case .handshaking = state {
            finish()
        }
    }

    private func collect(now: UInt64) {
        var buffer = [UInt8](repeating: 0, count: 1500)
        while true {
            let n = roomdtls_take(raw, &buffer, buffer.count)
            if n <= 0 { break }
            outgoing.append(Array(buffer[0 ..< Int(n)]))
        }
        let ms = roomdtls_timeout_ms(raw)
        deadline = ms >= 0 ? now + UInt64(ms) : nil
    }

    private func finish() {
        var peer = [UInt8](repeating: 0, count: 32)
        guard roomdtls_peer_fingerprint(raw, &peer) == 0 else { state = .failed("the peer presented no certificate"); return }
        guard expectedPeer.algorithm == "sha-256", peer == expectedPeer.digest else {
            state = .failed("the peer's certificate is \(DTLSFingerprint(algorithm: "sha-256", digest: peer)), not the \(expectedPeer) its SDP announced")
            return
        }
        var name = [CChar](repeating: 0, count: 64)
        guard roomdtls_srtp_profile(raw, &name, name.count) == 0 else { state = .failed("no SRTP profile was negotiated"); return }
        let profile = text(name)
        let (keyLength, saltLength) = profile == "SRTP_AEAD_AES_128_GCM" ? (16, 12) : (16, 14)
        var material = [UInt8](repeating: 0, count: 2 * (keyLength + saltLength))
        guard roomdtls_export_srtp_keys(raw, &material, material.count) == 0 else { state = .failed("the key export failed"); return }
        // RFC 5764 §4.2: client key, server key, client salt, server salt.
        let clientKey = material[0 ..< keyLength], serverKey = material[keyLength ..< 2 * keyLength]
        let clientSalt = material[2 * keyLength ..< 2 * keyLength + saltLength]
        let serverSalt = material[(2 * keyLength + saltLength)...]
        let client = Array(clientKey + clientSalt), server = Array(serverKey + serverSalt)
        state = .connected(SRTPKeys(profile: profile, local: role == .client ? client : server,
                                    remote: role == .client ? server : client))
    }
}
