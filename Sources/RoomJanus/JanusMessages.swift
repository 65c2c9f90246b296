import FoundationEssentials
import RoomJSON

/// A request to Janus's core API (https://janus.conf.meetecho.com/docs/rest.html — the same
/// JSON over HTTP and WebSocket): `create` a session, `attach` a plugin handle, send a plugin
/// `message` (with an SDP in `jsep`), `trickle` candidates, `keepalive`, `detach`, `destroy`.
/// Over WebSocket every request names its session and handle in the body.
public struct JanusRequest: Encodable, Sendable, Equatable {
    public var janus: String
    public var transaction: String
    public var session_id: UInt64?
    public var handle_id: UInt64?
    public var plugin: String?
    public var body: JanusPluginRequest?
    public var jsep: JanusJSEP?
    public var candidate: JanusTrickle?
    /// The API secret or a stored token, when the deployment sets `api_secret`/`token_auth`.
    public var apisecret: String?
    public var token: String?

    public init(_ janus: String, transaction: String, session: UInt64? = nil, handle: UInt64? = nil) {
        self.janus = janus
        self.transaction = transaction
        self.session_id = session
        self.handle_id = handle
    }

    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding these plain structs cannot fail (no floats, no custom encoders).
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }
}

/// The body of a plugin `message`: the AudioBridge's and VideoRoom's requests the appliance
/// uses (join, configure, publish, start, leave). Fields left nil are not sent.
public struct JanusPluginRequest: Encodable, Sendable, Equatable {
    public var request: String
    public var room: UInt64?
    /// The room's PIN, when it has one.
    public var pin: String?
    public var display: String?
    /// AudioBridge: join muted / mute or unmute (the mute button, the stage).
    public var muted: Bool?
    /// VideoRoom: "publisher" or "subscriber".
    public var ptype: String?
    public var audio: Bool?
    public var video: Bool?
    /// VideoRoom subscriber: the feeds (publisher ids) to receive.
    public var streams: [Feed]?
    /// AudioBridge: the room's Opus settings for this participant.
    public var codec: String?
    /// AudioBridge moderation (`mute`, `unmute`, `kick`): the participant acted on.
    public var id: UInt64?
    /// AudioBridge moderation: the room's secret (what makes the sender a moderator).
    public var secret: String?

    public struct Feed: Encodable, Sendable, Equatable {
        public var feed: UInt64
        public init(feed: UInt64) { self.feed = feed }
    }

    public init(request: String, room: UInt64? = nil) {
        self.request = request
        self.room = room
    }
}

/// An SDP offer or answer as JSEP carries it.
public struct JanusJSEP: Codable, Sendable, Equatable {
    public var type: String
    public var sdp: String
    public init(type: String, sdp: String) {
        self.type = type
        self.sdp = sdp
    }
}

/// One trickled candidate, or the end of them (`completed`).
public struct JanusTrickle: Codable, Sendable, Equatable {
    public var candidate: String?
    public var sdpMid: String?
    public var sdpMLineIndex: Int?
    public var completed: Bool?

    public init(candidate: String, mid: String, index: Int) {
        self.candidate = candidate
        self.sdpMid = mid
        self.sdpMLineIndex = index
    }

    public static let end = JanusTrickle(completed: true)
    private init(completed: Bool) { self.completed = completed }
}

/// Anything Janus sends: responses (`success`, `ack`, `error`) matched by transaction, and
/// events (`event` from a plugin, `webrtcup`, `media`, `hangup`, `slowlink`, `detached`,
/// `timeout`, `trickle`). Unknown fields are ignored; unknown kinds reach the caller by name.
public struct JanusMessage: Decodable, Sendable, Equatable {
    public var janus: String
    public var transaction: String?
    public var session_id: UInt64?
    /// The handle an event is about.
    public var sender: UInt64?
    /// `success` to create/attach: the new session or handle id.
    public var data: IDData?
    public var error: JanusError?
    public var plugindata: PluginData?
    public var jsep: JanusJSEP?
    public var candidate: JanusTrickle?
    /// `hangup`: why; `media`: which kind.
    public var reason: String?
    public var type: String?
    /// `media`: whether Janus is receiving that kind from us.
    public var receiving: Bool?
    /// `slowlink`: lost packets Janus reports.
    public var lost: Int?

    public struct IDData: Decodable, Sendable, Equatable { public var id: UInt64 }

    public struct PluginData: Decodable, Sendable, Equatable {
        public var plugin: String
        public var data: PluginEvent
    }

    /// The error Janus's core reports (e.g. 458 no such session, 459 no such handle).
    public struct JanusError: Decodable, Sendable, Equatable, CustomStringConvertible {
        public var code: Int
        public var reason: String
        public var description: String { "Janus error \(code): \(reason)" }
    }

    public static func decode(_ text: String) throws(JanusDecodingError) -> JanusMessage {
        do {
            return try JSONValue.decodeStrictly(JanusMessage.self, from: Array(text.utf8))
        } catch {
            let message = switch error {
            case .duplicateKey(let key): "key \"\(key)\" twice in one object"
            case .refused(let strict): strict.message
            case .decoding(let error): String(describing: error)
            }
            throw JanusDecodingError(message: String(message.prefix(200)))
        }
    }
}

public struct JanusDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { "unreadable message from Janus: \(message)" }
}

/// A plugin's event (`plugindata.data`): the AudioBridge's and VideoRoom's fields the appliance
/// reads. `audiobridge`/`videoroom` names the event ("joined", "event", "talking", …).
public struct PluginEvent: Decodable, Sendable, Equatable {
    public var audiobridge: String?
    public var videoroom: String?
    public var room: UInt64?
    /// Our participant id (AudioBridge `joined`) or the publisher id (VideoRoom `joined`).
    public var id: UInt64?
    public var participants: [Participant]?
    /// VideoRoom: the publishers in the room (their feeds to subscribe to).
    public var publishers: [Participant]?
    /// A participant that left (AudioBridge `leaving`, VideoRoom `leaving`/`unpublished`).
    public var leaving: UInt64?
    public var unpublished: UInt64?
    /// AudioBridge: a participant a moderator kicked (sent to everyone, the kicked one included).
    public var kicked: UInt64?
    public var error_code: Int?
    public var error: String?
    /// VideoRoom `configured: "ok"`, AudioBridge `result: "ok"`.
    public var configured: String?
    public var result: String?

    public struct Participant: Decodable, Sendable, Equatable {
        public var id: UInt64
        public var display: String?
        public var muted: Bool?
        /// AudioBridge: the participant's PeerConnection is up.
        public var setup: Bool?
        /// AudioBridge with talking events on.
        public var talking: Bool?
    }

    /// The plugin's error, if this event is one.
    public var failure: (code: Int, reason: String)? { error_code.map { ($0, error ?? "") } }
}
