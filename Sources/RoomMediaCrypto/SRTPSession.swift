import CSRTP
import CSRTPOpenSSLCipher
import RoomMedia

/// One direction of SRTP (RFC 3711) with AEAD_AES_128_GCM (RFC 7714) for every SSRC sent or
/// received under one master key: roomd's uplink (it protects, the server unprotects) or a
/// participant's downlink (the server protects every stream it forwards to that participant,
/// the participant unprotects them). libsrtp2 does the work: it derives the session keys,
/// keeps the rollover counter and the replay window per SSRC, and encrypts in place.
///
/// RTCP goes through the same session (`protectRTCP`, `unprotectRTCP`: SRTCP with the RTCP keys
/// libsrtp derives from the same master key), as DTLS-SRTP keys one direction for both.
///
/// Packets are transformed in place in the caller's buffer; nothing here allocates per packet.
/// (libsrtp itself allocates once per new SSRC, when it clones the session's stream template;
/// docs/security.md says what Debian's NSS-backed libsrtp2 does inside each packet.)
///
/// Not thread-safe (libsrtp sessions are not): each session belongs to one thread, which in
/// roomd and roomserver is the network thread, never the audio thread.
public final class SRTPSession {
    public enum Direction: Sendable {
        /// Encrypts and tags outgoing packets.
        case protect
        /// Checks and decrypts incoming packets, refusing replays.
        case unprotect
    }

    /// What became of the packets given to this session. Each packet counts once.
    public struct Statistics: Sendable, Equatable {
        public var protected = 0
        public var unprotected = 0
        /// Refused: the tag did not verify (forged, corrupted, or another key).
        public var authenticationFailures = 0
        /// Refused: this SSRC's packet index was seen already or is behind the replay window.
        public var replays = 0
        /// Refused for anything else (too short to be SRTP, libsrtp out of memory...).
        public var otherFailures = 0
        /// SRTCP packets protected and unprotected (their refusals count in the failures above).
        public var rtcpProtected = 0
        public var rtcpUnprotected = 0
        public init() {}
    }

    public let direction: Direction
    public let profile: SRTPProfile
    public private(set) var statistics = Statistics()
    private var session: srtp_t?

    /// Bytes a protected packet is longer than the RTP packet (the GCM tag).
    public static let overhead = SRTPMasterKey.tagSize
    /// Room `protect` needs after the packet (libsrtp may write up to its largest trailer).
    public static let trailerRoom = Int(SRTP_MAX_TRAILER_LEN)
    /// Room `protectRTCP` needs after the packet: the SRTCP index word, then up to libsrtp's
    /// largest trailer (libsrtp writes the tag before the index, RFC 7714 §9).
    public static let rtcpTrailerRoom = Int(SRTP_MAX_TRAILER_LEN) + 4
    /// Bytes a protected RTCP packet is longer than the RTCP packet: the GCM tag and the
    /// E flag with the 31-bit SRTCP index.
    public static let rtcpOverhead = SRTPMasterKey.tagSize + 4
    /// Packets per SSRC the receiver remembers for replay checking: 1 s of 20 ms audio is 50, but
    /// a forwarded stream can arrive reordered after a burst; the window is cheap (a bitmap).
    public static let replayWindow = 1024

