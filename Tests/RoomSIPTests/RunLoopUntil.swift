import Foundation
import RoomSystem
import XCTest

extension XCTestCase {
    /// Runs `loop` until `done` or `seconds` pass; returns whether `done` came true. Polling,
    /// not sleeping: the waits are generous for a machine where another job keeps a core busy.
    func run(_ loop: EventLoop, seconds: Double, until done: () -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() {
            if Date() >= deadline { return false }
            try loop.runOnce(timeout: .milliseconds(20))
        }
        return true
    }
}
