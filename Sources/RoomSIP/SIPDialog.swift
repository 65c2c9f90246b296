/// One dialog's state (RFC 3261 §12): what every request inside it must carry and where it goes.
/// Built by the UAS from the INVITE (route set = Record-Route in order) or by the UAC from the
/// 2xx (route set = Record-Route reversed); the far end's target is its latest Contact.
struct SIPDialog {
    let callID: String
    let localTag: String
    var remoteTag: String?
    /// Our From (UAC) or To (UAS) header value, our tag included.
    let localHeader: String
    /// The far end's header value, their tag included once known.
    var remoteHeader: String
    /// Where in-dialog requests are addressed (the Request-URI): the far end's Contact.
    var remoteTarget: String
    /// Route header values for in-dialog requests, in the order they are sent.
    var routeSet: [String]
    var localCSeq: UInt32
    /// The highest CSeq seen from the far end: a lower one is a stray or an old retransmission.
    var remoteCSeq: UInt32?

    /// The next hop's URI: the first route when loose routing (`;lr`), else the remote target.
    var nextHopURI: String {
        guard let first = routeSet.first else { return remoteTarget }
        return SIPMessageView.nameAndURI(first).uri
    }

    /// A request inside the dialog (BYE, re-INVITE, ACK for a 2xx). `cseq` is given because an
    /// ACK reuses its INVITE's number while every other request takes a new one.
    func request(_ method: String, cseq: UInt32, via: String, contact: String, body: (type: String, text: String)? = nil) -> String {
        var text = "\(method) \(remoteTarget) SIP/2.0\r\n"
            + "Via: \(via)\r\n"
            + "Max-Forwards: 70\r\n"
        for route in routeSet { text += "Route: \(route)\r\n" }
        text += "From: \(localHeader)\r\n"
            + "To: \(remoteHeader)\r\n"
            + "Call-ID: \(callID)\r\n"
            + "CSeq: \(cseq) \(method)\r\n"
        if method == "INVITE" { text += "Contact: \(contact)\r\nAllow: \(SIPUserAgent.allowedMethods)\r\n" }
        text += "User-Agent: roomd\r\n"
        if let body {
            text += "Content-Type: \(body.type)\r\nContent-Length: \(body.text.utf8.count)\r\n\r\n\(body.text)"
        } else {
            text += "Content-Length: 0\r\n\r\n"
        }
        return text
    }
}
