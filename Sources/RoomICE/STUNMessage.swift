/// A STUN message (RFC 8489, formerly 5389) as ICE uses it (RFC 8445): Binding requests,
/// responses and indications with the attributes connectivity checks and consent freshness
/// need. Parsing never traps: every length is checked before a byte is read, and a malformed
/// datagram yields a `STUNError` naming the field.
///
/// MESSAGE-INTEGRITY (HMAC-SHA1 keyed with the ICE password) is computed and checked through a
/// caller-given `STUNIntegrity` function, so this codec stays free of a crypto library; roomd
/// passes OpenSSL's HMAC. FINGERPRINT (CRC-32) is done here: it is what tells a STUN packet
/// from RTP, RTCP or DTLS on the one port BUNDLE shares.
public struct STUNMessage: Sendable, Equatable {
    public static let magicCookie: UInt32 = 0x2112_A442
    public static let headerSize = 20
    /// XORed into the CRC-32 of FINGERPRINT ("STUN"), RFC 8489 §14.7.
    static let fingerprintXor: UInt32 = 0x5354_554E

    public enum Class: UInt16, Sendable, Equatable {
        case request = 0, indication = 1, success = 2, error = 3
    }

    /// Binding is the only method ICE uses.
    public static let bindingMethod: UInt16 = 0x001

    public var method: UInt16
    public var messageClass: Class
    /// 96 bits; matches a response to its request.
    public var transactionID: [UInt8]
    public var attributes: [STUNAttribute]

    public init(method: UInt16 = STUNMessage.bindingMethod, class messageClass: Class, transactionID: [UInt8],
                attributes: [STUNAttribute] = []) {
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID
        self.attributes = attributes
    }

    /// The 16-bit message type: method bits M0-M11 with the class bits C0 (bit 4) and C1 (bit 8)
    /// between them (RFC 8489 §5).
    var messageType: UInt16 {
        let m = method & 0x0FFF, c = messageClass.rawValue
        return (m & 0x000F) | ((c & 1) << 4) | ((m & 0x0070) << 1) | ((c & 2) << 7) | ((m & 0x0F80) << 2)
    }

    static func split(type: UInt16) -> (method: UInt16, class: Class) {
        let method = (type & 0x000F) | ((type & 0x00E0) >> 1) | ((type & 0x3E00) >> 2)
        let c = ((type & 0x0010) >> 4) | ((type & 0x0100) >> 7)
        return (method, Class(rawValue: c)!)
    }

    /// First-byte test (RFC 7983 §7): STUN starts with 0-3, DTLS 20-63, RTP/RTCP 128-191, and
    /// the magic cookie must follow.
    public static func looksLikeSTUN(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= headerSize, bytes[0] < 4 else { return false }
        return readU32(bytes, 4) == magicCookie && readU16(bytes, 2) & 3 == 0
    }

    /// The class and transaction id from the 20-byte header alone, without reading the
    /// attributes: enough to route a datagram (and to drop an unsolicited response) before
    /// the one full parse that checks its integrity.
    static func peekHeader(_ bytes: UnsafeRawBufferPointer) -> (messageClass: Class, transactionID: [UInt8])? {
        guard looksLikeSTUN(bytes) else { return nil }
        return (split(type: readU16(bytes, 0)).class, Array(bytes[8 ..< headerSize]))
    }

    // MARK: Attributes by kind

    public func attribute(_ type: STUNAttributeType) -> STUNAttribute? { attributes.first { $0.type == type.rawValue } }

    public var username: String? { attribute(.username).map { String(decoding: $0.value, as: UTF8.self) } }
    public var priority: UInt32? {
        attribute(.priority).flatMap { $0.value.count == 4 ? $0.value.withUnsafeBytes { STUNMessage.readU32($0, 0) } : nil }
    }
    public var useCandidate: Bool { attribute(.useCandidate) != nil }
    /// ICE-CONTROLLING or ICE-CONTROLLED with its tie-breaker (RFC 8445 §7.1.3).
    public var iceRole: (controlling: Bool, tieBreaker: UInt64)? {
        for (type, controlling) in [(STUNAttributeType.iceControlling, true), (.iceControlled, false)] {
            if let a = attribute(type), a.value.count == 8 {
                let v = a.value.reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
                return (controlling, v)
            }
        }
        return nil
    }
    /// ERROR-CODE: class × 100 + number, and the reason phrase.
    public var errorCode: (code: Int, reason: String)? {
        guard let a = attribute(.errorCode), a.value.count >= 4 else { return nil }
        let code = Int(a.value[2] & 7) * 100 + Int(a.value[3])
        return (code, String(decoding: a.value[4...], as: UTF8.self))
    }

