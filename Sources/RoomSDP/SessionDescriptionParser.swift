/// Why a session description was refused: the 1-based line and the field at fault, so a log
/// line points at the exact place in what Janus or a browser sent.
public struct SDPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line number, or nil for a problem with the whole description.
    public let line: Int?
    /// The line type or attribute at fault ("o", "m", "a=fingerprint", …).
    public let field: String
    public let message: String

    public init(line: Int?, field: String, message: String) {
        self.line = line
        self.field = field
        self.message = message
    }

    public var description: String {
        (line.map { "SDP line \($0): " } ?? "SDP: ") + "\(field): \(message)"
    }
}

extension SessionDescription {
    /// Most bytes a description may have. A WebRTC offer for one audio stream is ~1–3 kB;
    /// a browser's with video codecs ~6 kB. Anything beyond is not a description we can use.
    public static let maximumSize = 64 * 1024
    /// Most `m=` sections accepted (each costs a little state; an appliance needs one).
    public static let maximumMediaSections = 32

    /// Parses `text` (CRLF or LF line ends). Strict where a mistake would change what is
    /// negotiated (the `v o s t m` lines, numbers), lenient with what RFC 8866 allows readers to
    /// skip (unknown line types, unknown attributes, which are kept).
    public init(parsing text: String) throws(SDPError) {
        guard text.utf8.count <= Self.maximumSize else {
            throw SDPError(line: nil, field: "size", message: "\(text.utf8.count) bytes, more than \(Self.maximumSize)")
        }
        var origin: Origin?
        var sessionName: String?
        var connection: String?
        var timing: String?
        var attributes: [SDPAttribute] = []
        var media: [MediaSection] = []
        var sawVersion = false
        var lineNumber = 0

        // Split on bytes: in a Swift String "\r\n" is one Character, so splitting on "\n"
        // would leave CRLF descriptions (what the wire carries) in one piece.
        for rawLine in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            var bytes = rawLine
            if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
            if bytes.isEmpty { continue }   // a trailing line end, or a stray blank line
            let line = Substring(String(decoding: bytes, as: UTF8.self))
            let utf8 = Array(line.utf8.prefix(2))
            guard utf8.count == 2, utf8[1] == UInt8(ascii: "="), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(utf8[0]) else {
                throw SDPError(line: lineNumber, field: "line", message: "not of the form <letter>=<value>")
            }
            let type = Character(Unicode.Scalar(utf8[0]))
            let value = String(line.dropFirst(2))
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) else {
                throw SDPError(line: lineNumber, field: String(type), message: "control character in the value")
            }
            if !sawVersion {
                guard type == "v" else { throw SDPError(line: lineNumber, field: "v", message: "a description starts with v=0") }
                guard value == "0" else { throw SDPError(line: lineNumber, field: "v", message: "version \(value), only 0 exists") }
                sawVersion = true
                continue
            }
            switch type {
            case "o":
                let f = value.sdpFields
                guard f.count == 6 else { throw SDPError(line: lineNumber, field: "o", message: "needs 6 fields, has \(f.count)") }
                guard f[1].allSatisfy(\.isASCIIDigit), f[2].allSatisfy(\.isASCIIDigit), !f[1].isEmpty, !f[2].isEmpty else {
                    throw SDPError(line: lineNumber, field: "o", message: "session id and version must be decimal numbers")
                }
                origin = Origin(username: f[0], sessionID: f[1], sessionVersion: f[2], networkType: f[3], addressType: f[4], address: f[5])
            case "s": sessionName = value
            case "t": timing = value
            case "c":
                if media.isEmpty { connection = value } else { media[media.count - 1].connection = value }
            case "m":
                guard media.count < Self.maximumMediaSections else {
                    throw SDPError(line: lineNumber, field: "m", message: "more than \(Self.maximumMediaSections) media sections")
                }
                media.append(try Self.parseMedia(value, line: lineNumber))
            case "a":
                let attribute = Self.parseAttribute(value)
                guard !attribute.name.isEmpty else { throw SDPError(line: lineNumber, field: "a", message: "attribute without a name") }
                if media.isEmpty { attributes.append(attribute) } else { media[media.count - 1].attributes.append(attribute) }
            default:
                continue   // i=, u=, e=, p=, b=, r=, z=, k=: nothing the appliance uses
            }
        }
        guard sawVersion else { throw SDPError(line: nil, field: "v", message: "empty description") }
        guard let origin else { throw SDPError(line: nil, field: "o", message: "missing") }
        guard let sessionName else { throw SDPError(line: nil, field: "s", message: "missing") }
        guard let timing else { throw SDPError(line: nil, field: "t", message: "missing") }
        self.init(origin: origin, sessionName: sessionName, connection: connection, timing: timing,
                  attributes: attributes, media: media)
    }

    private static func parseMedia(_ value: String, line: Int) throws(SDPError) -> MediaSection {
        let f = value.sdpFields
        guard f.count >= 3 else { throw SDPError(line: line, field: "m", message: "needs <media> <port> <proto> <fmt>…") }
        // "<port>/<count>" is allowed by RFC 8866; WebRTC never uses it, so the count is ignored.
        let portText = f[1].split(separator: "/", maxSplits: 1).first.map(String.init) ?? ""
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw SDPError(line: line, field: "m", message: "port '\(f[1])' is not 0-65535")
        }
        return MediaSection(kind: f[0], port: port, proto: f[2], formats: Array(f.dropFirst(3)))
    }

    private static func parseAttribute(_ value: String) -> SDPAttribute {
        guard let colon = value.firstIndex(of: ":") else { return SDPAttribute(value) }
        return SDPAttribute(String(value[..<colon]), String(value[value.index(after: colon)...]))
    }

    /// The description as text, CRLF line ends (what RFC 8866 and JSEP require on the wire).
    public var text: String {
        var out = "v=0\r\n"
        out += "o=\(origin.username) \(origin.sessionID) \(origin.sessionVersion) \(origin.networkType) \(origin.addressType) \(origin.address)\r\n"
        out += "s=\(sessionName)\r\n"
        if let connection { out += "c=\(connection)\r\n" }
        out += "t=\(timing)\r\n"
        for a in attributes { out += a.line }
        for m in media {
            out += "m=\(m.kind) \(m.port) \(m.proto)"
            for f in m.formats { out += " " + f }
            out += "\r\n"
            if let c = m.connection { out += "c=\(c)\r\n" }
            for a in m.attributes { out += a.line }
        }
        return out
    }
}

extension SDPAttribute {
    var line: String { value.map { "a=\(name):\($0)\r\n" } ?? "a=\(name)\r\n" }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

extension StringProtocol {
    /// The space-separated fields of an SDP value, split on the space byte. Splitting on
    /// Characters would let a field that starts with a combining mark fuse with the space
    /// before it, so printing the fields and parsing them again would not give them back.
    var sdpFields: [String] {
        utf8.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true).map { String(decoding: $0, as: UTF8.self) }
    }
}
