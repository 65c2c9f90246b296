import RoomICE

/// One UDP datagram on the WebRTC media socket that `WebRTCMediaTransport` takes for STUN (first
/// byte below 4, RFC 7983): ICE connectivity checks and consent from anyone who can reach the
/// port, and the STUN server's answer to the server-reflexive request. The transport hands it to
/// `ICEAgent.receive` (or, while gathering, reads it with `STUNMessage.parse` and takes its
/// XOR-MAPPED-ADDRESS); the datagram goes through both.
///
/// An input starting with `S` is the rest as a STUN message the harness signs as the peer
/// would: its length field set, parsed, and written again with MESSAGE-INTEGRITY under the
/// password its class is checked with (a request: the agent's own; a response: the peer's)
/// and FINGERPRINT, so what lies behind the HMAC (USERNAME, roles, nomination, the responses
/// to the agent's own transactions) is reached.
///
/// Checked: parsing with and without the key agrees (the key only decides `integrityValid`); a
/// message that parses and starts with 0-3 passes `looksLikeSTUN`; its accessors never trap; written
/// again (`serialize` with the key) it parses to the same message with valid integrity and
/// fingerprint, and its XOR-MAPPED-ADDRESS re-encoded decodes to itself. Three agents take the
/// datagram — one not started (from an unknown address), one checking with its first check
/// in flight, one connected with a consent check in flight (both from the peer's candidate) —
/// and then a tick: `receive` claims exactly the datagrams `looksLikeSTUN` accepts; every
/// datagram an agent sends parses with valid integrity (under the peer's password for its
/// checks, its own for its answers) and fingerprint, and an answer carries the request's
/// transaction and, on success, the sender's address; a connected agent has a selected address,
/// the peer's candidate or where a check came from.
func fuzzSTUN(_ bytes: UnsafeRawBufferPointer) {
    var datagram = Array(bytes)
    if bytes.first == UInt8(ascii: "S") {
        guard let signed = stunSigned(Array(bytes.dropFirst())) else { return }
        datagram = signed
    }
    datagram.withUnsafeBytes { raw in
        stunParse(raw)
        for (name, make, from) in stunStages {
            let agent = make()
            let claimed = agent.receive(raw, from: from, now: 12_000)
            fuzzCheck(claimed == STUNMessage.looksLikeSTUN(raw), "\(name): receive says \(claimed) for a datagram looksLikeSTUN does not agree on")
            note("stun \(name): claimed \(claimed), \(agent.state), role \(agent.role), \(agent.counters)")
            agent.tick(now: 12_001)
            stunCheckAgent(agent, name, answering: raw, from: from)
        }
    }
}

private func stunParse(_ raw: UnsafeRawBufferPointer) {
    let plain: (message: STUNMessage, checks: STUNMessage.Checks)
    do { plain = try STUNMessage.parse(raw) } catch {
        note("stun refused: \(error)")
        fuzzCheck((try? STUNMessage.parse(raw, key: stunLocal.passwordBytes, hmac: STUNMessage.hmacSHA1)) == nil,
                  "refused without a key, parsed with one")
        return
    }
    let message = plain.message
    note("stun: \(message.messageClass) method \(message.method), \(message.attributes.count) attributes, checks \(plain.checks)")
    fuzzCheck(!plain.checks.integrityValid, "integrity valid without a key")
    if raw[0] < 4 { fuzzCheck(STUNMessage.looksLikeSTUN(raw), "parsed, starts with \(raw[0]), yet not STUN by its first bytes") }
    if let keyed = try? STUNMessage.parse(raw, key: stunLocal.passwordBytes, hmac: STUNMessage.hmacSHA1) {
        fuzzCheck(keyed.message == message && keyed.checks.hasIntegrity == plain.checks.hasIntegrity
                  && keyed.checks.fingerprintValid == plain.checks.fingerprintValid, "the key changed more than integrityValid")
    } else {
        fuzzCheck(false, "parsed without a key, refused with one")
    }
    _ = (message.username, message.priority, message.useCandidate, message.iceRole, message.errorCode)
    if let mapped = message.xorMappedAddress {
        _ = mapped.description
        let again = STUNAttribute.xorMappedAddress(mapped, transactionID: message.transactionID)
        fuzzCheck(STUNMessage(class: .success, transactionID: message.transactionID, attributes: [again]).xorMappedAddress == mapped,
                  "XOR-MAPPED-ADDRESS \(mapped) re-encoded decodes to something else")
    }
    let written = message.serialize(key: stunLocal.passwordBytes, hmac: STUNMessage.hmacSHA1)
    do {
        let back = try STUNMessage.parse(written, key: stunLocal.passwordBytes, hmac: STUNMessage.hmacSHA1)
        fuzzCheck(back.message == message, "a message written again parses to another")
        fuzzCheck(back.checks.integrityValid && back.checks.fingerprintValid, "a message written again does not verify: \(back.checks)")
    } catch {
        fuzzCheck(false, "a message written again does not parse: \(error)")
    }
}