    /// XOR-MAPPED-ADDRESS decoded (the address the peer saw this request come from).
    public var xorMappedAddress: STUNAddress? {
        guard let a = attribute(.xorMappedAddress) else { return nil }
        return try? STUNAddress(xorValue: a.value, transactionID: transactionID)
    }
}

/// The attribute types ICE uses (RFC 8489 §18.3, RFC 8445 §16.1).
public enum STUNAttributeType: UInt16, Sendable {
    case username = 0x0006
    case messageIntegrity = 0x0008
    case errorCode = 0x0009
    case xorMappedAddress = 0x0020
    case priority = 0x0024
    case useCandidate = 0x0025
    case software = 0x8022
    case fingerprint = 0x8028
    case iceControlled = 0x8029
    case iceControlling = 0x802A
}

public struct STUNAttribute: Sendable, Equatable {
    public var type: UInt16
    public var value: [UInt8]

    public init(_ type: UInt16, _ value: [UInt8]) {
        self.type = type
        self.value = value
    }

    public init(_ type: STUNAttributeType, _ value: [UInt8]) { self.init(type.rawValue, value) }

    public static func username(_ text: String) -> STUNAttribute { STUNAttribute(.username, Array(text.utf8)) }
    public static func priority(_ p: UInt32) -> STUNAttribute { STUNAttribute(.priority, bigEndian(UInt64(p), bytes: 4)) }
    public static let useCandidate = STUNAttribute(.useCandidate, [])
    public static func iceControlling(_ tieBreaker: UInt64) -> STUNAttribute { STUNAttribute(.iceControlling, bigEndian(tieBreaker, bytes: 8)) }
    public static func iceControlled(_ tieBreaker: UInt64) -> STUNAttribute { STUNAttribute(.iceControlled, bigEndian(tieBreaker, bytes: 8)) }
    public static func errorCode(_ code: Int, _ reason: String) -> STUNAttribute {
        STUNAttribute(.errorCode, [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8))
    }
    public static func xorMappedAddress(_ address: STUNAddress, transactionID: [UInt8]) -> STUNAttribute {
        STUNAttribute(.xorMappedAddress, address.xorValue(transactionID: transactionID))
    }

    static func bigEndian(_ v: UInt64, bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: v >> (8 * (bytes - 1 - $0))) }
    }
}

/// An IPv4 or IPv6 address and port as STUN carries them.
public struct STUNAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes, network order.
    public var ip: [UInt8]
    public var port: UInt16

    public init(ip: [UInt8], port: UInt16) {
        precondition(ip.count == 4 || ip.count == 16, "an IP address is 4 or 16 bytes")
        self.ip = ip
        self.port = port
    }

    init(xorValue v: [UInt8], transactionID: [UInt8]) throws(STUNError) {
        guard v.count >= 4 else { throw STUNError(field: "XOR-MAPPED-ADDRESS", message: "shorter than 4 bytes") }
        let family = v[1]
        let length = family == 1 ? 4 : family == 2 ? 16 : 0
        guard length > 0 else { throw STUNError(field: "XOR-MAPPED-ADDRESS", message: "family \(family) is not 1 (IPv4) or 2 (IPv6)") }
        guard v.count == 4 + length else { throw STUNError(field: "XOR-MAPPED-ADDRESS", message: "\(v.count) bytes for family \(family)") }
        let mask = STUNAddress.mask(transactionID: transactionID)
        port = (UInt16(v[2]) << 8 | UInt16(v[3])) ^ UInt16(STUNMessage.magicCookie >> 16)
        ip = (0..<length).map { v[4 + $0] ^ mask[$0] }
    }

    func xorValue(transactionID: [UInt8]) -> [UInt8] {
        let mask = STUNAddress.mask(transactionID: transactionID)
        let p = port ^ UInt16(STUNMessage.magicCookie >> 16)
        return [0, ip.count == 4 ? 1 : 2, UInt8(p >> 8), UInt8(p & 0xFF)] + ip.enumerated().map { $0.element ^ mask[$0.offset] }
    }

    /// Magic cookie then transaction id: IPv4 uses the first 4 bytes, IPv6 all 16.
    static func mask(transactionID: [UInt8]) -> [UInt8] {
        STUNAttribute.bigEndian(UInt64(STUNMessage.magicCookie), bytes: 4) + transactionID
    }

    /// The address as SDP and sockets write it: dotted IPv4, or IPv6 as eight hex groups.
    public var host: String {
        if ip.count == 4 { return ip.map(String.init).joined(separator: ".") }
        var groups: [String] = []
        for i in stride(from: 0, to: 16, by: 2) { groups.append(String(UInt16(ip[i]) << 8 | UInt16(ip[i + 1]), radix: 16)) }
        return groups.joined(separator: ":")
    }

    public var description: String { ip.count == 4 ? "\(host):\(port)" : "[\(host)]:\(port)" }
}

