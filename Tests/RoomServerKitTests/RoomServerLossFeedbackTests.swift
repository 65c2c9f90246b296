import RoomProtocol
@testable import RoomServerKit
import RoomSystem
import XCTest

/// `loss_report` → `receiver_loss`: the server tells each sender the loss its listeners share
/// (docs/protocol.md, "Loss feedback").
final class RoomServerLossFeedbackTests: XCTestCase {
    private func receiverLosses(_ client: TestClient) -> [SignalMessage.ReceiverLoss] {
        client.messages.compactMap { if case let .receiverLoss(l) = $0.body { l } else { nil } }
    }

    func testTheSenderHearsTheLossItsListenersShare() throws {
        let h = try ServerHarness { $0.lossReportIntervalMs = 200; $0.lossReportMaxAgeMs = 600 }
        let alice = try h.join("alice", role: .streamer, publish: true)
        let bob = try h.join("bob")
        XCTAssertEqual(alice.welcome?.lossReportIntervalMs, 200)
        let ssrc = try XCTUnwrap(alice.welcome?.ssrc)

        // Alone with alice, bob's report is the whole audience's.
        bob.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [12])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).count == 1 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 12, receivers: 1))

        let carol = try h.join("carol")
        h.settle(seconds: 0.25)
        // With two listeners the sender hears the second-worst: after carol's 80, bob's 12;
        // bob's 60 beside it is a 2 % rise, sent at once.
        carol.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [80])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).count == 2 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 12, receivers: 2), "one listener's loss is not the stream's")
        bob.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [60])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).count == 3 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 60, receivers: 2))
        // Nobody else hears about alice's loss; reports are events (no ok without an id).
        XCTAssertTrue(receiverLosses(bob).isEmpty && receiverLosses(carol).isEmpty)
        XCTAssertFalse(bob.has { if case .ok = $0 { true } else { false } })

        // Carol's report ages out: after the interval bob's is the only fresh one, and carol,
        // still listening, counts as no loss.
        h.settle(seconds: 0.7)
        bob.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [30])), id: 5)
        XCTAssertTrue(h.run { bob.gotOK(5) && self.receiverLosses(alice).count == 4 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 0, receivers: 1))
        XCTAssertEqual(h.server.statistics.receiverLossSent, 4)
    }

    /// Issue 27 item 8: one participant reporting total loss on every talker pushed all of
    /// them into FEC (the server forwarded the worst report). Now it changes nothing while the
    /// other listeners hear every packet.
    func testOneListenersReportsDoNotSteerTheSenders() throws {
        let h = try ServerHarness { $0.lossReportIntervalMs = 100; $0.lossReportMaxAgeMs = 600 }
        let alice = try h.join("alice", role: .streamer, publish: true)
        let dave = try h.join("dave", role: .streamer, publish: true)
        let bob = try h.join("bob"), mallory = try h.join("mallory")
        let ssrcs = try [XCTUnwrap(alice.welcome?.ssrc), XCTUnwrap(dave.welcome?.ssrc)]
        for _ in 0..<5 {
            mallory.send(.lossReport(.init(ssrcs: ssrcs, lostPermille: [1000, 1000])))
            bob.send(.lossReport(.init(ssrcs: ssrcs, lostPermille: [0, 0])))
            h.settle(seconds: 0.12)
        }
        for talker in [alice, dave] {
            let told = receiverLosses(talker)
            XCTAssertFalse(told.isEmpty)
            XCTAssertEqual(told.map(\.lostPermille).max(), 0, "told \(told)")
        }
        // A second listener losing as much makes it the stream's loss.
        bob.send(.lossReport(.init(ssrcs: ssrcs, lostPermille: [150, 0])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).last?.lostPermille == 150 })
        XCTAssertEqual(receiverLosses(dave).map(\.lostPermille).max(), 0)
    }

    func testTheSharedLossRule() {
        typealias S = RoomServer
        XCTAssertNil(S.sharedLoss(reports: [], listeners: 3))
        XCTAssertEqual(S.sharedLoss(reports: [400], listeners: 1), 400)
        XCTAssertEqual(S.sharedLoss(reports: [400], listeners: 0), 400, "the listener left since")
        XCTAssertEqual(S.sharedLoss(reports: [400], listeners: 4), 0)
        XCTAssertEqual(S.sharedLoss(reports: [400, 30, 90], listeners: 4), 90)
        XCTAssertEqual(S.sharedLoss(reports: [5, 400], listeners: 1), 5, "a stale report of one who left")
    }

    func testReportsOnStrangersAndOneselfAreIgnored() throws {
        let h = try ServerHarness { $0.lossReportIntervalMs = 100 }
        let alice = try h.join("alice", role: .streamer, publish: true)
        let eve = try h.join("eve", role: .streamer, publish: true, room: "elsewhere")
        let ssrc = try XCTUnwrap(alice.welcome?.ssrc)
        // From another room, about alice; from alice, about herself; an unknown SSRC.
        eve.send(.lossReport(.init(ssrcs: [ssrc, 12345], lostPermille: [900, 900])))
        alice.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [900])))
        h.settle(seconds: 0.3)
        XCTAssertTrue(receiverLosses(alice).isEmpty)
        XCTAssertTrue(receiverLosses(eve).isEmpty)
        XCTAssertNil(alice.lastError())
        XCTAssertNil(eve.lastError())
        // A malformed report is refused naming the field, and the connection stays.
        eve.sendJSON(#"{"type":"loss_report","id":3,"ssrcs":[1,2],"lost_permille":[5]}"#)
        XCTAssertTrue(h.run { eve.lastError()?.code == .invalidField })
        XCTAssertTrue(eve.lastError()?.message.contains("lost_permille") ?? false)
        eve.send(.ping(t: 1))
        XCTAssertTrue(h.run { eve.has { $0 == .pong(t: 1) } })
    }
}
