import RoomBase
import RoomCrypto
import RoomModel
import RoomProtocol
import RoomSettings
import RoomSystem

/// One signing key of `[keys]`: which application (the token's `app` claim) it belongs to,
/// and the HMAC secret.
public struct RoomServerKey: Sendable, Equatable {
    public var keyID: String
    public var appID: String
    /// Locked in memory and wiped when the last configuration holding it goes (docs/security.md,
    /// "Secrets in memory").
    public var secret: SecretBytes

    public init(keyID: String, appID: String, secret: [UInt8]) {
        self.init(keyID: keyID, appID: appID, secret: SecretBytes(secret))
    }

    public init(keyID: String, appID: String, secret: SecretBytes) {
        self.keyID = keyID
        self.appID = appID
        self.secret = secret
    }

    /// Shortest accepted secret: 256 bits, as RFC 7518 §3.2 asks for HS256.
    public static let minimumSecretBytes = 32
}

/// One key of `[public_keys]`: an Ed25519 public key that verifies EdDSA tokens for one
/// application. The private half stays with whoever mints (`mint-token --signing-key`), so a
/// server that only verifies never holds it, and appliances check placement with the same
/// public key (docs/security.md, "Placement in the token").
public struct RoomServerPublicKey: Sendable, Equatable {
    public var keyID: String
    public var appID: String
    public var key: Ed25519PublicKey
}

/// One row of `[placement]`: the instance a room lives on, which `mint-token` writes into the
/// room's tokens (docs/scaling.md, "Placement in the token").
public struct RoomPlacementEntry: Sendable, Equatable {
    public var backend: TokenPlacement.Backend
    /// `host:port`: roomserver's signalling, or Janus's WebSocket transport.
    public var server: String

    public init(backend: TokenPlacement.Backend, server: String) {
        self.backend = backend
        self.server = server
    }
}

/// `[tls]`: the server's certificate chain (PEM, leaf first) and private key (PEM). Read at
/// start and on every reload (a renewal replaces the files in place).
public struct RoomServerTLSFiles: Sendable, Equatable {
    public var certFile: String
    public var keyFile: String

