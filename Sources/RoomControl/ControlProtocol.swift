import RoomJSON
/// Stable error codes of control API 1. Scripts match on these; the message is for people.
public enum ControlErrorCode: String, Sendable, CaseIterable, Equatable {
    /// The line is not JSON, or not a JSON object.
    case badJSON = "bad_json"
    /// A field is missing, unknown, or its value is out of range; `field` names it.
    case badRequest = "bad_request"
    /// `cmd` names no command of this API version.
    case unknownCommand = "unknown_command"
    /// A field has the wrong JSON type; `field` names it and `expected` the type.
    case wrongType = "wrong_type"
    /// The line is longer than 64 KiB; the connection is closed after this error.
    case tooLong = "too_long"
    /// The caller (SO_PEERCRED) may not run this command.
    case permissionDenied = "permission_denied"
    /// The command needs a room and roomd is not in one.
    case notInRoom = "not_in_room"
    /// The room service refused the request; `room_code` carries its code.
    case roomError = "room_error"
    /// The configuration file has a problem (`reload`); the message names file, line and key,
    /// and nothing was changed.
    case configError = "config_error"
    /// Another run of the same long command is in progress (`selftest`).
    case busy = "busy"
    /// Sent instead of an answer, right after connecting, when roomd has as many control
    /// clients as it takes (in all, or from this user); the connection is then closed. Try
    /// again later: idle clients are closed after `idle_timeout_s`.
    case tooManyClients = "too_many_clients"
    /// The client kept a connection without completing a request line in time (a line started
    /// and not finished, or nothing sent); the connection is closed after this error.
    case timeout = "timeout"
    /// The audio device is not running, so the command cannot be carried out (`selftest`).
    case deviceError = "device_error"
    /// A call command that cannot be carried out now: no SIP account, no call that rings or is
    /// up, a digit that is not DTMF, a far end without telephone-event. The message says which.
    case callError = "call_error"
    /// Something went wrong inside roomd.
    case `internal` = "internal"
}

/// An error answer: `{"code": ..., "message": ..., <details>}`.
public struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ControlErrorCode
    public var message: String
    /// Extra machine-readable fields: `field`, `expected`, `room_code`, `limit`.
    public var details: [String: JSONValue]

    public init(_ code: ControlErrorCode, _ message: String, details: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }

    public static func badRequest(field: String, _ message: String) -> ControlError {
        ControlError(.badRequest, "\(field): \(message)", details: ["field": .string(field)])
    }

    public static func wrongType(field: String, expected: String, got: JSONValue) -> ControlError {
        ControlError(.wrongType, "\(field): expected \(expected), got \(got.typeName)",
                     details: ["field": .string(field), "expected": .string(expected)])
    }

    /// A refusal by the room service, carrying its error code (e.g. `not_moderator`).
    public static func room(code: String, _ message: String) -> ControlError {
        ControlError(.roomError, message, details: ["room_code": .string(code)])
    }

    public static func notInRoom(_ message: String = "not in a room") -> ControlError {
        ControlError(.notInRoom, message)
    }

    public var field: String? { details["field"]?.stringValue }
    public var expected: String? { details["expected"]?.stringValue }
    public var roomCode: String? { details["room_code"]?.stringValue }

    public var json: JSONValue {
        var o = details
        o["code"] = .string(code.rawValue)
        o["message"] = .string(message)
        return .object(o)
    }

    /// Reads an `error` object; unknown codes (a newer daemon) become `internal` with the
    /// original code kept in `details["original_code"]`.
    public init?(json: JSONValue) {
        guard var o = json.objectValue, let codeText = o["code"]?.stringValue else { return nil }
        let message = o["message"]?.stringValue ?? codeText
        o["code"] = nil
        o["message"] = nil
        if let code = ControlErrorCode(rawValue: codeText) {
            self.init(code, message, details: o)
        } else {
            o["original_code"] = .string(codeText)
            self.init(.internal, message, details: o)
        }
    }

    /// The code as sent (the original one for codes this build does not know).
    public var codeText: String { details["original_code"]?.stringValue ?? code.rawValue }

    public var description: String { "\(codeText): \(message)" }
}

