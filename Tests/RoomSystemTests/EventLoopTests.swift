import Glibc
import RoomSystem
import Synchronization
import XCTest

final class EventLoopTests: XCTestCase {
    func testTimersFireInDeadlineOrderNeverEarly() throws {
        let loop = try EventLoop()
        let start = monotonicNanoseconds()
        var fired: [(Int, UInt64)] = []
        for ms in [30, 10, 20] {
            loop.schedule(after: .milliseconds(ms)) { fired.append((ms, monotonicNanoseconds() - start)) }
        }
        XCTAssertTrue(try runLoop(loop) { fired.count == 3 })
        XCTAssertEqual(fired.map(\.0), [10, 20, 30])
        for (ms, elapsed) in fired {
            XCTAssertGreaterThanOrEqual(elapsed, UInt64(ms) * 1_000_000, "timer \(ms) ms fired early")
            XCTAssertLessThan(elapsed, UInt64(ms + 500) * 1_000_000, "timer \(ms) ms fired very late")
        }
        XCTAssertEqual(loop.timerCount, 0)
    }

    func testSameDeadlineKeepsSchedulingOrderAndZeroDelayIsNotReentrant() throws {
        let loop = try EventLoop()
        var order: [Int] = []
        for i in 0..<5 { loop.schedule(after: .zero) { order.append(i) } }
        XCTAssertTrue(order.isEmpty)
        // A zero-delay timer that re-arms itself must not spin inside one iteration.
        var rearms = 0
        func rearm() { loop.schedule(after: .zero) { rearms += 1; if rearms < 1000 { rearm() } } }
        rearm()
        try loop.runOnce(timeout: .zero)
        XCTAssertEqual(order, [0, 1, 2, 3, 4])
        XCTAssertEqual(rearms, 1)
    }

    func testCancelAndRepeatingTimers() throws {
        let loop = try EventLoop()
        var cancelledFired = false
        let doomed = loop.schedule(after: .milliseconds(10)) { cancelledFired = true }
        loop.cancel(doomed)
        loop.cancel(doomed) // twice is fine

        var ticks: [UInt64] = []
        var repeating: EventLoop.TimerID?
        repeating = loop.schedule(after: .milliseconds(5), repeating: .milliseconds(10)) {
            ticks.append(monotonicNanoseconds())
            if ticks.count == 3 { loop.cancel(repeating!) } // cancels itself
        }
        var done = false
        loop.schedule(after: .milliseconds(100)) { done = true }
        XCTAssertTrue(try runLoop(loop) { done })
        XCTAssertFalse(cancelledFired)
        XCTAssertEqual(ticks.count, 3)
        for (a, b) in zip(ticks, ticks.dropFirst()) {
            XCTAssertGreaterThanOrEqual(b - a, 9_000_000) // ~10 ms apart, never a burst
        }
        XCTAssertEqual(loop.timerCount, 0)
    }

    func testManyCancelledTimersDoNotAccumulate() throws {
        let loop = try EventLoop()
        var fired = 0
        // A keep-alive re-armed on every packet: cancel + schedule, thousands of times.
        var timer = loop.schedule(after: .seconds(60)) { fired += 1 }
        for _ in 0..<10_000 {
            loop.cancel(timer)
            timer = loop.schedule(after: .seconds(60)) { fired += 1 }
        }
        XCTAssertEqual(loop.timerCount, 1)
        try loop.runOnce(timeout: .zero)
        XCTAssertEqual(fired, 0)
    }

    func testPostFromAnotherThreadRunsOnTheLoopThread() throws {
        let loop = try EventLoop()
        let loopThread = UInt(pthread_self())
        let ranOn = Mutex<[UInt]>([])
        let remote = loop.remote
        let poster = try NativeThread(name: "poster") {
            for _ in 0..<100 {
                remote.post { ranOn.withLock { $0.append(UInt(pthread_self())) } }
            }
            remote.post { remote.stop() }
        }
        try loop.run() // returns when the last posted closure stops it
        poster.join()
        let threads = ranOn.withLock { $0 }
        XCTAssertEqual(threads.count, 100)
        XCTAssertTrue(threads.allSatisfy { $0 == loopThread })
    }

