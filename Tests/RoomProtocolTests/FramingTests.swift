import RoomProtocol
import XCTest

final class FramingTests: XCTestCase {
    private func frame(_ text: String) -> [UInt8] { try! FrameEncoder().frame(Array(text.utf8)) }

    func testEncoderWritesBigEndianLength() throws {
        let payload = [UInt8](repeating: 0x41, count: 0x0102)
        let framed = try FrameEncoder().frame(payload)
        XCTAssertEqual(Array(framed.prefix(4)), [0, 0, 0x01, 0x02])
        XCTAssertEqual(Array(framed.dropFirst(4)), payload)
    }

    func testWholeFrameInOneChunk() throws {
        var decoder = FrameDecoder()
        XCTAssertEqual(try decoder.feed(frame(#"{"type":"ping","t":1}"#)), [Array(#"{"type":"ping","t":1}"#.utf8)])
        XCTAssertEqual(decoder.bufferedByteCount, 0)
    }

    func testOneByteAtATime() throws {
        let texts = [#"{"type":"leave"}"#, #"{"type":"ping","t":42}"#, "{}"]
        let stream = texts.flatMap(frame)
        var decoder = FrameDecoder()
        var out: [[UInt8]] = []
        for (i, byte) in stream.enumerated() {
            let got = try decoder.feed([byte])
            // A frame comes out exactly when its last byte arrives, not earlier or later.
            if !got.isEmpty { XCTAssertEqual(out.reduce(4) { $0 + $1.count + 4 } + got[0].count - 1, i) }
            out += got
        }
        XCTAssertEqual(out, texts.map { Array($0.utf8) })
    }

    func testManyFramesInOneChunkAndHeaderSplitAcrossChunks() throws {
        let texts = (0 ..< 100).map { #"{"type":"ping","t":\#($0)}"# }
        let stream = texts.flatMap(frame)
        var decoder = FrameDecoder()
        XCTAssertEqual(try decoder.feed(stream), texts.map { Array($0.utf8) })

        // Cut inside the second frame's header.
        let first = frame("{}")
        let second = frame(#"{"a":1}"#)
        let joined = first + second
        var split = FrameDecoder()
        XCTAssertEqual(try split.feed(joined.prefix(first.count + 2)), [Array("{}".utf8)])
        XCTAssertEqual(split.bufferedByteCount, 2)
        XCTAssertEqual(try split.feed(joined.dropFirst(first.count + 2)), [Array(#"{"a":1}"#.utf8)])
    }

    func testRandomChunkingReassemblesEverything() throws {
        var generator = SystemRandomNumberGenerator()
        let payloads = (0 ..< 200).map { i in [UInt8](repeating: UInt8(i & 0xFF), count: Int.random(in: 1 ... 3000, using: &generator)) }
        let stream = try payloads.flatMap { try FrameEncoder().frame($0) }
        for _ in 0 ..< 5 {
            var decoder = FrameDecoder()
            var out: [[UInt8]] = []
            var i = 0
            while i < stream.count {
                let n = min(Int.random(in: 1 ... 5000, using: &generator), stream.count - i)
                try decoder.feed(stream[i ..< i + n], into: &out)
                XCTAssertLessThanOrEqual(decoder.bufferedByteCount, 4 + 3000)
                i += n
            }
            XCTAssertEqual(out, payloads)
        }
    }

    func testNonContiguousInput() throws {
        var decoder = FrameDecoder()
        let stream = frame(#"{"x":1}"#)
        XCTAssertEqual(try decoder.feed(stream.lazy.map { $0 }), [Array(#"{"x":1}"#.utf8)])
    }

    func testOversizeIsRefusedFromTheHeaderAlone() {
        var decoder = FrameDecoder()
        // 64 KiB + 1 announced, no body sent: the error must not wait for the body.
        XCTAssertThrowsError(try decoder.feed([0x00, 0x01, 0x00, 0x01])) { error in
            XCTAssertEqual(error as? FrameError, .oversize(declared: 65537, limit: 65536))
        }
        XCTAssertEqual(decoder.bufferedByteCount, 0)
        // And the maximum itself is fine.
        var atLimit = FrameDecoder()
        XCTAssertNoThrow(try atLimit.feed([0x00, 0x01, 0x00, 0x00]))
    }

    func testHugeDeclaredLengthDoesNotAllocate() {
        var decoder = FrameDecoder()
        XCTAssertThrowsError(try decoder.feed([0xFF, 0xFF, 0xFF, 0xFF, 0x7B])) { error in
            XCTAssertEqual(error as? FrameError, .oversize(declared: Int(UInt32.max), limit: 65536))
        }
    }

    func testConfigurableLimit() throws {
        var decoder = FrameDecoder(maxFrameSize: 16)
        XCTAssertEqual(try decoder.feed(FrameEncoder(maxFrameSize: 16).frame([UInt8](repeating: 1, count: 16))).count, 1)
        XCTAssertThrowsError(try decoder.feed([0, 0, 0, 17])) { error in
            XCTAssertEqual(error as? FrameError, .oversize(declared: 17, limit: 16))
        }
        XCTAssertThrowsError(try FrameEncoder(maxFrameSize: 16).frame([UInt8](repeating: 1, count: 17))) { error in
            XCTAssertEqual(error as? FrameError, .payloadTooLarge(size: 17, limit: 16))
        }
        // Nonsense limits are clamped, not trapped on.
        XCTAssertEqual(FrameDecoder(maxFrameSize: -5).maxFrameSize, 1)
        XCTAssertEqual(FrameDecoder(maxFrameSize: .max).maxFrameSize, Int(UInt32.max))
    }

    func testZeroLengthIsAnError() {
        var decoder = FrameDecoder()
        XCTAssertThrowsError(try decoder.feed([0, 0, 0, 0])) { XCTAssertEqual($0 as? FrameError, .emptyFrame) }
        XCTAssertThrowsError(try FrameEncoder().frame([UInt8]())) { XCTAssertEqual($0 as? FrameError, .emptyFrame) }
    }

    func testFramesBeforeAnErrorAreDeliveredAndTheDecoderStaysFailed() {
        var decoder = FrameDecoder(maxFrameSize: 100)
        var out: [[UInt8]] = []
        let stream = frame(#"{"type":"leave"}"#) + [0, 0, 1, 0] + frame("{}")
        XCTAssertThrowsError(try decoder.feed(stream, into: &out))
        XCTAssertEqual(out, [Array(#"{"type":"leave"}"#.utf8)])
        XCTAssertEqual(decoder.error, .oversize(declared: 256, limit: 100))
        // Framing is lost for good: later good-looking bytes are not trusted.
        XCTAssertThrowsError(try decoder.feed(frame("{}"))) {
            XCTAssertEqual($0 as? FrameError, .oversize(declared: 256, limit: 100))
        }
        XCTAssertEqual(decoder.bufferedByteCount, 0)
    }
}
