import RoomSDP
import RoomSIP
import RoomSystem

/// SIP datagrams at the user agent's socket (issue 29), as the registrar's address sends them:
/// osip's parser (libosipparser2, not instrumented: a crash in it still stops the run) and
/// RoomSIP's reading of the answers to its REGISTERs — challenges, granted times, 423, errors —
/// and the requests of calls: INVITE with its SDP offer (every other call is answered, the
/// others ring), CANCEL, ACK, re-INVITE, BYE, OPTIONS.
///
/// So that answers reach past "no such transaction", the harness plays the registrar: it reads
/// the agent's latest REGISTER and replaces `$VIA`, `$FROM`, `$TO`, `$CONTACT`, `$CALLID` and `$CSEQ` in the
/// input with that request's values before sending it (the seeds in corpus/sip use them), and
/// `$TOTAG` with the To tag of the agent's latest response (a call's dialog). `$NEXT` splits
/// an input into several datagrams sent in turn (INVITE, then CANCEL or ACK and BYE). A fresh
/// agent every 64 inputs keeps osip's transaction lists short.
///
/// An input that starts with `$STREAM` is a TLS connection's byte stream instead: its parts
/// (split at `$NEXT`) are the reads, cut into messages by `SIPStreamFramer` as `SIPTLSLink`
/// does, and each message goes to the agent. Checked there too: the framer never holds more
/// than its budgets, and the reads give the same messages as the whole stream at once.
///
/// Checked: a registration holds 1 s to a day; a failure names a status from 100 to 699 or none;
/// the agent always has a REGISTER out or a state that says why not; never more than two calls,
/// none of them ended.
func fuzzSIP(_ bytes: UnsafeRawBufferPointer) {
    SIPFuzzHarness.shared.deliver(Array(bytes))
}

final class SIPFuzzHarness {
    nonisolated(unsafe) static let shared = SIPFuzzHarness()

