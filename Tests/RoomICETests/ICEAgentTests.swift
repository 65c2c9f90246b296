import XCTest
@testable import RoomICE

/// Two agents wired through an in-memory network (loss, address translation, one-way cuts), on
/// a simulated clock in 5 ms steps.
final class ICEAgentTests: XCTestCase {
    /// The HMAC roomd uses (OpenSSL's HMAC-SHA1).
    static let mac: STUNIntegrity = STUNMessage.hmacSHA1

    struct Net {
        var rng: UInt64 = 0x1234_5678
        var loss = 0.0
        /// Source translation: what the far side sees a sender's address as (a NAT).
        var seenAs: [STUNAddress: STUNAddress] = [:]
        /// Deliver nothing from this address.
        var cut: Set<STUNAddress> = []
        mutating func next() -> UInt64 {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return rng >> 11
        }
        var dropped = 0
        mutating func drops() -> Bool {
            let drop = loss > 0 && Double(next() % 10_000) / 10_000 < loss
            if drop { dropped += 1 }
            return drop
        }
    }

    let addrA = STUNAddress(ip: [10, 0, 0, 1], port: 5000)
    let addrB = STUNAddress(ip: [10, 0, 0, 2], port: 6000)
    let unreachable = STUNAddress(ip: [203, 0, 113, 9], port: 7000)
    let credA = ICEAgent.Credentials(ufrag: "aaaa", password: "password-of-agent-a-0001")
    let credB = ICEAgent.Credentials(ufrag: "bbbb", password: "password-of-agent-b-0001")

    func agents(roleB: ICEAgent.Role = .controlled, seed: UInt64 = 1) -> (ICEAgent, ICEAgent) {
        var s1 = seed, s2 = seed &+ 99
        let a = ICEAgent(role: .controlling, local: credA, tieBreaker: 1000, hmac: Self.mac,
                         random: { s1 = s1 &* 6364136223846793005 &+ 1; return s1 })
        let b = ICEAgent(role: roleB, local: credB, tieBreaker: 2000, hmac: Self.mac,
                         random: { s2 = s2 &* 6364136223846793005 &+ 1; return s2 })
        return (a, b)
    }

    /// Runs until `until` ms or both agents settle; returns the time it stopped.
    @discardableResult
    func run(_ a: ICEAgent, _ b: ICEAgent, net: inout Net, from start: UInt64 = 0, until end: UInt64,
             stopWhenConnected: Bool = true) -> UInt64 {
        var now = start
        while now <= end {
            a.tick(now: now)
            b.tick(now: now)
            for (agent, other, from) in [(a, b, addrA), (b, a, addrB)] {
                for out in agent.takeOutgoing() {
                    if net.cut.contains(from) || net.drops() { continue }
                    let target = other === b ? addrB : addrA
                    guard out.destination == target || out.destination == (net.seenAs[target] ?? target) else { continue }
                    let source = net.seenAs[from] ?? from
                    out.bytes.withUnsafeBytes { _ = other.receive($0, from: source, now: now) }
                }
            }
            if stopWhenConnected && a.state == .connected && b.state == .connected { return now }
            now += 5
        }
        return now
    }

    func testTwoAgentsConnectPastAnUnreachableHigherPriorityCandidate() {
        let (a, b) = agents()
        var net = Net()
        b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
        a.start(remote: credB, candidates: [(unreachable, 2_130_706_431), (addrB, 1_694_498_815)], now: 0)
        let t = run(a, b, net: &net, until: 5_000)
        XCTAssertEqual(a.state, .connected)
        XCTAssertEqual(b.state, .connected)
        XCTAssertEqual(a.selectedAddress, addrB)
        XCTAssertEqual(b.selectedAddress, addrA)
        XCTAssertLessThan(t, 500, "a lossless network connects within a few pacing intervals")
        XCTAssertGreaterThanOrEqual(a.counters.checksSent, 3, "the unreachable pair, the working one, the nomination")
        XCTAssertEqual(a.counters.refusedIntegrity + b.counters.refusedIntegrity, 0)
    }

    func testPeerReflexiveCandidateBehindATranslation() {
        let (a, b) = agents()
        var net = Net()
        let natted = STUNAddress(ip: [198, 51, 100, 1], port: 40000)
        net.seenAs[addrA] = natted   // B sees A's packets come from the NAT's address
        b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
        a.start(remote: credB, candidates: [(addrB, 2_130_706_431)], now: 0)
        run(a, b, net: &net, until: 5_000)
        XCTAssertEqual(a.state, .connected)
        XCTAssertEqual(b.state, .connected)
        XCTAssertEqual(b.selectedAddress, natted, "B sends where A's checks came from")
        XCTAssertGreaterThanOrEqual(b.counters.peerReflexiveCandidates, 1)
    }

