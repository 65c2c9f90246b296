import RoomJSON
import RoomModel
import RoomSettings


/// The command table of control API 1: names, argument schemas, and who may run them.
/// Validation is driven by this table (`ControlRequest.parse`), roomctl's subcommands and
/// help are derived from it, and tests check docs/control-api.md and the bash completion
/// against it.

/// The JSON type an argument must have.
public enum ControlArgumentType: Sendable, Equatable {
    /// A JSON integer within `range`.
    case integer(ClosedRange<Int>)
    /// Any JSON number within `range`.
    case number(ClosedRange<Double>)
    /// A string of at most `maxLength` UTF-8 bytes.
    case string(maxLength: Int)
    /// A string from a fixed set.
    case oneOf([String])
    case boolean
    /// An array whose elements are strings from a fixed set.
    case stringList(of: [String])

    /// The name used in `wrong_type` errors ("expected integer").
    public var expectedName: String {
        switch self {
        case .integer: "integer"
        case .number: "number"
        case .string, .oneOf: "string"
        case .boolean: "boolean"
        case .stringList: "array of strings"
        }
    }
}

public struct ControlArgument: Sendable, Equatable {
    public let name: String
    public let type: ControlArgumentType
    public let required: Bool
    /// roomctl takes it as an optional positional word rather than a `--name` option
    /// (`roomctl volume 7 -6`); required arguments are always positional.
    public let positional: Bool
    public let help: String

    public init(_ name: String, _ type: ControlArgumentType, required: Bool = false, positional: Bool = false, help: String) {
        self.name = name
        self.type = type
        self.required = required
        self.positional = positional
        self.help = help
    }
}

/// Who may run a command.
public enum ControlAccess: String, Sendable, Equatable {
    /// Reads state: anyone who can connect to the socket.
    case read
    /// Changes the call, the room or the configuration: root, roomd's own user, or members
    /// of the allowed group only.
    case control
}

public struct ControlCommandSpec: Sendable, Equatable {
    public let name: String
    public let arguments: [ControlArgument]
    public let access: ControlAccess
    public let summary: String

    public var changesConfiguration: Bool { access == .control }

    public func argument(_ name: String) -> ControlArgument? { arguments.first { $0.name == name } }
}

/// Participant ids are 32-bit on the wire (protocol 1); 0 is the server itself.
public let participantIDRange = 1...Int(UInt32.max)
/// Volumes in dB: -80 is as good as silent, +20 is the most gain the mixer gives.
public let volumeRange = ApplianceConfiguration.volumeRange

public enum ControlCommands {
    private static let participant = ControlArgument("participant", .integer(participantIDRange), required: true,
                                                     help: "the participant's id (see `participants`)")

    private static func moderator(_ name: String, _ summary: String, reason: Bool = false) -> ControlCommandSpec {
        var args = [participant]
        if reason { args.append(ControlArgument("reason", .string(maxLength: 256), help: "told to the participant")) }
        return ControlCommandSpec(name: name, arguments: args, access: .control, summary: summary)
    }

    private static func plain(_ name: String, _ access: ControlAccess, _ summary: String) -> ControlCommandSpec {
        ControlCommandSpec(name: name, arguments: [], access: access, summary: summary)
    }

    public static let logLevels = ApplianceConfiguration.logLevels
    public static let profiles = AudioProfile.allCases.map(\.rawValue)
    public static let roles = RoomRole.allCases.map(\.rawValue)

