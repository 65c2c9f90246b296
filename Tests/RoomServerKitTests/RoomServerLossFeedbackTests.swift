import RoomCore
import RoomProtocol
import RoomServerKit
import RoomSystem
import XCTest

/// `loss_report` → `receiver_loss`: the server tells each sender the worst loss its listeners
/// report (docs/protocol.md, "Loss feedback").
final class RoomServerLossFeedbackTests: XCTestCase {
    private func receiverLosses(_ client: TestClient) -> [SignalMessage.ReceiverLoss] {
        client.messages.compactMap { if case let .receiverLoss(l) = $0.body { l } else { nil } }
    }

    func testTheSenderHearsTheWorstReportOfItsListeners() throws {
        let h = try ServerHarness { $0.lossReportIntervalMs = 200; $0.lossReportMaxAgeMs = 600 }
        let alice = try h.join("alice", role: .streamer, publish: true)
        let bob = try h.join("bob"), carol = try h.join("carol")
        XCTAssertEqual(alice.welcome?.lossReportIntervalMs, 200)
        let ssrc = try XCTUnwrap(alice.welcome?.ssrc)

        bob.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [12])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).count == 1 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 12, receivers: 1))
        // A worse report within the interval: sent at once only when it rises by 2 % or more.
        carol.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [25])))
        h.settle(seconds: 0.05)
        XCTAssertEqual(receiverLosses(alice).count, 1, "a rise of 1.3 % waits for the interval")
        carol.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [80])))
        XCTAssertTrue(h.run { self.receiverLosses(alice).count == 2 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 80, receivers: 2))
        // Nobody else hears about alice's loss; reports are events (no ok without an id).
        XCTAssertTrue(receiverLosses(bob).isEmpty && receiverLosses(carol).isEmpty)
        XCTAssertFalse(bob.has { if case .ok = $0 { true } else { false } })

        // Carol's report ages out: after the interval the worst is bob's again.
        h.settle(seconds: 0.7)
        bob.send(.lossReport(.init(ssrcs: [ssrc], lostPermille: [0])), id: 5)
        XCTAssertTrue(h.run { bob.gotOK(5) && self.receiverLosses(alice).count == 3 })
        XCTAssertEqual(receiverLosses(alice).last, .init(lostPermille: 0, receivers: 1))
        XCTAssertEqual(h.server.statistics.receiverLossSent, 3)
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