public struct STUNError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let message: String
    public var description: String { "STUN \(field): \(message)" }
}

/// HMAC-SHA1(key, data) → 20 bytes. ICE's short-term credential: the key is the password as
/// bytes (RFC 8489 §9.1.1, no SASLprep for ICE's ASCII passwords).
public typealias STUNIntegrity = @Sendable (_ key: [UInt8], _ data: UnsafeRawBufferPointer) -> [UInt8]

extension STUNMessage {
    /// Most attributes kept from one datagram: a connectivity check has 5-7; more is noise.
    public static let maximumAttributes = 32

    /// What parsing found about the integrity and fingerprint of the datagram.
    public struct Checks: Sendable, Equatable {
        /// MESSAGE-INTEGRITY present and matching the key given (false when no key was given).
        public var integrityValid: Bool
        public var hasIntegrity: Bool
        /// FINGERPRINT present and matching.
        public var fingerprintValid: Bool
        public var hasFingerprint: Bool
    }

    /// Parses a datagram. With `key` and `hmac`, MESSAGE-INTEGRITY is verified (attributes after it,
    /// other than FINGERPRINT, are ignored as RFC 8489 §14.5 requires).
    public static func parse(_ bytes: UnsafeRawBufferPointer, key: [UInt8]? = nil,
                             hmac: STUNIntegrity? = nil) throws(STUNError) -> (message: STUNMessage, checks: Checks) {
        guard bytes.count >= headerSize else { throw STUNError(field: "header", message: "\(bytes.count) bytes, fewer than 20") }
        guard bytes[0] & 0xC0 == 0 else { throw STUNError(field: "header", message: "the top two bits are not zero") }
        guard readU32(bytes, 4) == magicCookie else { throw STUNError(field: "magic cookie", message: "missing (not RFC 5389/8489 STUN)") }
        let length = Int(readU16(bytes, 2))
        guard length % 4 == 0 else { throw STUNError(field: "length", message: "\(length) is not a multiple of 4") }
        guard headerSize + length == bytes.count else {
            throw STUNError(field: "length", message: "header says \(length) bytes of attributes, datagram has \(bytes.count - headerSize)")
        }
        let (method, cls) = split(type: readU16(bytes, 0))
        let transactionID = Array(bytes[8..<20])
        var attributes: [STUNAttribute] = []
        var checks = Checks(integrityValid: false, hasIntegrity: false, fingerprintValid: false, hasFingerprint: false)
        var offset = headerSize
        while offset < bytes.count {
            guard bytes.count - offset >= 4 else { throw STUNError(field: "attribute", message: "truncated header at byte \(offset)") }
            let type = readU16(bytes, offset)
            let valueLength = Int(readU16(bytes, offset + 2))
            let padded = (valueLength + 3) & ~3
            guard offset + 4 + padded <= bytes.count else {
                throw STUNError(field: "attribute 0x\(String(type, radix: 16))", message: "length \(valueLength) runs past the datagram")
            }
            let value = Array(bytes[(offset + 4)..<(offset + 4 + valueLength)])
            let end = offset + 4 + padded
            if checks.hasFingerprint {
                throw STUNError(field: "FINGERPRINT", message: "not the last attribute")
            }
            if type == STUNAttributeType.fingerprint.rawValue {
                guard valueLength == 4 else { throw STUNError(field: "FINGERPRINT", message: "\(valueLength) bytes, not 4") }
                checks.hasFingerprint = true
                let expected = crc32(bytes, upTo: offset, lengthField: UInt16(end - headerSize)) ^ fingerprintXor
                checks.fingerprintValid = value.withUnsafeBytes { readU32($0, 0) } == expected
            } else if checks.hasIntegrity {
                // Anything between MESSAGE-INTEGRITY and FINGERPRINT is not covered: ignored.
            } else if type == STUNAttributeType.messageIntegrity.rawValue {
                guard valueLength == 20 else { throw STUNError(field: "MESSAGE-INTEGRITY", message: "\(valueLength) bytes, not 20") }
                checks.hasIntegrity = true
                if let key, let hmac {
                    let mac = withAdjustedLength(bytes, upTo: offset, lengthField: UInt16(end - headerSize)) { hmac(key, $0) }
                    checks.integrityValid = constantTimeEqual(mac, value)
                }
            } else {
                guard attributes.count < maximumAttributes else {
                    throw STUNError(field: "attributes", message: "more than \(maximumAttributes)")
                }
                attributes.append(STUNAttribute(type, value))
            }
            offset = end
        }
        return (STUNMessage(method: method, class: cls, transactionID: transactionID, attributes: attributes), checks)
    }