    public init(certFile: String, keyFile: String) {
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

/// `[limits]`: what one peer may take from the server, so a hostile or broken one on the network
/// cannot lock the others out (issue 11; docs/roomserver.md, "Limits").
public struct RoomServerLimits: Sendable, Equatable {
    /// A connection that has not sent a valid `hello` this long after it was accepted is closed
    /// (anything else it sends, a `ping` answered `not_joined` included, does not extend it).
    public var helloTimeoutMs: Int64 = 5_000
    /// Signalling connections held at once; also kept below the process's file descriptor
    /// limit (raised to its hard limit at start) minus a reserve for the media socket and logs.
    public var maxConnections = 4_096
    /// Connections from one IP address that have not joined yet: a flood from one host is
    /// refused at accept while other hosts still get in. Generous, because a whole office of
    /// appliances behind one NAT address reconnects at once after a server restart (and
    /// roomload connects 32 per worker at a time); each waits at most `helloTimeoutMs`.
    public var maxUnjoinedPerAddress = 128
    /// Media one publisher may have forwarded, per second (a token bucket holding one second):
    /// 800 packets is twice what Opus' shortest frames (2.5 ms) send, 8× roomd's 10 ms; 160 kB
    /// is 2.5× Opus' highest bitrate (510 kb/s) with RTP headers. Beyond, packets are dropped
    /// and counted (`dropped.rateLimited`) before they cost every listener a copy.
    public var mediaPacketsPerSecond = 800
    public var mediaBytesPerSecond = 160_000
    /// App messages one participant may send, and all of a room's together, per second: count
    /// and bytes as relayed (JSON escapes included, docs/roomserver.md "Limits"). Beyond, a
    /// message is refused to its sender (`rate_limited`); the listeners see nothing of it.
    public var appMessagesPerSecond = 10
    public var appMessageBytesPerSecond = 16_384
    public var roomAppMessagesPerSecond = 20
    public var roomAppMessageBytesPerSecond = 32_768
    var appMessagesPerParticipant: AppMessageBudget.Limit {
        AppMessageBudget.Limit(messagesPerSecond: Double(appMessagesPerSecond), bytesPerSecond: Double(appMessageBytesPerSecond))
    }
    var appMessagesPerRoom: AppMessageBudget.Limit {
        AppMessageBudget.Limit(messagesPerSecond: Double(roomAppMessagesPerSecond), bytesPerSecond: Double(roomAppMessageBytesPerSecond))
    }

    public init() {}
}

/// `roomserver`'s configuration file (docs/roomserver.md), an INI file read with RoomSettings'
/// `INIParser` / `ConfigValues`, so every error reads `file:line: section.key: problem`.
public struct RoomServerConfiguration: Sendable, Equatable {
    /// TLS signalling listeners (`server.listen`, comma-separated); they need `tls`.
    public var listen: [SocketAddress]
    /// Plain signalling listeners (`server.plain_listen`): tokens and media keys in clear, for
    /// development and load tests on a trusted host only.
    public var plainListen: [SocketAddress] = []
    /// `[tls]`: required when `listen` is not empty.
    public var tls: RoomServerTLSFiles?
    /// The one UDP media socket (`server.media`).
    public var media: SocketAddress
    public var logLevel: LogLevel
    /// By key id.
    public var keys: [String: RoomServerKey]
    /// `[public_keys]`, by key id: EdDSA tokens' keys. No id is in both tables.
    public var publicKeys: [String: RoomServerPublicKey] = [:]
    /// `[placement]`, by room: where `mint-token` places each room it lists.
    public var placement: [String: RoomPlacementEntry] = [:]
    /// Settings every room is created with (`[rooms]`).
    public var room: RoomConfig
    /// Most participants in one room (`rooms.max_participants`); joins beyond are refused
    /// with `room_full`.
    public var maxParticipants: Int
    /// Seconds of clock difference tolerated on a token's `nbf`/`exp` (`server.token_leeway`).
    public var tokenLeeway = 30
    /// Event-loop threads the rooms are spread over (`server.workers`, 1-64); nil (`auto`, the
    /// default) is one per CPU the process may run on (docs/roomserver.md, "Workers").
    public var workers: Int?
    /// What one peer may take from the server (`[limits]`).
    public var limits = RoomServerLimits()
    /// Media encrypted with SRTP (`media.srtp`, default yes). `no` sends and expects plain RTP
    /// (no `srtp_*` keys in `welcome`): for development and for the bench's on/off comparison
    /// only — anyone on the path then hears the room (docs/security.md).
    public var srtp = true

    public static let defaultListen = "127.0.0.1:7700"
    public static let defaultMedia = "127.0.0.1:7701"

    public init(
        listen: [SocketAddress], media: SocketAddress, logLevel: LogLevel = .info, keys: [String: RoomServerKey],
        room: RoomConfig = RoomConfig(), maxParticipants: Int = 50
    ) {
        self.listen = listen
        self.media = media
        self.logLevel = logLevel
        self.keys = keys
        self.room = room
        self.maxParticipants = maxParticipants
    }

    static let sections: [(name: String, keys: [String])] = [
        ("server", ["listen", "plain_listen", "media", "log_level", "token_leeway", "workers"]),
        ("tls", ["cert_file", "key_file"]),
        ("keys", []),
        ("public_keys", []),
        ("placement", []),
        ("rooms", ["policy", "speaker_limit", "top_n", "max_participants", "reconnect_grace_ms"]),
        ("media", ["srtp"]),
        ("limits", ["hello_timeout_ms", "max_connections", "max_unjoined_per_address", "media_packets_per_second", "media_bytes_per_second", "app_messages_per_second", "app_message_bytes_per_second", "room_app_messages_per_second", "room_app_message_bytes_per_second"]),
    ]

    /// Reads and validates a configuration file.
    public static func load(path: String) throws(ConfigError) -> RoomServerConfiguration {
        let text: String
        do {
            text = try Files.readText(path)
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "cannot read: \(error)")
        }
        return try parse(text: text, file: path)
    }

    /// Parses configuration text; `file` names it in errors.
    public static func parse(text: String, file: String) throws(ConfigError) -> RoomServerConfiguration {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: sections, dynamicKey: { ["keys", "public_keys", "placement"].contains($0.section) })

        func address(_ text: String, key: String) throws(ConfigError) -> SocketAddress {
            let address: SocketAddress
            do {
                address = try SocketAddress(parsing: text)
            } catch {
                throw values.error(key, "\"\(text)\" is not an address (\"1.2.3.4:5\" or \"[::1]:5\")")
            }
            guard address.family == .ipv4 || address.family == .ipv6 else {
                throw values.error(key, "\"\(text)\" is not an IP address and port")
            }
            return address
        }

        func addresses(_ key: String, _ text: String) throws(ConfigError) -> [SocketAddress] {
            var list: [SocketAddress] = []
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let item = part.trimmingBlanks
                guard !item.isEmpty else { throw values.error(key, "empty address in the list") }
                let a = try address(item, key: key)
                if list.contains(a) { throw values.error(key, "\(a) is listed twice") }
                list.append(a)
            }
            return list
        }
        let plainText = try values.string("server.plain_listen")
        let plainListen = try plainText.map { (t) throws(ConfigError) in try addresses("server.plain_listen", t) } ?? []
        // Without any listener key the default is one TLS listener; with only plain_listen, none.
        let listenText = try values.string("server.listen") ?? (plainText == nil ? defaultListen : nil)
        let listen = try listenText.map { (t) throws(ConfigError) in try addresses("server.listen", t) } ?? []
        for a in plainListen where listen.contains(a) {
            throw values.error("server.plain_listen", "\(a) is also in server.listen (one port speaks TLS or plain, not both)")
        }
        // Relative to the configuration file's directory, like every path an installer writes.
        let directory = Files.directory(of: file)
        func path(_ key: String) throws(ConfigError) -> String? {
            guard let p = try values.string(key) else { return nil }
            guard !p.isEmpty else { throw values.error(key, "empty path") }
            return p.hasPrefix("/") ? p : (directory.hasSuffix("/") ? directory : directory + "/") + p
        }
        let certFile = try path("tls.cert_file")
        let keyFile = try path("tls.key_file")
        var tls: RoomServerTLSFiles?
        switch (certFile, keyFile) {
        case let (cert?, key?): tls = RoomServerTLSFiles(certFile: cert, keyFile: key)
        case (nil, nil): tls = nil
        case (nil, _?): throw values.error("tls.key_file", "needs tls.cert_file (the certificate chain that goes with the key)")
        case (_?, nil): throw values.error("tls.cert_file", "needs tls.key_file (the certificate's private key)")
        }
        let media = try address(try values.string("server.media") ?? defaultMedia, key: "server.media")

