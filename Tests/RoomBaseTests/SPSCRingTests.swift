import Foundation
import RoomBase
import XCTest

final class SPSCRingTests: XCTestCase {
    func testCapacityIsRoundedUpToAPowerOfTwo() {
        XCTAssertEqual(SPSCRing<Int>(capacity: 5).capacity, 8)
        XCTAssertEqual(SPSCRing<Int>(capacity: 256).capacity, 256)
        XCTAssertEqual(SPSCRing<Int>(capacity: 1).capacity, 2)
    }

    func testPushPopFIFOAndFull() {
        let ring = SPSCRing<Int>(capacity: 4)
        XCTAssertNil(ring.pop())
        XCTAssertEqual(ring.availableToRead, 0)
        XCTAssertEqual(ring.availableToWrite, 4)
        for i in 0..<4 { XCTAssertTrue(ring.push(i)) }
        XCTAssertFalse(ring.push(99), "a full ring must refuse, not overwrite")
        XCTAssertEqual(ring.availableToRead, 4)
        XCTAssertEqual(ring.availableToWrite, 0)
        for i in 0..<4 { XCTAssertEqual(ring.pop(), i) }
        XCTAssertNil(ring.pop())
    }

    func testWraparoundKeepsOrder() {
        let ring = SPSCRing<Int16>(capacity: 8)
        var next: Int16 = 0, expected: Int16 = 0
        // Push 5 / pop 3 repeatedly so head and tail cross the end of storage many times.
        for _ in 0..<100 {
            for _ in 0..<5 where ring.push(next) { next &+= 1 }
            for _ in 0..<3 { if let v = ring.pop() { XCTAssertEqual(v, expected); expected &+= 1 } }
        }
        while let v = ring.pop() { XCTAssertEqual(v, expected); expected &+= 1 }
        XCTAssertEqual(expected, next)
        XCTAssertGreaterThan(next, 200)
    }

    func testBulkWriteAndReadAcrossTheEnd() {
        let ring = SPSCRing<Int32>(capacity: 8)
        // Move the indices to 6 so the next bulk write wraps.
        for i in 0..<6 { XCTAssertTrue(ring.push(Int32(i))) }
        var sink = [Int32](repeating: -1, count: 6)
        XCTAssertEqual(sink.withUnsafeMutableBufferPointer { ring.read(into: $0) }, 6)
        XCTAssertEqual(sink, [0, 1, 2, 3, 4, 5])

        let source: [Int32] = Array(100..<110)   // 10 values, only 8 fit
        XCTAssertEqual(source.withUnsafeBufferPointer { ring.write(from: $0) }, 8)
        XCTAssertEqual(ring.availableToRead, 8)
        XCTAssertEqual(source.withUnsafeBufferPointer { ring.write(from: $0) }, 0, "full")

        var out = [Int32](repeating: 0, count: 3)
        XCTAssertEqual(out.withUnsafeMutableBufferPointer { ring.read(into: $0) }, 3)
        XCTAssertEqual(out, [100, 101, 102])
        var rest = [Int32](repeating: 0, count: 20)
        XCTAssertEqual(rest.withUnsafeMutableBufferPointer { ring.read(into: $0) }, 5)
        XCTAssertEqual(Array(rest[0..<5]), [103, 104, 105, 106, 107])
        XCTAssertEqual(rest.withUnsafeMutableBufferPointer { ring.read(into: $0) }, 0, "empty")
    }

    func testEmptyBuffersAreHarmless() {
        let ring = SPSCRing<Float>(capacity: 4)
        XCTAssertEqual(ring.write(from: UnsafeBufferPointer(start: nil, count: 0)), 0)
        XCTAssertEqual(ring.read(into: UnsafeMutableBufferPointer(start: nil, count: 0)), 0)
    }

    func testEnumElements() {
        enum Event: Equatable, BitwiseCopyable { case a(Int), b(Bool) }
        let ring = SPSCRing<Event>(capacity: 2)
        XCTAssertTrue(ring.push(.a(7)))
        XCTAssertTrue(ring.push(.b(true)))
        XCTAssertEqual(ring.pop(), .a(7))
        XCTAssertEqual(ring.pop(), .b(true))
    }

    /// One producer thread and one consumer thread hammer a small ring with mixed single and
    /// bulk operations; the consumer must see 0, 1, 2, … with no gap, repeat or reordering.
    /// Up to 2 000 000 values or 5 s of producing, whichever comes first, and at least 10 000
    /// (150 times round the ring): with other jobs on the machine both threads share one core,
    /// each side then moves at most 64 values per time slice, and a fixed count took over 60 s
    /// (a side that finds the ring full or empty yields its CPU, which helps only against its
    /// partner). Alone on two cores it moves all 2 000 000 in well under a second; with four
    /// CPU hogs beside it, 38 000-57 000.
    func testTwoThreadStressKeepsSequence() {
        let ring = SPSCRing<UInt64>(capacity: 64)
        let total: UInt64 = 2_000_000
        let done = DispatchSemaphore(value: 0)
        let result = Locked((received: UInt64(0), errors: 0))
        let produced = Locked(total)  // the whole count until the producer stops early

        let producer = Thread {
            var next: UInt64 = 0
            var block = [UInt64](repeating: 0, count: 17)
            let deadline = DispatchTime.now() + 5
            while next < total {
                if DispatchTime.now() > deadline { break }
                if next % 3 == 0 {
                    if ring.push(next) { next += 1 } else { sched_yield() }
                } else {
                    let n = Int(min(UInt64(block.count), total - next))
                    for i in 0..<n { block[i] = next + UInt64(i) }
                    let written = block.withUnsafeBufferPointer { ring.write(from: UnsafeBufferPointer(rebasing: $0[0..<n])) }
                    if written == 0 { sched_yield() }
                    next += UInt64(written)
                }
            }
            produced.set(next)
            done.signal()
        }
        let consumer = Thread {
            var expected: UInt64 = 0
            var errors = 0
            var block = [UInt64](repeating: 0, count: 13)
            while errors == 0 {
                if ring.availableToRead == 0 && expected >= produced.get() { break }
                if expected % 2 == 0 {
                    if let v = ring.pop() {
                        if v != expected { errors += 1 }
                        expected += 1
                    } else {
                        sched_yield()
                    }
                } else {
                    let n = block.withUnsafeMutableBufferPointer { ring.read(into: $0) }
                    for i in 0..<n where block[i] != expected + UInt64(i) { errors += 1 }
                    if n == 0 { sched_yield() }
                    expected += UInt64(n)
                }
            }
            result.set((expected, errors))
            done.signal()
        }
        producer.start()
        consumer.start()
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let (received, errors) = result.get()
        XCTAssertEqual(errors, 0, "values arrived out of order")
        XCTAssertEqual(received, produced.get(), "the consumer stopped short of what was produced")
        XCTAssertGreaterThanOrEqual(received, 10_000, "too few values crossed the ring to prove anything")
        XCTAssertEqual(ring.availableToRead, 0)
    }
}

/// A value the test's threads hand each other (the consumer's tally, the producer's final count).
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func set(_ value: Value) { lock.withLock { self.value = value } }
    func get() -> Value { lock.withLock { value } }
}