/// Everything an agent sends must verify; answers must answer the datagram.
private func stunCheckAgent(_ agent: ICEAgent, _ name: String, answering raw: UnsafeRawBufferPointer, from: STUNAddress) {
    let request = (try? STUNMessage.parse(raw))?.message
    for out in agent.takeOutgoing() {
        let head = try? STUNMessage.parse(out.bytes)
        fuzzCheck(head != nil && out.bytes.withUnsafeBytes { STUNMessage.looksLikeSTUN($0) }, "\(name): the agent sent a datagram that is not STUN")
        guard let head else { return }
        let isCheck = head.message.messageClass == .request
        let key = isCheck ? stunRemote.passwordBytes : stunLocal.passwordBytes
        let verified = try? STUNMessage.parse(out.bytes, key: key, hmac: STUNMessage.hmacSHA1)
        fuzzCheck(verified?.checks.integrityValid == true && verified?.checks.fingerprintValid == true,
                  "\(name): the agent sent a \(head.message.messageClass) that does not verify")
        if !isCheck, let request, out.destination == from, request.messageClass == .request {
            fuzzCheck(head.message.transactionID == request.transactionID, "\(name): an answer to another transaction")
            if head.message.messageClass == .success {
                fuzzCheck(head.message.xorMappedAddress == from, "\(name): an answer that maps the sender to \(String(describing: head.message.xorMappedAddress))")
            }
        }
    }
    if agent.state == .connected {
        fuzzCheck(agent.selectedAddress == stunPeer || agent.selectedAddress == from,
                  "\(name): connected to \(String(describing: agent.selectedAddress))")
    }
}

/// The rest of an `S` input as the peer would send it, signed. Nil when it does not parse.
private func stunSigned(_ message: [UInt8]) -> [UInt8]? {
    guard message.count >= STUNMessage.headerSize, message.count - STUNMessage.headerSize <= 0xFFFF else { return nil }
    var bytes = message
    let length = bytes.count - STUNMessage.headerSize
    bytes[2] = UInt8(length >> 8)
    bytes[3] = UInt8(length & 0xFF)
    guard let parsed = try? STUNMessage.parse(bytes).message else { return nil }
    let key = parsed.messageClass == .request ? stunLocal.passwordBytes : stunRemote.passwordBytes
    return parsed.serialize(key: key, hmac: STUNMessage.hmacSHA1)
}

// MARK: The agents

/// roomd's side (it controls ICE towards Janus) and the peer's credentials; the peer's one
/// candidate. Seeds use them: USERNAME "roomd:janus" on the peer's checks.
private let stunLocal = ICEAgent.Credentials(ufrag: "roomd", password: "roomd-local-ice-password1")
private let stunRemote = ICEAgent.Credentials(ufrag: "janus", password: "janus-remote-ice-password")
private let stunPeer = STUNAddress(ip: [192, 0, 2, 7], port: 20000)
private let stunStranger = STUNAddress(ip: [198, 51, 100, 9], port: 30000)
private let stunLocalAddress = STUNAddress(ip: [192, 0, 2, 1], port: 5000)

/// Transaction ids come from a counter: random() gives 1, 2, 3 …, and an id is the first
/// value's 8 bytes then the second's first 4, little-endian. The first check is therefore
/// 01 00 00 00 00 00 00 00 02 00 00 00, the nominating check 03 … 04 …, the first consent
/// check 05 … 06 ….
private func stunAgent() -> ICEAgent {
    var counter: UInt64 = 0
    return ICEAgent(role: .controlling, local: stunLocal, tieBreaker: 0x5EED_0000_0000_0001, hmac: STUNMessage.hmacSHA1,
                    random: { counter += 1; return counter })
}

private func stunTransaction(_ a: UInt64, _ b: UInt64) -> [UInt8] {
    (0 ..< 8).map { UInt8(truncatingIfNeeded: a >> (8 * $0)) } + (0 ..< 4).map { UInt8(truncatingIfNeeded: b >> (8 * $0)) }
}

/// The peer's success answers to the first two checks (made once).
private let stunAnswers: [[UInt8]] = [(UInt64(1), UInt64(2)), (3, 4)].map { (pair: (UInt64, UInt64)) -> [UInt8] in
    let id = stunTransaction(pair.0, pair.1)
    return STUNMessage(class: .success, transactionID: id, attributes: [.xorMappedAddress(stunLocalAddress, transactionID: id)])
        .serialize(key: stunRemote.passwordBytes, hmac: STUNMessage.hmacSHA1)
}

/// `nonisolated(unsafe)`: the closures are not `Sendable`, and libFuzzer calls the harness from
/// one thread only.
nonisolated(unsafe) private let stunStages: [(String, () -> ICEAgent, STUNAddress)] = [
    ("new", { stunAgent() }, stunStranger),
    ("checking", {
        let agent = stunAgent()
        agent.start(remote: stunRemote, candidates: [(stunPeer, 2_130_706_431)], now: 10_000)
        agent.tick(now: 10_000)
        _ = agent.takeOutgoing()
        return agent
    }, stunPeer),
    ("connected", {
        let agent = stunAgent()
        agent.start(remote: stunRemote, candidates: [(stunPeer, 2_130_706_431)], now: 0)
        agent.tick(now: 0)
        for answer in stunAnswers { answer.withUnsafeBytes { _ = agent.receive($0, from: stunPeer, now: 1) } }
        agent.tick(now: 1 + agent.consentIntervalMs)
        _ = agent.takeOutgoing()
        if agent.state != .connected || agent.counters.consentChecks != 1 {
            fatalError("roomfuzz stun: the agent did not connect (\(agent.state)); the harness's script is out of date")
        }
        return agent
    }, stunPeer),
]

private extension ICEAgent.Credentials {
    var passwordBytes: [UInt8] { Array(password.utf8) }
}