    private let loop: EventLoop
    private let registrar: UDPSocket
    private var agent: SIPUserAgent
    private var inputs = 0
    private var lastRequest: [UInt8] = []
    private var lastMessage: [UInt8] = []
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)

    init() {
        loop = try! EventLoop()
        registrar = try! UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        agent = Self.makeAgent(loop, registrar.localAddress)
    }

    private static func makeAgent(_ loop: EventLoop, _ registrar: SocketAddress) -> SIPUserAgent {
        let account = try! SIPAccount(registrar: registrar, domain: "fuzz.example", user: "room", password: "pw", expires: 60)
        let agent = try! SIPUserAgent(loop: loop, account: account, localAddress: .ipv4Loopback(port: 0))
        agent.retryInterval = .seconds(3_600)
        // The harness is the one source of everything: no budget, or most inputs would be dropped unread.
        agent.sourceBudget = (burst: 1e12, perSecond: 1e12)
        var answerNext = true
        agent.onIncomingCall = { call in
            defer { answerNext.toggle() }
            guard answerNext else { return }
            let key = SDESKey(inline: "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz")!
            try? call.answer(localMedia: CallLocalMedia(address: "127.0.0.1", port: 4000, security: .preferred(key)))
        }
        return agent
    }

    func deliver(_ input: [UInt8]) {
        inputs += 1
        if inputs % 64 == 0 {
            agent.close()
            agent = Self.makeAgent(loop, registrar.localAddress)
        }
        if agent.registrationState != .registering { agent.register() }
        pump()
        let streamMarker = Array("$STREAM".utf8)
        let isStream = input.starts(with: streamMarker)
        var framer = SIPStreamFramer(headerLimit: 4096, bodyLimit: 8192)
        var framedMessages: [[UInt8]] = []
        var framingFailed = false
        var wholeStream: [UInt8] = []
        for part in split(isStream ? Array(input.dropFirst(streamMarker.count)) : input, on: Array("$NEXT".utf8)).prefix(8) {
            var datagram = part
            for (token, value) in [("$VIA", header("Via")), ("$FROM", header("From")), ("$TOTAG", toTag()), ("$TO", header("To")),
                                   ("$CONTACT", header("Contact")), ("$CALLID", header("Call-ID")), ("$CSEQ", cseqNumber())] {
                datagram = replacing(Array(token.utf8), with: value, in: datagram)
            }
            if isStream {
                wholeStream += datagram
                guard !framingFailed else { continue }
                do throws(SIPStreamFramer.FramingError) {
                    for case .message(let message) in try framer.append(datagram) {
                        framedMessages.append(message)
                        _ = try? registrar.send(message, to: agent.localAddress)
                        pump()
                    }
                } catch {
                    framingFailed = true
                }
                fuzzCheck(framer.bufferedByteCount <= 4096 + 8192, "the framer holds \(framer.bufferedByteCount) bytes")
                continue
            }
            _ = try? registrar.send(datagram, to: agent.localAddress)
            pump()
        }
        if isStream {
            // However the stream was cut into reads, the same messages (up to a failure).
            var whole = SIPStreamFramer(headerLimit: 4096, bodyLimit: 8192)
            var all: [[UInt8]] = []
            if let items = try? whole.append(wholeStream) {
                for case .message(let m) in items { all.append(m) }
                fuzzCheck(framingFailed || all == framedMessages, "\(framedMessages.count) messages read in parts, \(all.count) whole")
            } else {
                fuzzCheck(framingFailed, "the whole stream fails to frame, its parts did not")
            }
        }
        fuzzCheck(agent.calls.count <= 2, "\(agent.calls.count) calls")
        fuzzCheck(agent.calls.allSatisfy { !$0.isEnded }, "an ended call is still listed")
        switch agent.registrationState {
        case .registered(let expires):
            fuzzCheck(expires >= 1 && expires <= 86_400, "registered for \(expires) s")
        case .failed(let failure):
            fuzzCheck(failure.statusCode.map { (100 ... 699).contains($0) } ?? true, "failure status \(String(describing: failure.statusCode))")
        case .registering, .unregistered:
            break
        }
    }

    /// Lets the agent read what came and answer; keeps the last REGISTER it sent.
    private func pump() {
        for _ in 0 ..< 2 {
            _ = try? loop.runOnce(timeout: .zero)
            while let d = (try? registrar.receive(into: buffer)) ?? nil {
                let message = Array(UnsafeRawBufferPointer(rebasing: buffer[0 ..< d.count]))
                if message.starts(with: Array("REGISTER ".utf8)) { lastRequest = message }
                lastMessage = message
            }
        }
    }

    private func header(_ name: String) -> [UInt8] {
        let text = String(decoding: lastRequest, as: UTF8.self)
        for line in text.split(separator: "\r\n") where line.hasPrefix(name + ": ") {
            return Array(line.dropFirst(name.count + 2).utf8)
        }
        return []
    }

    /// The To tag of the agent's latest message to the harness (a response to a call's INVITE).
    private func toTag() -> [UInt8] {
        let text = String(decoding: lastMessage, as: UTF8.self)
        for line in text.split(separator: "\r\n") where line.hasPrefix("To: ") {
            if let range = line.firstRange(of: ";tag=") { return Array(line[range.upperBound...].utf8) }
        }
        return []
    }

    private func split(_ bytes: [UInt8], on marker: [UInt8]) -> [[UInt8]] {
        var parts: [[UInt8]] = []
        var start = 0
        var i = 0
        while i + marker.count <= bytes.count {
            if bytes[i ..< i + marker.count].elementsEqual(marker) {
                parts.append(Array(bytes[start ..< i]))
                i += marker.count
                start = i
            } else {
                i += 1
            }
        }
        parts.append(Array(bytes[start...]))
        return parts
    }

    private func cseqNumber() -> [UInt8] { Array(header("CSeq").prefix { $0 != UInt8(ascii: " ") }) }

    private func replacing(_ token: [UInt8], with value: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= token.count else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if i + token.count <= bytes.count && bytes[i ..< i + token.count].elementsEqual(token) {
                out += value
                i += token.count
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }
}
