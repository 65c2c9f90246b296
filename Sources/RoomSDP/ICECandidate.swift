/// An ICE candidate as SDP carries it (`a=candidate:` value, RFC 8839 §5.1), or as a trickle
/// message does (the same text, often with the `candidate:` prefix).
///
/// The address stays text: browsers hide their host addresses behind mDNS names
/// (`<uuid>.local`), which the appliance cannot resolve and never needs to — it talks to the
/// media server, whose candidates are addresses.
public struct ICECandidate: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable {
        case host, srflx, prflx, relay
    }

    public var foundation: String
    /// 1 = RTP (the only one with rtcp-mux and BUNDLE), 2 = RTCP.
    public var component: Int
    /// "udp" or "tcp" (lowercased).
    public var transport: String
    public var priority: UInt32
    public var address: String
    public var port: Int
    public var kind: Kind
    public var relatedAddress: String?
    public var relatedPort: Int?
    /// Extension pairs after the fixed fields (`generation 0`, `tcptype active`, `ufrag …`), in order.
    public var extensions: [(name: String, value: String)]

    public init(foundation: String, component: Int = 1, transport: String = "udp", priority: UInt32,
                address: String, port: Int, kind: Kind, relatedAddress: String? = nil, relatedPort: Int? = nil,
                extensions: [(name: String, value: String)] = []) {
        self.foundation = foundation
        self.component = component
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.kind = kind
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.extensions = extensions
    }

    public static func == (a: ICECandidate, b: ICECandidate) -> Bool {
        a.foundation == b.foundation && a.component == b.component && a.transport == b.transport
            && a.priority == b.priority && a.address == b.address && a.port == b.port && a.kind == b.kind
            && a.relatedAddress == b.relatedAddress && a.relatedPort == b.relatedPort
            && a.extensions.map(\.name) == b.extensions.map(\.name) && a.extensions.map(\.value) == b.extensions.map(\.value)
    }

    /// Parses the attribute value, with or without the leading `candidate:`.
    public init(parsing text: String) throws(SDPError) {
        var body = Substring(text)
        if body.hasPrefix("candidate:") { body = body.dropFirst("candidate:".count) }
        func fail(_ field: String, _ message: String) -> SDPError {
            SDPError(line: nil, field: "a=candidate \(field)", message: message)
        }
        // Printable ASCII only: every field of RFC 8839's grammar is a token, an address or a number.
        let fixedNames = ["foundation", "component", "transport", "priority", "address", "port", "typ", "type"]
        let f = body.sdpFields
        for (index, field) in f.enumerated() {
            if let bad = field.utf8.first(where: { !(0x21...0x7E).contains($0) }) {
                let name = index < fixedNames.count ? fixedNames[index] : (index - fixedNames.count) % 2 == 0 ? "extension name" : f[index - 1]
                throw fail(name, "byte 0x\(String(bad, radix: 16)) is not printable ASCII")
            }
        }
        guard f.count >= 8 else { throw fail("", "needs 8 fields (foundation component transport priority address port typ type), has \(f.count)") }
        guard !f[0].isEmpty, f[0].utf8.count <= 32 else { throw fail("foundation", "'\(f[0])' is not 1-32 characters") }
        guard let component = Int(f[1]), (1...256).contains(component) else { throw fail("component", "'\(f[1])' is not 1-256") }
        guard let priority = UInt32(f[3]), priority > 0 else { throw fail("priority", "'\(f[3])' is not 1-4294967295") }
        guard let port = Int(f[5]), (0...65535).contains(port) else { throw fail("port", "'\(f[5])' is not 0-65535") }
        guard f[6] == "typ" else { throw fail("typ", "expected 'typ', found '\(f[6])'") }
        guard let kind = Kind(rawValue: f[7]) else { throw fail("type", "'\(f[7])' is not host, srflx, prflx or relay") }
        var related: String?
        var relatedPort: Int?
        var extensions: [(name: String, value: String)] = []
        var i = 8
        while i < f.count {
            guard i + 1 < f.count else { throw fail(f[i], "has no value") }
            switch f[i] {
            case "raddr": related = f[i + 1]
            case "rport":
                guard let p = Int(f[i + 1]), (0...65535).contains(p) else { throw fail("rport", "'\(f[i + 1])' is not 0-65535") }
                relatedPort = p
            default: extensions.append((f[i], f[i + 1]))
            }
            i += 2
        }
        self.init(foundation: f[0], component: component, transport: f[2].lowercased(), priority: priority,
                  address: f[4], port: port, kind: kind, relatedAddress: related, relatedPort: relatedPort,
                  extensions: extensions)
    }

    /// The attribute value (without `candidate:` prefix… with it: SDP's `a=candidate:` puts
    /// the name before the colon, so this is what follows it).
    public var attributeValue: String {
        var s = "\(foundation) \(component) \(transport) \(priority) \(address) \(port) typ \(kind.rawValue)"
        if let relatedAddress { s += " raddr \(relatedAddress)" }
        if let relatedPort { s += " rport \(relatedPort)" }
        for e in extensions { s += " \(e.name) \(e.value)" }
        return s
    }

    /// RFC 8445 §5.1.2.1: type preference in the top byte, local preference next, then the
    /// component. Host 126, peer-reflexive 110, server-reflexive 100, relayed 0.
    public static func priority(kind: Kind, localPreference: UInt16 = 65535, component: Int = 1) -> UInt32 {
        let typePreference: UInt32 = switch kind {
        case .host: 126
        case .prflx: 110
        case .srflx: 100
        case .relay: 0
        }
        return (typePreference << 24) | (UInt32(localPreference) << 8) | UInt32(256 - min(max(component, 1), 256))
    }
}