    /// One direction of a SIP call's SRTP, keyed by SDES (`a=crypto`, RFC 4568) with one of the
    /// suites calls use; `keyAndSalt` is the inline key's bytes (`SRTPProfile.keyAndSaltLength`).
    public init(profile: SRTPProfile, keyAndSalt: [UInt8], direction: Direction) throws(SRTPError) {
        guard keyAndSalt.count == profile.keyAndSaltLength else {
            throw SRTPError(status: srtp_err_status_bad_param, during: "\(profile.sdesName) key of \(keyAndSalt.count) bytes (wants \(profile.keyAndSaltLength))")
        }
        try SRTPLibrary.ready()
        self.direction = direction
        self.profile = profile
        var created: srtp_t?
        let protect: Int32 = direction == .protect ? 1 : 0
        let status = keyAndSalt.withUnsafeBufferPointer { k in
            switch profile {
            case .aeadAES128GCM: roomd_srtp_create_gcm128(&created, k.baseAddress, protect, UInt(Self.replayWindow))
            case .aesCM128HMACSHA1_80: roomd_srtp_create_aes_cm128(&created, k.baseAddress, 1, protect, UInt(Self.replayWindow))
            case .aesCM128HMACSHA1_32: roomd_srtp_create_aes_cm128(&created, k.baseAddress, 0, protect, UInt(Self.replayWindow))
            }
        }
        guard status == srtp_err_status_ok, let created else { throw SRTPError(status: status, during: "srtp_create") }
        session = created
    }

    /// - Parameter key: the master key and salt, `SRTPMasterKey.size` bytes.
    public init(key: SRTPMasterKey, direction: Direction) throws(SRTPError) {
        try SRTPLibrary.ready()
        self.direction = direction
        profile = .aeadAES128GCM
        var created: srtp_t?
        let status = key.bytes.withUnsafeBufferPointer { k in
            roomd_srtp_create_gcm128(&created, k.baseAddress, direction == .protect ? 1 : 0, UInt(Self.replayWindow))
        }
        guard status == srtp_err_status_ok, let created else { throw SRTPError(status: status, during: "srtp_create") }
        session = created
    }

    deinit {
        if let session { srtp_dealloc(session) }
    }