    /// Every command, in the order help lists them.
    public static let all: [ControlCommandSpec] = [
        plain("status", .read, "connection, room, role, stage and mute state"),
        ControlCommandSpec(name: "join", arguments: [
            ControlArgument("server", .string(maxLength: 1024), help: "server address(es), comma-separated host:port; default: the configured ones"),
            ControlArgument("token", .string(maxLength: 8192), help: "join token; default: the configured one"),
            ControlArgument("role", .oneOf(roles), help: "role to ask for"),
        ], access: .control, summary: "join the room (again)"),
        plain("leave", .control, "leave the room"),
        ControlCommandSpec(name: "listen", arguments: [
            ControlArgument("room", .string(maxLength: 256), required: true, help: "the room to listen to: the token's room, or a Janus AudioBridge room number"),
            ControlArgument("server", .string(maxLength: 1024), help: "its server address(es), comma-separated host:port; default: the room's (required for Janus)"),
            ControlArgument("token", .string(maxLength: 8192), help: "a token for that room (audience is enough); required for roomserver"),
            ControlArgument("gain", .number(volumeRange), help: "how loud it plays, dB (-80 … 20; default 0)"),
            ControlArgument("backend", .oneOf(RoomBackendKind.allCases.map(\.rawValue)), help: "roomserver (default) or janus"),
            ControlArgument("pin", .string(maxLength: 256), help: "the Janus room's PIN, if it has one"),
        ], access: .control, summary: "listen to a second room beside this one (audience: it hears nothing from here)"),
        plain("unlisten", .control, "stop listening to the second room"),
        ControlCommandSpec(name: "call", arguments: [
            ControlArgument("target", .string(maxLength: 256), required: true, positional: true,
                            help: "a sip: URI, or a user or number at the account's registrar"),
        ], access: .control, summary: "place a SIP call (roomd.conf [sip])"),
        plain("answer", .control, "answer the call that rings"),
        plain("decline", .control, "decline the call that rings"),
        plain("hangup", .control, "end the call (or stop dialing)"),
        plain("hold", .control, "put the call on hold"),
        plain("resume", .control, "take the call off hold"),
        ControlCommandSpec(name: "dtmf", arguments: [
            ControlArgument("digits", .string(maxLength: 64), required: true, positional: true, help: "0-9, *, #, A-D"),
        ], access: .control, summary: "send DTMF digits in the call (RFC 4733)"),
        plain("bridge", .control, "put the caller into the room: the room hears the caller, the caller the room"),
        plain("unbridge", .control, "take the caller out of the room again"),
        plain("mute", .control, "mute this appliance"),
        plain("unmute", .control, "unmute this appliance"),
        plain("toggle_mute", .control, "toggle mute (what the mute button does)"),
        plain("raise_hand", .control, "ask to go on stage"),
        plain("lower_hand", .control, "withdraw the request to go on stage"),
        plain("step_down", .control, "leave the stage (back to audience)"),
        plain("accept_invite", .control, "accept a moderator's invitation on stage"),
        plain("decline_invite", .control, "decline a moderator's invitation on stage"),
        moderator("approve", "moderator: let a participant on stage"),
        moderator("deny", "moderator: refuse a participant's raised hand"),
        moderator("invite", "moderator: invite a participant on stage"),
        moderator("demote", "moderator: take a participant off stage"),
        moderator("mute_participant", "moderator: mute a participant"),
        moderator("kick", "moderator: remove a participant from the room", reason: true),
        plain("participants", .read, "the participants of the room"),
        ControlCommandSpec(name: "volume", arguments: [
            ControlArgument("participant", .integer(participantIDRange), positional: true, help: "whose playback volume; master volume when absent"),
            ControlArgument("db", .number(volumeRange), required: true, help: "gain in dB (-80 … 20)"),
        ], access: .control, summary: "set the master or a participant's playback volume"),
        ControlCommandSpec(name: "send_message", arguments: [
            ControlArgument("to", .integer(participantIDRange), help: "recipient; everyone when absent"),
            ControlArgument("data", .string(maxLength: 8192), required: true, help: "the message (at most 8 KiB)"),
        ], access: .control, summary: "send an app message to the room or one participant"),
        ControlCommandSpec(name: "set_attribute", arguments: [
            ControlArgument("key", .string(maxLength: 256), required: true, help: "attribute name"),
            ControlArgument("value", .string(maxLength: 4096), positional: true, help: "new value; deletes the attribute when absent"),
        ], access: .control, summary: "set or delete a room attribute"),
        ControlCommandSpec(name: "profile", arguments: [
            ControlArgument("name", .oneOf(profiles), required: true, help: "speech or music"),
        ], access: .control, summary: "switch the audio profile (rate, bitrate, noise suppression)"),
        plain("stats", .read, "audio, network and control statistics"),
        plain("selftest", .control, "play a test signal: per-mic level and noise floor, speaker-to-mic delay, clipping, echo cancellation; on an array: dead mics, wiring order, the beam's noise gain"),
        ControlCommandSpec(name: "log_level", arguments: [
            ControlArgument("level", .oneOf(logLevels), required: true, help: "error, warning, notice, info or debug"),
        ], access: .control, summary: "change roomd's log level"),
        plain("reload", .control, "re-read the configuration file"),
        ControlCommandSpec(name: "subscribe", arguments: [
            ControlArgument("events", .stringList(of: ControlEventName.all), help: "event names; all but levels when absent"),
            ControlArgument("levels", .boolean, help: "also stream audio levels"),
        ], access: .read, summary: "stream events on this connection"),
        plain("version", .read, "roomd's version and the control API version"),
    ]