        // The one set of names every log-level option and key accepts (LogLevelNames).
        var logLevel = LogLevel.info
        if let text = try values.string("server.log_level", oneOf: LogLevelNames.all), let level = LogLevel(name: text) {
            logLevel = level
        }

        var keys: [String: RoomServerKey] = [:]
        for entry in values.entries where entry.section == "keys" {
            let key = try parseKey(entry, file: file)
            keys[key.keyID] = key
        }

        var publicKeys: [String: RoomServerPublicKey] = [:]
        for entry in values.entries where entry.section == "public_keys" {
            if keys[entry.key] != nil {
                throw ConfigError(file: file, line: entry.line, key: entry.qualifiedKey,
                                  message: "key id \"\(entry.key)\" is also in [keys]: one id names one key")
            }
            publicKeys[entry.key] = try parsePublicKey(entry, file: file, directory: directory)
        }
        var placement: [String: RoomPlacementEntry] = [:]
        for entry in values.entries where entry.section == "placement" {
            placement[entry.key] = try parsePlacement(entry, file: file)
        }

        var room = RoomConfig()
        room.policy = try values.value("rooms.policy", as: RoomStagePolicy.self) ?? room.policy
        room.speakerLimit = try values.int("rooms.speaker_limit", in: 0 ... 64) ?? room.speakerLimit
        room.topN = try values.int("rooms.top_n", in: 1 ... 16) ?? room.topN
        // How long a lost connection's seat waits, unannounced, for its participant to come
        // back (docs/roomserver.md). Up to 10 minutes: longer keeps ghosts on every screen.
        if let grace = try values.int("rooms.reconnect_grace_ms", in: 0 ... 600_000) { room.reconnectGraceMs = Int64(grace) }
        let maxParticipants = try values.int("rooms.max_participants", in: 1 ... 10_000) ?? 50

