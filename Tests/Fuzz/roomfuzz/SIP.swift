import RoomSIP
import RoomSystem

/// SIP datagrams at the user agent's socket (issue 29), as the registrar's address sends them:
/// osip's parser (libosipparser2, not instrumented: a crash in it still stops the run) and
/// RoomSIP's reading of the answers to its REGISTERs — challenges, granted times, 423, errors.
///
/// So that answers reach past "no such transaction", the harness plays the registrar: it reads
/// the agent's latest REGISTER and replaces `$VIA`, `$FROM`, `$TO`, `$CONTACT`, `$CALLID` and `$CSEQ` in the
/// input with that request's values before sending it (the seeds in corpus/sip use them). A
/// fresh agent every 64 inputs keeps osip's transaction lists short.
///
/// Checked: a registration holds 1 s to a day; a failure names a status from 100 to 699 or none;
/// the agent always has a REGISTER out or a state that says why not.
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
        var datagram = input
        for (token, value) in [("$VIA", header("Via")), ("$FROM", header("From")), ("$TO", header("To")), ("$CONTACT", header("Contact")),
                               ("$CALLID", header("Call-ID")), ("$CSEQ", cseqNumber())] {
            datagram = replacing(Array(token.utf8), with: value, in: datagram)
        }
        _ = try? registrar.send(datagram, to: agent.localAddress)
        pump()
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
                lastRequest = Array(UnsafeRawBufferPointer(rebasing: buffer[0 ..< d.count]))
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