    private static let byName: [String: ControlCommandSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> ControlCommandSpec? { byName[name] }
}

/// A moderator action on another participant.
public enum ModeratorAction: String, Sendable, Equatable, CaseIterable {
    case approve, deny, invite, demote
    case muteParticipant = "mute_participant"
    case kick
}


/// A validated command with typed arguments: what roomd switches on.
public enum ControlCommand: Sendable, Equatable {
    case status
    case join(server: String?, token: String?, role: String?)
    case leave
    /// Listen to a second room (`MediaLeg.listen`) at `gainDB`.
    case listen(room: String, server: String?, token: String?, gainDB: Double, backend: RoomBackendKind, pin: String?)
    case unlisten
    /// A SIP call (`[sip]`): place, answer, decline, end, hold, DTMF, bridge into the room.
    case call(target: String)
    case answer, decline, hangUp, hold, resume
    case dtmf(String)
    case bridge(Bool)
    case mute, unmute, toggleMute
    case raiseHand, lowerHand, stepDown, acceptInvite, declineInvite
    case moderate(ModeratorAction, participant: UInt32, reason: String?)
    case participants
    /// `participant` nil: the master volume.
    case volume(participant: UInt32?, dB: Double)
    case sendMessage(to: UInt32?, data: String)
    case setAttribute(key: String, value: String?)
    case profile(AudioProfile)
    case selfTest
    case stats
    case logLevel(String)
    case reload
    case subscribe(events: [String]?, levels: Bool)
    case version
}

/// A request that passed validation.
public struct ControlRequest: Sendable, Equatable {
    public var id: ControlRequestID?
    public var spec: ControlCommandSpec
    /// The validated arguments as sent (only names from the table, with the right types).
    public var arguments: [String: JSONValue]
    public var command: ControlCommand

    public var name: String { spec.name }

    /// Why a line was refused, with the request id when it could be read.
    public struct Failure: Error, Sendable, Equatable {
        public var id: ControlRequestID?
        public var error: ControlError
    }

    /// Validates one request line (without its newline) against the command table.
    public static func parse(line: some Collection<UInt8>) throws(Failure) -> ControlRequest {
        let value: JSONValue
        do {
            value = try JSONValue.parse(line)
        } catch {
            throw Failure(id: nil, error: ControlError(.badJSON, "malformed JSON: \(error.message)"))
        }
        return try parse(value)
    }

    public static func parse(_ value: JSONValue) throws(Failure) -> ControlRequest {
        guard let object = value.objectValue else {
            throw Failure(id: nil, error: ControlError(.badJSON, "a request is a JSON object, got \(value.typeName)"))
        }
        var id: ControlRequestID?
        switch object["id"] {
        case nil, .null?: id = nil
        case .int(let i)?: id = .int(i)
        case .string(let s)? where s.utf8.count <= 256: id = .string(s)
        case .string?: throw Failure(id: nil, error: .badRequest(field: "id", "longer than 256 bytes"))
        case let other?:
            throw Failure(id: nil, error: .wrongType(field: "id", expected: "integer or string", got: other))
        }
        func fail(_ e: ControlError) -> Failure { Failure(id: id, error: e) }
        for key in object.keys where key != "id" && key != "cmd" && key != "args" {
            throw fail(.badRequest(field: key, "unknown field (a request has id, cmd and args)"))
        }
        guard let cmdValue = object["cmd"] else { throw fail(.badRequest(field: "cmd", "missing")) }
        guard let name = cmdValue.stringValue else {
            throw fail(.wrongType(field: "cmd", expected: "string", got: cmdValue))
        }
        guard let spec = ControlCommands.spec(named: name) else {
            let shown = name.utf8.count > 64 ? String(name.prefix(64)) + "…" : name
            throw fail(ControlError(.unknownCommand, "unknown command \"\(shown)\"", details: ["cmd": .string(shown)]))
        }
        var args: [String: JSONValue] = [:]
        switch object["args"] {
        case nil, .null?: break
        case .object(let o)?: args = o
        case let other?: throw fail(.wrongType(field: "args", expected: "object", got: other))
        }
        do throws(ControlError) {
            let checked = try validate(args, spec)
            return ControlRequest(id: id, spec: spec, arguments: checked, command: try command(spec, checked))
        } catch {
            throw fail(error)
        }
    }