        var configuration = RoomServerConfiguration(
            listen: listen, media: media, logLevel: logLevel, keys: keys, room: room, maxParticipants: maxParticipants)
        configuration.plainListen = plainListen
        configuration.publicKeys = publicKeys
        configuration.placement = placement
        configuration.tls = tls
        configuration.tokenLeeway = try values.int("server.token_leeway", in: 0 ... 300) ?? 30
        if let workers = try values.string("server.workers"), workers != "auto" {
            guard let n = Int(workers), (1 ... RoomServerWorkers.most).contains(n) else {
                throw values.error("server.workers", "\"\(workers)\" is not auto or a whole number from 1 to \(RoomServerWorkers.most)")
            }
            configuration.workers = n
        }
        var limits = RoomServerLimits()
        limits.helloTimeoutMs = Int64(try values.int("limits.hello_timeout_ms", in: 100 ... 60_000) ?? Int(limits.helloTimeoutMs))
        limits.maxConnections = try values.int("limits.max_connections", in: 1 ... 1_000_000) ?? limits.maxConnections
        limits.maxUnjoinedPerAddress = try values.int("limits.max_unjoined_per_address", in: 1 ... 100_000) ?? limits.maxUnjoinedPerAddress
        limits.mediaPacketsPerSecond = try values.int("limits.media_packets_per_second", in: 50 ... 100_000) ?? limits.mediaPacketsPerSecond
        limits.mediaBytesPerSecond = try values.int("limits.media_bytes_per_second", in: 10_000 ... 100_000_000) ?? limits.mediaBytesPerSecond
        limits.appMessagesPerSecond = try values.int("limits.app_messages_per_second", in: 1 ... 10_000) ?? limits.appMessagesPerSecond
        limits.appMessageBytesPerSecond = try values.int("limits.app_message_bytes_per_second", in: 1_000 ... 100_000_000)
            ?? limits.appMessageBytesPerSecond
        limits.roomAppMessagesPerSecond = try values.int("limits.room_app_messages_per_second", in: 1 ... 100_000)
            ?? limits.roomAppMessagesPerSecond
        limits.roomAppMessageBytesPerSecond = try values.int("limits.room_app_message_bytes_per_second", in: 1_000 ... 1_000_000_000)
            ?? limits.roomAppMessageBytesPerSecond
        configuration.limits = limits
        configuration.srtp = try values.yesNo("media.srtp") ?? true
        // Last, so a typo elsewhere is reported as itself first.
        if !listen.isEmpty && tls == nil {
            throw values.error("server.listen", "is TLS and needs [tls] cert_file and key_file (docs/security.md, \"Certificate setup for an installer\"); server.plain_listen serves plain signalling for development")
        }
        return configuration
    }

    /// `kid = APP_ID:hex:SECRET` or `kid = APP_ID:base64:SECRET`.
    static func parseKey(_ entry: INIEntry, file: String) throws(ConfigError) -> RoomServerKey {
        func fail(_ message: String) -> ConfigError {
            ConfigError(file: file, line: entry.line, key: entry.qualifiedKey, message: message)
        }
        let parts = entry.value.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw fail("expected APP_ID:hex:SECRET or APP_ID:base64:SECRET")
        }
        let app = String(parts[0]), encoding = String(parts[1]), text = String(parts[2])
        guard !app.isEmpty else { throw fail("empty application id before the first \":\"") }
        var secret: [UInt8] = []
        // The decoded bytes go into locked memory; this transient copy is wiped on every way out.
        defer { ConstantTime.wipe(&secret) }
        switch encoding {
        case "hex":
            guard let bytes = decodeHex(text) else { throw fail("the secret is not hexadecimal (an even number of 0-9 a-f)") }
            secret = bytes
        case "base64":
            guard let bytes = decodeBase64(text) else { throw fail("the secret is not standard padded base64") }
            secret = bytes
        default:
            throw fail("unknown secret encoding \"\(encoding)\" (hex or base64)")
        }
        guard secret.count >= RoomServerKey.minimumSecretBytes else {
            throw fail("the secret is \(secret.count) bytes; at least \(RoomServerKey.minimumSecretBytes) are required")
        }
        return RoomServerKey(keyID: entry.key, appID: app, secret: secret)
    }

    /// `kid = APP_ID:FILE`: an Ed25519 public key in PEM (`openssl pkey -in KEY -pubout`),
    /// relative to the configuration file's directory or absolute.
    static func parsePublicKey(_ entry: INIEntry, file: String, directory: String) throws(ConfigError) -> RoomServerPublicKey {
        func fail(_ message: String) -> ConfigError {
            ConfigError(file: file, line: entry.line, key: entry.qualifiedKey, message: message)
        }
        let parts = entry.value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw fail("expected APP_ID:FILE (the application id, then an Ed25519 public key file in PEM)")
        }
        let name = String(parts[1])
        let path = name.hasPrefix("/") ? name : (directory.hasSuffix("/") ? directory : directory + "/") + name
        let text: String
        do { text = try Files.readText(path) } catch { throw fail("cannot read \(path): \(error)") }
        do {
            return RoomServerPublicKey(keyID: entry.key, appID: String(parts[0]), key: try Ed25519PublicKey(pem: text))
        } catch {
            throw fail("\(path): \(error)")
        }
    }

    /// `ROOM = BACKEND HOST:PORT`: `roomserver` or `janus`, then the instance. A Janus room is
    /// its AudioBridge room number, so the row's name must be one.
    static func parsePlacement(_ entry: INIEntry, file: String) throws(ConfigError) -> RoomPlacementEntry {
        func fail(_ message: String) -> ConfigError {
            ConfigError(file: file, line: entry.line, key: entry.qualifiedKey, message: message)
        }
        let words = entry.value.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard words.count == 2 else { throw fail("expected \"roomserver HOST:PORT\" or \"janus HOST:PORT\"") }
        guard let backend = TokenPlacement.Backend(rawValue: String(words[0])) else {
            throw fail("\"\(words[0])\" is not roomserver or janus")
        }
        let server = String(words[1])
        do { _ = try HostPort(parsing: server) } catch { throw fail("\"\(server)\" is not host:port: \(error)") }
        if backend == .janus {
            guard let number = UInt64(entry.key), number > 0 else {
                throw fail("a janus room is its AudioBridge room number, not \"\(entry.key)\"")
            }
        }
        return RoomPlacementEntry(backend: backend, server: server)
    }

    public static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// Standard base64 with padding, strict (RoomProtocol's codec).
    static func decodeBase64(_ text: String) -> [UInt8]? { Base64.decode(text) }
}

extension Substring {
    var trimmingBlanks: String {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