/// The DTLS certificate fingerprint an endpoint announces (`a=fingerprint`, RFC 8122): the
/// peer's certificate in the handshake must hash to it, which is what binds the DTLS keys to
/// the signalling (and so to whoever the signalling authenticated).
public struct DTLSFingerprint: Sendable, Equatable, CustomStringConvertible {
    /// Lowercased hash name: "sha-256" (what browsers and Janus send), "sha-1", "sha-384", "sha-512".
    public var algorithm: String
    public var digest: [UInt8]

    public init(algorithm: String, digest: [UInt8]) {
        self.algorithm = algorithm.lowercased()
        self.digest = digest
    }

    /// `sha-256 AB:CD:…` (hex case-insensitive).
    public init(parsing text: String) throws(SDPError) {
        let f = text.sdpFields
        guard f.count == 2 else { throw SDPError(line: nil, field: "a=fingerprint", message: "expected '<hash> <hex:hex:…>'") }
        let algorithm = f[0].lowercased()
        let expected: Int? = switch algorithm {
        case "sha-1": 20
        case "sha-224": 28
        case "sha-256": 32
        case "sha-384": 48
        case "sha-512": 64
        default: nil
        }
        guard let expected else { throw SDPError(line: nil, field: "a=fingerprint", message: "hash '\(f[0])' is not sha-1/224/256/384/512") }
        var digest: [UInt8] = []
        for part in f[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard part.utf8.count == 2, let byte = UInt8(part, radix: 16) else {
                throw SDPError(line: nil, field: "a=fingerprint", message: "'\(part)' is not a hex byte")
            }
            digest.append(byte)
        }
        guard digest.count == expected else {
            throw SDPError(line: nil, field: "a=fingerprint", message: "\(algorithm) needs \(expected) bytes, has \(digest.count)")
        }
        self.init(algorithm: algorithm, digest: digest)
    }

    /// Upper-case hex pairs, the spelling browsers use.
    public var description: String {
        let hex = digest.map { b -> String in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }
        return "\(algorithm) " + hex.joined(separator: ":")
    }
}

/// `a=setup` (RFC 4145 / 8842): which side opens the DTLS handshake.
public enum DTLSSetup: String, Sendable, Equatable {
    /// The offerer's value: either; the answer decides.
    case actpass
    /// This side sends the ClientHello (DTLS client).
    case active
    /// This side waits for it (DTLS server).
    case passive
    case holdconn
}