/// A request id: the client's integer or string, echoed in the response.
public enum ControlRequestID: Sendable, Hashable, CustomStringConvertible {
    case int(Int)
    case string(String)

    public var json: JSONValue {
        switch self {
        case .int(let i): .int(i)
        case .string(let s): .string(s)
        }
    }

    public var description: String {
        switch self {
        case .int(let i): "\(i)"
        case .string(let s): "\"\(s)\""
        }
    }
}

/// What the handler answers: a result object, or an error.
public enum ControlResult: Sendable, Equatable {
    case success([String: JSONValue])
    case failure(ControlError)

    public static let ok = ControlResult.success([:])
}

/// An event for subscribers: `{"event": name, ...fields}`.
public struct ControlEvent: Sendable, Equatable {
    public var name: String
    public var fields: [String: JSONValue]

    public init(_ name: String, _ fields: [String: JSONValue] = [:]) {
        self.name = name
        self.fields = fields
    }

    public var json: JSONValue {
        var o = fields
        o["event"] = .string(name)
        return .object(o)
    }

    /// One line (with its newline), ready to write.
    public var line: [UInt8] { json.jsonBytes + [0x0A] }

    public init?(json: JSONValue) {
        guard var o = json.objectValue, let name = o["event"]?.stringValue else { return nil }
        o["event"] = nil
        self.init(name, o)
    }
}

/// Building and reading response lines.
public enum ControlResponse {
    public static func success(id: ControlRequestID?, result: [String: JSONValue]) -> [UInt8] {
        let o: [String: JSONValue] = ["id": id?.json ?? .null, "ok": true, "result": .object(result)]
        return JSONValue.object(o).jsonBytes + [0x0A]
    }

    public static func failure(id: ControlRequestID?, error: ControlError) -> [UInt8] {
        let o: [String: JSONValue] = ["id": id?.json ?? .null, "ok": false, "error": error.json]
        return JSONValue.object(o).jsonBytes + [0x0A]
    }

    public static func line(id: ControlRequestID?, _ result: ControlResult) -> [UInt8] {
        switch result {
        case .success(let r): success(id: id, result: r)
        case .failure(let e): failure(id: id, error: e)
        }
    }
}

/// The events of control API 1 a subscriber can ask for (docs/control-api.md, "Events").
/// `levels` is sent only to subscribers that asked for levels.
public enum ControlEventName {
    public static let all: [String] = [
        "connection",          // {state, reason?}: the room connection state
        "joined",              // {room, participant, role, rejoin, restored}
        "participant_joined",  // {participant: {...}}
        "participant_left",    // {participant: id, reason}
        "participant_updated", // {participant: {...}}
        "stage",               // {stage}: this appliance's stage state
        "mute",                // {muted, by?}: this appliance's mute as the room sees it
        "invited",             // {by}
        "stage_request",       // {participant}
        "active_speakers",     // {participants: [id], levels: [0-127]}
        "message",             // {from?, to?, data}
        "attribute",           // {key, value?}
        "token_will_expire",   // {expires_at}
        "removed",             // {reason, message}
        "request_failed",      // {request, code, message}
        "media_path",          // {up}
        "device",              // {kind, device?, message}: audio device exceptions
        "talker",              // {azimuth_deg}: the array found a talker in a new direction
        "quality",             // {warning, raised, value?}: a call-quality warning raised or cleared
        "listen",              // {room, state, reason?}: the connection to the room listened to
        "call",                // {state, peer?, name?, codec?, held?, bridged?, reason?}: a SIP call rang, started, changed or ended
        "dtmf",                // {digit}: the far end of the call sent a DTMF digit
        "config",              // {what, by}: configuration changed (profile, volume, log level, reload)
        "room_refused",        // {reason}: the configured room refused at a join or reload (e.g. a placement that does not verify)
        "levels",              // {mic_dbfs, speaker_dbfs, ...}: only with "levels": true
    ]
}