    /// Issue 10 (6): work too long for the loop (roomd's self-test analysis) runs on a worker
    /// while the loop goes on serving (timers here); the result comes back on the loop thread.
    func testRunOffLoopKeepsTheLoopServingAndDeliversOnTheLoopThread() throws {
        let loop = try EventLoop()
        let loopThread = UInt(pthread_self())
        var ticks = 0
        let timer = loop.schedule(after: .milliseconds(10), repeating: .milliseconds(10)) { ticks += 1 }
        var delivered: (value: Int, thread: UInt, ticksMeanwhile: Int)?
        try loop.runOffLoop(name: "worker", { () -> Int in
            sleepMilliseconds(400)   // stands for a long computation
            return 42
        }, completion: { value in delivered = (value, UInt(pthread_self()), ticks) })
        XCTAssertEqual(loop.offLoopJobCount, 1)
        XCTAssertTrue(try runLoop(loop, seconds: 10) { delivered != nil })
        loop.cancel(timer)
        XCTAssertEqual(delivered?.value, 42)
        XCTAssertEqual(delivered?.thread, loopThread, "the completion runs on the loop thread")
        // 40 ticks if the machine were idle; the loop blocked by the work would see none.
        XCTAssertGreaterThan(delivered?.ticksMeanwhile ?? 0, 5, "timers kept firing while the work ran")
        XCTAssertEqual(loop.offLoopJobCount, 0)
    }

    /// Threads carry their name (cut to the kernel's 15 bytes), so `top -H` tells roomd's audio
    /// thread from the rest (issue 10 (5)).
    func testNativeThreadsAreNamed() throws {
        let names = Mutex<[String]>([])
        for name in ["roomd-audio", "a-name-longer-than-fifteen", "ton-élan-éé-éé"] {
            let t = try NativeThread(name: name) { names.withLock { $0.append(NativeThread.currentName()) } }
            t.join()
        }
        let seen = names.withLock { $0 }
        XCTAssertEqual(seen, ["roomd-audio", "a-name-longer-t", "ton-élan-éé-"])
        XCTAssertTrue(seen.allSatisfy { $0.utf8.count <= 15 })
    }

    func testStopFromAnotherThreadEndsRunWhileIdle() throws {
        let loop = try EventLoop()
        let remote = loop.remote
        let stopper = try NativeThread(name: "stopper") {
            sleepMilliseconds(50)
            remote.stop()
        }
        let start = monotonicNanoseconds()
        try loop.run()
        stopper.join()
        XCTAssertLessThan(monotonicNanoseconds() - start, 5_000_000_000)
    }

    func testEventSignalCountsWakeUpsFromAnotherThread() throws {
        let loop = try EventLoop()
        var total: UInt64 = 0
        let source = try EventSignalSource(loop: loop) { total += $0 }
        let signal = source.signal
        let signaller = try NativeThread(name: "audio-like") {
            for _ in 0..<1000 { signal.signal() }
        }
        XCTAssertTrue(try runLoop(loop) { total == 1000 })
        signaller.join()
        source.close()
        XCTAssertEqual(loop.registrationCount, 0)
    }

    func testDeregisteredHandlerIsNotCalledForAnEventAlreadyQueued() throws {
        let loop = try EventLoop()
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        var fds2: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds2), 0)
        defer { for fd in fds + fds2 { close(fd) } }
        var calls = 0
        var second: EventLoop.IORegistration?
        // Whichever handler runs first deregisters the other; only one may run.
        let first = try loop.register(fds[0], interest: .readable) { _ in
            calls += 1
            if let second { loop.deregister(second) }
        }
        second = try loop.register(fds2[0], interest: .readable) { _ in
            calls += 1
            loop.deregister(first)
        }
        var byte: UInt8 = 1
        write(fds[1], &byte, 1)
        write(fds2[1], &byte, 1)
        try loop.runOnce(timeout: .milliseconds(100))
        XCTAssertEqual(calls, 1)
    }
}
