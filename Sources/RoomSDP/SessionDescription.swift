/// A session description (SDP, RFC 8866) as WebRTC exchanges it (JSEP, RFC 8829): the lines
/// kept in order, attributes by name, so an offer from a browser or a media server can be read
/// and answered without this code knowing every attribute they send.
///
/// Only what the appliance's one audio stream needs gets typed accessors (`ICECandidate`,
/// `DTLSFingerprint`, `OpusAudioNegotiation`); everything else passes through as text.
public struct SessionDescription: Sendable, Equatable {
    /// `o=` origin: username, session id, version, network type, address type, address.
    public var origin: Origin
    /// `s=`; WebRTC sends "-".
    public var sessionName: String
    /// Session-level `c=` (rare in WebRTC: browsers put it on each media section).
    public var connection: String?
    /// `t=`; WebRTC sends "0 0".
    public var timing: String
    /// Session-level `a=` lines, in order.
    public var attributes: [SDPAttribute]
    /// `m=` sections, in order: their index is what `a=mid` and BUNDLE refer to in JSEP.
    public var media: [MediaSection]

    public struct Origin: Sendable, Equatable {
        public var username: String
        /// Decimal digits; kept as text because browsers send 64-bit values and some servers
        /// more digits than fit in one.
        public var sessionID: String
        public var sessionVersion: String
        public var networkType: String
        public var addressType: String
        public var address: String

        public init(username: String = "-", sessionID: String, sessionVersion: String = "2",
                    networkType: String = "IN", addressType: String = "IP4", address: String = "127.0.0.1") {
            self.username = username
            self.sessionID = sessionID
            self.sessionVersion = sessionVersion
            self.networkType = networkType
            self.addressType = addressType
            self.address = address
        }
    }

    public init(origin: Origin, sessionName: String = "-", connection: String? = nil, timing: String = "0 0",
                attributes: [SDPAttribute] = [], media: [MediaSection] = []) {
        self.origin = origin
        self.sessionName = sessionName
        self.connection = connection
        self.timing = timing
        self.attributes = attributes
        self.media = media
    }

    /// The first session-level attribute named `name` (its value; "" for a flag).
    public func attribute(_ name: String) -> String? { attributes.first { $0.name == name }.map { $0.value ?? "" } }

    /// The mids of the first `a=group:BUNDLE` line, in order (empty without one).
    public var bundleMids: [String] {
        for a in attributes where a.name == "group" {
            let words = (a.value ?? "").split(separator: " ").map(String.init)
            if words.first == "BUNDLE" { return Array(words.dropFirst()) }
        }
        return []
    }
}

/// One `a=` line: `a=name` (a flag) or `a=name:value`.
public struct SDPAttribute: Sendable, Equatable {
    public var name: String
    public var value: String?

    public init(_ name: String, _ value: String? = nil) {
        self.name = name
        self.value = value
    }
}

/// One `m=` section with the lines that follow it.
public struct MediaSection: Sendable, Equatable {
    /// "audio", "video", "application".
    public var kind: String
    /// 0 means the section is rejected (an answer's way of saying no, RFC 8866 §5.14).
    public var port: Int
    /// "UDP/TLS/RTP/SAVPF" for WebRTC media.
    public var proto: String
    /// Payload types (for RTP), in preference order.
    public var formats: [String]
    public var connection: String?
    public var attributes: [SDPAttribute]

    public init(kind: String, port: Int, proto: String, formats: [String], connection: String? = nil,
                attributes: [SDPAttribute] = []) {
        self.kind = kind
        self.port = port
        self.proto = proto
        self.formats = formats
        self.connection = connection
        self.attributes = attributes
    }

    public var isRejected: Bool { port == 0 }

    /// The first attribute named `name` (its value; "" for a flag).
    public func attribute(_ name: String) -> String? { attributes.first { $0.name == name }.map { $0.value ?? "" } }
    /// The values of every attribute named `name`, in order.
    public func attributes(_ name: String) -> [String] { attributes.filter { $0.name == name }.map { $0.value ?? "" } }
    public func has(_ name: String) -> Bool { attributes.contains { $0.name == name } }

    /// `a=mid`.
    public var mid: String? { attribute("mid") }

    /// The direction attribute; sendrecv when none is given (RFC 8866 §6.7).
    public var direction: MediaDirection {
        for a in attributes { if let d = MediaDirection(rawValue: a.name) { return d } }
        return .sendrecv
    }
}

/// Which way media flows, from the point of view of the description's author.
public enum MediaDirection: String, Sendable, Equatable, CaseIterable {
    case sendrecv, sendonly, recvonly, inactive

    public var sends: Bool { self == .sendrecv || self == .sendonly }
    public var receives: Bool { self == .sendrecv || self == .recvonly }

    public init(sends: Bool, receives: Bool) {
        switch (sends, receives) {
        case (true, true): self = .sendrecv
        case (true, false): self = .sendonly
        case (false, true): self = .recvonly
        case (false, false): self = .inactive
        }
    }

    /// What an answerer may say to an offer in this direction, given what it wants: it can only
    /// send what the offerer receives and receive what it sends (RFC 3264 §6.1).
    public func answer(wantingToSend send: Bool, receive: Bool) -> MediaDirection {
        MediaDirection(sends: send && receives, receives: receive && sends)
    }
}
