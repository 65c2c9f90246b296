import COSIP

/// What the call layer reads from a message osip parsed: its headers as osip writes them back
/// (full names, one list element a line, so a compact `v:` or a folded line reads like any
/// other), the tags, the Contact, the body. Copying Via, From, To, Call-ID, CSeq and
/// Record-Route into a response is copying these lines (RFC 3261 §8.2.6.2, §12.1.1).
struct SIPMessageView {
    let headers: [(name: String, value: String)]
    let body: String
    let method: String?
    let statusCode: Int
    let fromTag: String?
    let toTag: String?
    let cseqNumber: UInt32?
    let cseqMethod: String?
    /// The first Contact's URI, without its display name and parameters.
    let contactURI: String?
    let topViaBranch: String?

    init?(_ message: UnsafeMutablePointer<osip_message_t>) {
        osip_message_force_update(message)
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        guard osip_message_to_str(message, &text, &length) == OSIP_SUCCESS, let text else { return nil }
        let all = String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
        cosip_free(text)
        let split = all.utf8.firstRange(of: "\r\n\r\n".utf8)
        let head = split.map { String(all[..<$0.lowerBound]) } ?? all
        var headers: [(String, String)] = []
        for line in head.split(separator: "\r\n", omittingEmptySubsequences: true).dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmed))
        }
        self.headers = headers
        var bodyLength = 0
        if let b = cosip_body(message, &bodyLength) {
            body = String(decoding: UnsafeRawBufferPointer(start: b, count: bodyLength), as: UTF8.self)
        } else {
            body = ""
        }
        method = message.pointee.sip_method.map { String(cString: $0) }
        statusCode = Int(message.pointee.status_code)
        fromTag = cosip_tag(message.pointee.from).map { String(cString: $0) }
        toTag = cosip_tag(message.pointee.to).map { String(cString: $0) }
        if let cseq = message.pointee.cseq, let number = cseq.pointee.number {
            cseqNumber = UInt32(String(cString: number))
            cseqMethod = cseq.pointee.method.map { String(cString: $0) }
        } else {
            cseqNumber = nil
            cseqMethod = nil
        }
        var uri: String?
        if let contact = cosip_contact(message, 0), let url = contact.pointee.url {
            var text: UnsafeMutablePointer<CChar>?
            if osip_uri_to_str(url, &text) == OSIP_SUCCESS, let text {
                uri = String(cString: text)
                cosip_free(text)
            }
        }
        contactURI = uri
        topViaBranch = cosip_top_via_branch(message).map { String(cString: $0) }
    }

    /// Every value of the header `name` (case-insensitive), in order.
    func values(_ name: String) -> [String] {
        let lower = name.lowercased()
        return headers.filter { $0.name.lowercased() == lower }.map(\.value)
    }

    func value(_ name: String) -> String? { values(name).first }

    var callID: String? { value("Call-ID") }

    /// The header lines named `name`, each "Name: value\r\n", for copying into a response.
    func lines(_ name: String) -> String {
        values(name).map { "\(name): \($0)\r\n" }.joined()
    }

    /// The display name and URI of a From or To value (`"Alice" <sip:alice@host>;tag=x`).
    static func nameAndURI(_ value: String) -> (displayName: String?, uri: String) {
        guard let open = value.firstIndex(of: "<"), let close = value[open...].firstIndex(of: ">") else {
            return (nil, String(value.split(separator: ";", maxSplits: 1).first ?? ""))
        }
        let name = value[..<open].trimmed
        return (name.isEmpty ? nil : SIPUserAgent.unquoted(name), String(value[value.index(after: open) ..< close]))
    }
}
