import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem

// The server's records of who is where: a seat (`Participant`: its SSRC, keys, media address,
// budgets, sequence rebasing and loss reports), its SRTP sessions (`ParticipantCrypto`), and a room
// (`RoomState`: the `Room` state machine, its members in join order, retired SSRCs) under its
// tenant-scoped `RoomKey`. The records hold state only; the server's extensions in the other
// RoomServer*.swift files act on them.

extension RoomServer {
    final class Participant {
        let id: RoomParticipantID
        let room: RoomState
        let ssrc: UInt32
        /// Replaced when a new connection resumes the seat: the old connection's key dies with it.
        var mediaKey: MediaKey
        /// Its SRTP keys and sessions (nil when `media.srtp = no`), replaced with the media key.
        var crypto: ParticipantCrypto?
        /// Forwarded sequence numbers continue across a resume and across the packets the room
        /// chose not to forward (see `rebaseSequence`).
        var sequenceOffset: UInt16 = 0
        var lastForwardedSequence: UInt16?
        /// Set when the seat is resumed: a restarted client numbers from anywhere again, and
        /// each listener's SRTP stream for this SSRC would refuse numbers behind the ones it saw
        /// (replay), so the next packet's number is rebased to follow the last one forwarded.
        /// Set too when a packet is dropped on purpose (not forwarded, not allowed to publish):
        /// the listeners see no gap there, only the timestamps' jump, as after DTX. Loss
        /// between the publisher and the server still shows as a gap everywhere else.
        var rebaseSequence = false
        var claims: RoomTokenClaims
        weak var session: Session?
        /// When its connection was lost (monotonic ms), while it waits out the reconnect grace
        /// with its seat kept and nothing said to the room; nil while connected.
        var lostAtMs: Int64?
        var replayGuard = BindingReplayGuard()
        /// Bindings this participant may still send (`BindingBudget.perParticipant`).
        var bindingBudget = BindingBudget(BindingBudget.perParticipant)
        /// App messages it may still send (`limits.app_messages_*`).
        var messageBudget: AppMessageBudget
        var mediaAddress: SocketAddress?
        var lastMediaMs: Int64 = 0
        /// What this publisher may still have forwarded (`limits.media_*_per_second`).
        var mediaAllowance = MediaAllowance()
        /// Last RFC 6464 level received, for `active_speakers`.
        var level: UInt8 = 127
        /// The reason text of a kick in progress, for `removed.message`.
        var kickMessage: String?
        /// What each receiver last reported about this participant's stream (permille lost,
        /// when), and the `receiver_loss` last sent to it.
        var lossByReceiver: [RoomParticipantID: (permille: UInt16, atMs: Int64)] = [:]
        var lossSent: (permille: UInt16, atMs: Int64)?

        init(id: RoomParticipantID, room: RoomState, ssrc: UInt32, mediaKey: MediaKey, crypto: ParticipantCrypto?,
             claims: RoomTokenClaims, messageLimit: AppMessageBudget.Limit) {
            messageBudget = AppMessageBudget(messageLimit)
            self.id = id
            self.room = room
            self.ssrc = ssrc
            self.mediaKey = mediaKey
            self.crypto = crypto
            self.claims = claims
        }
    }

    /// One participant session's SRTP: its keys (sent in `welcome`), the session that
    /// unprotects what it publishes and the one that protects what is forwarded to it.
    final class ParticipantCrypto {
        let keys: MediaEncryption
        let uplink: SRTPSession
        let downlink: SRTPSession

        init() throws(SRTPError) {
            keys = .random()
            uplink = try SRTPSession(key: keys.uplink, direction: .unprotect)
            downlink = try SRTPSession(key: keys.downlink, direction: .protect)
        }
    }

    final class RoomState {
        let key: RoomKey
        var room: Room
        /// Participants in join order, for the media fan-out.
        var members: [Participant] = []
        var emptySinceMs: Int64?
        /// SSRCs of participants who left this room: never given to anyone in it again. Each
        /// listener's downlink key outlives the senders it heard, so a reused SSRC would reuse
        /// that key's nonces (SSRC + packet index) and let a listener take a departed sender's
        /// recorded packets for the newcomer's. 4 bytes (and the set's overhead) per departure,
        /// for the room's life.
        var retiredSSRCs: Set<UInt32> = []
        /// App messages the room may still carry, whoever sends them (`limits.room_app_*`).
        var messageBudget: AppMessageBudget
        /// This room's share of its application's figures (`tenantStatistics`): one room opened.
        var statistics: TenantStatistics = { var s = TenantStatistics(); s.roomsOpened = 1; return s }()

        init(key: RoomKey, room: Room, messageLimit: AppMessageBudget.Limit) {
            self.key = key
            self.room = room
            messageBudget = AppMessageBudget(messageLimit)
        }
    }
}

/// A room's identity on the server: the application (tenant) whose key signed the token, and
/// the room's name within it. Rooms, their participants, resumes and moderation never cross it.
public struct RoomKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var app: String
    public var name: String

    public init(app: String, name: String) {
        self.app = app
        self.name = name
    }

    public static func < (a: RoomKey, b: RoomKey) -> Bool { (a.app, a.name) < (b.app, b.name) }

    /// For logs: `"lobby" (app "acme")`, both quoted as they came.
    public var description: String { "\"\(name)\" (app \"\(app)\")" }
}
