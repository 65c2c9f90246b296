import RoomMedia
import RoomMediaCrypto
import RoomSystem

/// What the offer/answer of a call settled for its media, as `CallMediaSession` acts on it:
/// where to send, which codec under which payload type, DTMF's payload type, the SDES keys, and
/// which way media flows (a call on hold sends or receives nothing).
public struct CallMediaParameters: Sendable {
    public var remote: SocketAddress
    public var codec: AudioCodec
    public var payloadType: UInt8
    /// RFC 4733 `telephone-event`, nil when the far end did not accept it.
    public var telephoneEventPayloadType: UInt8?
    /// SRTP keyed by SDES: the profile, this side's key (protects what we send) and the far
    /// end's (unprotects what we receive). Nil: plain RTP (only where configured).
    public var srtp: SDESKeys?
    public var sends: Bool
    public var receives: Bool

    public struct SDESKeys: Sendable {
        public var profile: SRTPProfile
        public var local: [UInt8]
        public var remote: [UInt8]

        public init(profile: SRTPProfile, local: [UInt8], remote: [UInt8]) {
            self.profile = profile
            self.local = local
            self.remote = remote
        }
    }

    public init(remote: SocketAddress, codec: AudioCodec, payloadType: UInt8, telephoneEventPayloadType: UInt8? = nil,
                srtp: SDESKeys? = nil, sends: Bool = true, receives: Bool = true) {
        self.remote = remote
        self.codec = codec
        self.payloadType = payloadType
        self.telephoneEventPayloadType = telephoneEventPayloadType
        self.srtp = srtp
        self.sends = sends
        self.receives = receives
    }
}