    /// Encrypts the RTP packet in `buffer[0..<length]` in place and appends its tag; returns the
    /// SRTP length, or nil (counted) when libsrtp refuses it. `buffer` must have
    /// `trailerRoom` bytes beyond `length`.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Int? {
        guard case .done(let n) = transform(buffer, length: length, .protect, minimum: 12, room: Self.trailerRoom, srtp_protect) else {
            return nil
        }
        statistics.protected += 1
        return n
    }

    /// The outcome of `unprotect`.
    public enum Outcome: Equatable, Sendable {
        /// The packet verified and was decrypted in place; the RTP packet is this many bytes.
        case rtp(length: Int)
        case authenticationFailure
        case replay
        case malformed
    }

    /// Verifies and decrypts the SRTP packet in `buffer[0..<length]` in place. A refused packet
    /// is counted under its reason; its bytes are then undefined.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Outcome {
        switch transform(buffer, length: length, .unprotect, minimum: 12 + profile.rtpOverhead, room: 0, srtp_unprotect) {
        case .done(let n):
            statistics.unprotected += 1
            return .rtp(length: n)
        case .refused(let outcome):
            return outcome
        }
    }

    /// Encrypts the compound RTCP packet in `buffer[0..<length]` in place (SRTCP, RFC 3711
    /// §3.4 with RFC 7714 §9: the first 8 bytes stay readable and authenticated, the rest is
    /// encrypted, then the tag and the E flag with the SRTCP index are appended); returns the
    /// SRTCP length, or nil (counted) when refused. `buffer` must have `rtcpTrailerRoom` bytes
    /// beyond `length`. The keys are the RTCP ones libsrtp derives from the same master key
    /// (labels 3-5), the stream is the packet's sender SSRC.
    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Int? {
        guard case .done(let n) = transform(buffer, length: length, .protect, minimum: 8, room: Self.rtcpTrailerRoom, srtp_protect_rtcp) else {
            return nil
        }
        statistics.rtcpProtected += 1
        return n
    }

    /// The outcome of `unprotectRTCP`.
    public enum RTCPOutcome: Equatable, Sendable {
        /// The packet verified and was decrypted in place; the RTCP packet is this many bytes.
        case rtcp(length: Int)
        case authenticationFailure
        /// This source's SRTCP index was seen already (or is behind libsrtp's window).
        case replay
        case malformed
    }

    /// Verifies and decrypts the SRTCP packet in `buffer[0..<length]` in place. A refused packet
    /// is counted under its reason; its bytes are then undefined.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> RTCPOutcome {
        switch transform(buffer, length: length, .unprotect, minimum: 8 + Self.rtcpOverhead, room: 0, srtp_unprotect_rtcp) {
        case .done(let n):
            statistics.rtcpUnprotected += 1
            return .rtcp(length: n)
        case .refused(.authenticationFailure): return .authenticationFailure
        case .refused(.replay): return .replay
        case .refused: return .malformed
        }
    }

    /// libsrtp2's version string ("libsrtp2 2.5.0"), for benchmark and diagnostic output.
    public static var libraryVersion: String { String(cString: srtp_get_version_string()) }

    /// Forgets `ssrc`'s stream (rollover counter, replay window): the next packet of that SSRC
    /// starts a new one. For a sender whose sequence restarted behind what was sent.
    public func forget(ssrc: UInt32) {
        guard let session else { return }
        _ = roomd_srtp_remove_ssrc(session, ssrc)
    }

    private enum Transformed { case done(Int), refused(Outcome) }

    /// One libsrtp call in place on `buffer[0..<length]` — RTP or RTCP, either way — with the
    /// checks they share: this session's direction, at least `minimum` bytes, `room` bytes free
    /// after them (for the tag and trailer a protect appends). A refusal is counted.
    private func transform(_ buffer: UnsafeMutableRawBufferPointer, length: Int, _ required: Direction, minimum: Int, room: Int,
                           _ call: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t) -> Transformed {
        guard let session, direction == required, let base = buffer.baseAddress, length >= minimum, buffer.count - length >= room else {
            statistics.otherFailures += 1
            return .refused(.malformed)
        }
        var n = Int32(length)
        let status = call(session, base, &n)
        guard status == srtp_err_status_ok else { return .refused(count(status)) }
        return .done(Int(n))
    }

    private func count(_ status: srtp_err_status_t) -> Outcome {
        switch status {
        case srtp_err_status_auth_fail:
            statistics.authenticationFailures += 1
            return .authenticationFailure
        case srtp_err_status_replay_fail, srtp_err_status_replay_old:
            statistics.replays += 1
            return .replay
        default:
            statistics.otherFailures += 1
            return .malformed
        }
    }
}

/// libsrtp's one-time global set-up, run once before the first session: its crypto kernel
/// (srtp_init), then AES-128-GCM replaced by the OpenSSL one (CSRTPOpenSSLCipher), which
/// allocates nothing per packet. Should the replacement be refused (libsrtp runs known-answer
/// tests on it first), the library's own GCM stays in use: slower, allocating, still correct.
public enum SRTPLibrary {
    private static let setUp: (status: srtp_err_status_t, openSSL: Bool) = {
        let status = srtp_init()
        guard status == srtp_err_status_ok else { return (status, false) }
        return (status, roomd_srtp_use_openssl_gcm() == 0)
    }()

    /// Sets libsrtp up now (programs call it at start, so the first join does not pay for it);
    /// sessions call it too.
    public static func ready() throws(SRTPError) {
        guard setUp.status == srtp_err_status_ok else { throw SRTPError(status: setUp.status, during: "srtp_init") }
    }

    /// Which AES-GCM does the work: "openssl" (the replacement) or "libsrtp2" (its built-in
    /// backend; Debian's is NSS).
    public static var gcmBackend: String { setUp.openSSL ? "openssl" : "libsrtp2" }
}

/// libsrtp refused to set a session up.
public struct SRTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let operation: String

    init(status: srtp_err_status_t, during operation: String) {
        self.status = Int(status.rawValue)
        self.operation = operation
    }

    public var description: String { "libsrtp2 \(operation) failed with status \(status)" }
}