    /// `parse` over an array (tests, the ICE agent's non-real-time paths).
    public static func parse(_ bytes: [UInt8], key: [UInt8]? = nil,
                             hmac: STUNIntegrity? = nil) throws(STUNError) -> (message: STUNMessage, checks: Checks) {
        let result: Result<(message: STUNMessage, checks: Checks), STUNError> = bytes.withUnsafeBytes { raw in
            do throws(STUNError) { return .success(try parse(raw, key: key, hmac: hmac)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The datagram: attributes, then MESSAGE-INTEGRITY when `key` is given, then FINGERPRINT
    /// (ICE requires both on every check, RFC 8445 §7.2.2).
    public func serialize(key: [UInt8]? = nil, hmac: STUNIntegrity? = nil, fingerprint: Bool = true) -> [UInt8] {
        precondition(transactionID.count == 12, "a STUN transaction id is 12 bytes")
        var out: [UInt8] = []
        out.reserveCapacity(STUNMessage.headerSize + attributes.reduce(0) { $0 + 4 + (($1.value.count + 3) & ~3) } + 32)
        append16(&out, messageType)
        append16(&out, 0)
        out += STUNAttribute.bigEndian(UInt64(STUNMessage.magicCookie), bytes: 4)
        out += transactionID
        for a in attributes { appendAttribute(&out, a.type, a.value) }
        if let key, let hmac {
            let start = out.count
            setLength(&out, out.count + 24 - STUNMessage.headerSize)
            let mac = out.withUnsafeBytes { hmac(key, UnsafeRawBufferPointer(rebasing: $0[0..<start])) }
            appendAttribute(&out, STUNAttributeType.messageIntegrity.rawValue, mac)
        }
        if fingerprint {
            setLength(&out, out.count + 8 - STUNMessage.headerSize)
            let crc = out.withUnsafeBytes { crc32Raw($0) } ^ STUNMessage.fingerprintXor
            appendAttribute(&out, STUNAttributeType.fingerprint.rawValue, STUNAttribute.bigEndian(UInt64(crc), bytes: 4))
        }
        setLength(&out, out.count - STUNMessage.headerSize)
        return out
    }

    private func appendAttribute(_ out: inout [UInt8], _ type: UInt16, _ value: [UInt8]) {
        append16(&out, type)
        append16(&out, UInt16(value.count))
        out += value
        while out.count % 4 != 0 { out.append(0) }
    }
    private func append16(_ out: inout [UInt8], _ v: UInt16) { out.append(UInt8(v >> 8)); out.append(UInt8(v & 0xFF)) }
    private func setLength(_ out: inout [UInt8], _ length: Int) { out[2] = UInt8(length >> 8); out[3] = UInt8(length & 0xFF) }

    // MARK: Helpers

    static func readU16(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt16 { UInt16(b[at]) << 8 | UInt16(b[at + 1]) }
    static func readU32(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    /// Runs `body` over bytes[0..<end] with the header's length field replaced by `lengthField`
    /// (both MESSAGE-INTEGRITY and FINGERPRINT are computed as if the message ended with them).
    static func withAdjustedLength<R>(_ bytes: UnsafeRawBufferPointer, upTo end: Int, lengthField: UInt16,
                                      _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var copy = Array(bytes[0..<end])
        copy[2] = UInt8(lengthField >> 8)
        copy[3] = UInt8(lengthField & 0xFF)
        return copy.withUnsafeBytes(body)
    }

    static func crc32(_ bytes: UnsafeRawBufferPointer, upTo end: Int, lengthField: UInt16) -> UInt32 {
        withAdjustedLength(bytes, upTo: end, lengthField: lengthField) { crc32Raw($0) }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}

/// CRC-32 (ISO-HDLC, the one zlib and STUN use: reflected polynomial 0xEDB88320).
func crc32Raw(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for b in bytes { crc = crc32Table[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
    return crc ^ 0xFFFF_FFFF
}

private let crc32Table: [UInt32] = (0..<256).map { i -> UInt32 in
    var c = UInt32(i)
    for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    return c
}