    func testWrongPasswordNeverConnectsAndSaysWhy() {
        let (a, b) = agents()
        var net = Net()
        b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
        a.start(remote: ICEAgent.Credentials(ufrag: "bbbb", password: "not-the-password-of-b-1"), candidates: [(addrB, 1)], now: 0)
        a.remoteCandidatesComplete()
        run(a, b, net: &net, until: 12_000, stopWhenConnected: false)
        XCTAssertNotEqual(a.state, .connected)
        guard case .failed(let why) = a.state else { return XCTFail("expected failed, got \(a.state)") }
        XCTAssertTrue(why.contains("no candidate pair answered"), why)
        XCTAssertGreaterThan(b.counters.refusedIntegrity, 0, "B refused A's checks signed with the wrong key")
    }

    func testRoleConflictResolvesByTieBreaker() {
        let (a, b) = agents(roleB: .controlling)
        var net = Net()
        b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
        a.start(remote: credB, candidates: [(addrB, 2_130_706_431)], now: 0)
        run(a, b, net: &net, until: 5_000)
        XCTAssertEqual(a.state, .connected)
        XCTAssertEqual(b.state, .connected)
        XCTAssertEqual(b.role, .controlling, "the larger tie-breaker keeps controlling")
        XCTAssertEqual(a.role, .controlled)
        XCTAssertGreaterThan(a.counters.roleConflicts + b.counters.roleConflicts, 0)
    }

    func testHeavyLossStillConnectsThroughRetransmissions() {
        var retransmissions = 0, dropped = 0
        for seed in UInt64(1)...8 {
            let (a, b) = agents(seed: seed)
            var net = Net(rng: seed &* 7919, loss: 0.3)
            b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
            a.start(remote: credB, candidates: [(addrB, 2_130_706_431)], now: 0)
            run(a, b, net: &net, until: 10_000)
            XCTAssertEqual(a.state, .connected, "seed \(seed)")
            XCTAssertEqual(b.state, .connected, "seed \(seed)")
            retransmissions += a.counters.retransmissions + b.counters.retransmissions
            dropped += net.dropped
        }
        XCTAssertGreaterThan(dropped, 0)
        XCTAssertGreaterThan(retransmissions, 0, "some check must have been lost and sent again")
    }

    func testConsentIsRefreshedAndLostWhenThePeerGoesSilent() {
        let (a, b) = agents()
        var net = Net()
        b.start(remote: credA, candidates: [(addrA, 2_130_706_431)], now: 0)
        a.start(remote: credB, candidates: [(addrB, 2_130_706_431)], now: 0)
        let connectedAt = run(a, b, net: &net, until: 5_000)
        // A minute of consent checks answered: still connected, ~12 checks each way.
        run(a, b, net: &net, from: connectedAt + 5, until: connectedAt + 60_000, stopWhenConnected: false)
        XCTAssertEqual(a.state, .connected)
        XCTAssertEqual(b.state, .connected)
        XCTAssertTrue((9...16).contains(a.counters.consentChecks), "\(a.counters.consentChecks) consent checks in 60 s")
        // B goes silent: A loses consent 30 s after the last answer, not before 24 s.
        net.cut.insert(addrB)
        let silentFrom = connectedAt + 60_005
        var lostAt: UInt64?
        var now = silentFrom
        while now < silentFrom + 40_000 {
            run(a, b, net: &net, from: now, until: now, stopWhenConnected: false)
            if a.state == .consentLost { lostAt = now; break }
            now += 5
        }
        guard let lostAt else { return XCTFail("consent never lost") }
        XCTAssertGreaterThanOrEqual(lostAt - silentFrom, 24_000)
        XCTAssertLessThanOrEqual(lostAt - silentFrom, 30_000)
    }

    func testOtherDatagramsAreLeftToTheCaller() {
        let (a, _) = agents()
        let rtp: [UInt8] = [0x80, 111, 0, 1] + [UInt8](repeating: 0, count: 20)
        let dtls: [UInt8] = [22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 20)
        XCTAssertFalse(rtp.withUnsafeBytes { a.receive($0, from: addrB, now: 0) })
        XCTAssertFalse(dtls.withUnsafeBytes { a.receive($0, from: addrB, now: 0) })
    }
}