    /// Checks every argument against the table: unknown names, missing required ones, JSON
    /// types, ranges and allowed values. The first problem wins (keys in sorted order, so the
    /// answer is deterministic).
    static func validate(_ args: [String: JSONValue], _ spec: ControlCommandSpec) throws(ControlError) -> [String: JSONValue] {
        var checked: [String: JSONValue] = [:]
        for key in args.keys.sorted() where spec.argument(key) == nil {
            let known = spec.arguments.isEmpty ? "\(spec.name) takes no arguments" : "\(spec.name) takes " + spec.arguments.map(\.name).joined(separator: ", ")
            throw .badRequest(field: "args.\(key)", "unknown argument (\(known))")
        }
        for arg in spec.arguments {
            let field = "args.\(arg.name)"
            guard let value = args[arg.name], value != .null else {
                if arg.required { throw .badRequest(field: field, "missing (required)") }
                continue
            }
            switch arg.type {
            case .integer(let range):
                guard case .int(let i) = value else { throw .wrongType(field: field, expected: "integer", got: value) }
                guard range.contains(i) else { throw .badRequest(field: field, "\(i) is out of range \(range.lowerBound)…\(range.upperBound)") }
            case .number(let range):
                guard let d = value.doubleValue else { throw .wrongType(field: field, expected: "number", got: value) }
                guard range.contains(d) else { throw .badRequest(field: field, "\(Roomctl.formatNumber(d)) is out of range \(Roomctl.formatNumber(range.lowerBound))…\(Roomctl.formatNumber(range.upperBound))") }
            case .string(let maxLength):
                guard case .string(let s) = value else { throw .wrongType(field: field, expected: "string", got: value) }
                guard s.utf8.count <= maxLength else { throw .badRequest(field: field, "longer than \(maxLength) bytes") }
            case .oneOf(let allowed):
                guard case .string(let s) = value else { throw .wrongType(field: field, expected: "string", got: value) }
                guard allowed.contains(s) else { throw .badRequest(field: field, "\"\(s)\" is not one of \(allowed.joined(separator: ", "))") }
            case .boolean:
                guard case .bool = value else { throw .wrongType(field: field, expected: "boolean", got: value) }
            case .stringList(let allowed):
                guard case .array(let items) = value else { throw .wrongType(field: field, expected: "array of strings", got: value) }
                for (n, item) in items.enumerated() {
                    guard case .string(let s) = item else { throw .wrongType(field: "\(field)[\(n)]", expected: "string", got: item) }
                    guard allowed.contains(s) else { throw .badRequest(field: "\(field)[\(n)]", "unknown name \"\(s)\"") }
                }
            }
            checked[arg.name] = value
        }
        return checked
    }

    private static func command(_ spec: ControlCommandSpec, _ a: [String: JSONValue]) throws(ControlError) -> ControlCommand {
        func id(_ key: String) -> UInt32? { a[key]?.intValue.map { UInt32($0) } }
        func text(_ key: String) -> String? { a[key]?.stringValue }
        switch spec.name {
        case "status": return .status
        case "join": return .join(server: text("server"), token: text("token"), role: text("role"))
        case "leave": return .leave
        case "listen":
            return .listen(room: text("room") ?? "", server: text("server"), token: text("token"), gainDB: a["gain"]?.doubleValue ?? 0,
                           backend: RoomBackendKind(rawValue: text("backend") ?? "") ?? .roomserver, pin: text("pin"))
        case "unlisten": return .unlisten
        case "call": return .call(target: text("target") ?? "")
        case "answer": return .answer
        case "decline": return .decline
        case "hangup": return .hangUp
        case "hold": return .hold
        case "resume": return .resume
        case "dtmf": return .dtmf(text("digits") ?? "")
        case "bridge": return .bridge(true)
        case "unbridge": return .bridge(false)
        case "mute": return .mute
        case "unmute": return .unmute
        case "toggle_mute": return .toggleMute
        case "raise_hand": return .raiseHand
        case "lower_hand": return .lowerHand
        case "step_down": return .stepDown
        case "accept_invite": return .acceptInvite
        case "decline_invite": return .declineInvite
        case "participants": return .participants
        case "volume": return .volume(participant: id("participant"), dB: a["db"]?.doubleValue ?? 0)
        case "send_message": return .sendMessage(to: id("to"), data: text("data") ?? "")
        case "set_attribute": return .setAttribute(key: text("key") ?? "", value: text("value"))
        case "profile": return .profile(AudioProfile(rawValue: text("name") ?? "") ?? .speech)
        case "selftest": return .selfTest
        case "stats": return .stats
        case "log_level": return .logLevel(text("level") ?? "info")
        case "reload": return .reload
        case "subscribe":
            let events = a["events"]?.arrayValue?.compactMap(\.stringValue)
            return .subscribe(events: events, levels: a["levels"]?.boolValue ?? false)
        case "version": return .version
        default:
            if let action = ModeratorAction(rawValue: spec.name), let p = id("participant") {
                return .moderate(action, participant: p, reason: text("reason"))
            }
            // Only reachable if the table gains a command this switch does not know.
            throw ControlError(.internal, "command \(spec.name) has no mapping")
        }
    }
}
