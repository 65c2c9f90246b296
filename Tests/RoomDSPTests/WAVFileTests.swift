import RoomBase
import RoomDSP
import XCTest

/// Builds WAV byte buffers chunk by chunk, so each test states exactly what is malformed.
struct WAVBuilder {
    var bytes: [UInt8] = []

    static func u16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF)] }
    static func u32(_ v: Int) -> [UInt8] { u16(v & 0xFFFF) + u16((v >> 16) & 0xFFFF) }

    static func fmt(code: Int = 1, channels: Int = 1, rate: Int = 16000, bits: Int = 16,
                    blockAlign: Int? = nil) -> [UInt8] {
        let align = blockAlign ?? channels * bits / 8
        return u16(code) + u16(channels) + u32(rate) + u32(rate * align) + u16(align) + u16(bits)
    }

    static func chunk(_ id: String, _ body: [UInt8], declaredSize: Int? = nil, pad: Bool = true) -> [UInt8] {
        var c = Array(id.utf8) + u32(declaredSize ?? body.count) + body
        if pad && body.count % 2 == 1 { c.append(0) }
        return c
    }

    static func riff(_ chunks: [UInt8]...) -> [UInt8] {
        let body = chunks.flatMap { $0 }
        return Array("RIFF".utf8) + u32(4 + body.count) + Array("WAVE".utf8) + body
    }

    static func pcm16(_ samples: [Int16]) -> [UInt8] { samples.flatMap { u16(Int(UInt16(bitPattern: $0))) } }
    static func float32(_ samples: [Float]) -> [UInt8] { samples.flatMap { u32(Int($0.bitPattern)) } }
}

final class WAVFileTests: XCTestCase {
    typealias B = WAVBuilder

    private func assertError(_ bytes: [UInt8], contains fragments: String..., file: StaticString = #filePath, line: UInt = #line) {
        do {
            let audio = try WAVFile.decode(bytes: bytes)
            XCTFail("decoded \(audio.frames) frames, expected an error", file: file, line: line)
        } catch {
            for f in fragments {
                XCTAssertTrue(error.message.contains(f), "\"\(error.message)\" does not mention \"\(f)\"", file: file, line: line)
            }
        }
    }

    func testEncodeDecodeRoundTrip() throws {
        let samples: [Int16] = [0, 1, -1, 32767, -32768, 1234, -4321, 42]
        let audio = WAVAudio(sampleRate: 48000, channels: 2, samples: samples)
        let bytes = WAVFile.encode(audio)
        XCTAssertEqual(bytes.count, 44 + samples.count * 2)
        XCTAssertEqual(Array(bytes[0..<4]), Array("RIFF".utf8))
        XCTAssertEqual(Array(bytes[36..<40]), Array("data".utf8))
        let decoded = try WAVFile.decode(bytes: bytes)
        XCTAssertEqual(decoded, audio)
        XCTAssertEqual(decoded.frames, 4)
    }

    func testEncodeDropsAPartialFrame() throws {
        let bytes = WAVFile.encode(WAVAudio(sampleRate: 8000, channels: 2, samples: [1, 2, 3]))
        let decoded = try WAVFile.decode(bytes: bytes)
        XCTAssertEqual(decoded.samples, [1, 2])
    }

    func testFloatSamplesUseTheSharedScale() {
        let audio = WAVAudio(sampleRate: 8000, channels: 1, samples: [-32768, 0, 16384])
        XCTAssertEqual(audio.floatSamples, [-1, 0, 0.5])
    }

    func testSkipsUnknownChunksAndOddPadding() throws {
        let list = B.chunk("LIST", Array("INFOISFT\u{5}\0\0\0roomd".utf8))   // odd length → pad byte
        XCTAssertEqual(list.count % 2, 0)
        let bytes = B.riff(B.chunk("fmt ", B.fmt()), list, B.chunk("junk", [1, 2, 3]), B.chunk("data", B.pcm16([5, -5, 7])))
        let audio = try WAVFile.decode(bytes: bytes)
        XCTAssertEqual(audio.samples, [5, -5, 7])
        XCTAssertEqual(audio.sampleRate, 16000)
        XCTAssertEqual(audio.channels, 1)
    }

    func testFmtChunkLargerThan16BytesIsAccepted() throws {
        let fmt18 = B.fmt() + B.u16(0)   // WAVEFORMATEX with cbSize = 0
        let audio = try WAVFile.decode(bytes: B.riff(B.chunk("fmt ", fmt18), B.chunk("data", B.pcm16([9]))))
        XCTAssertEqual(audio.samples, [9])
    }

    func testFloat32IsConvertedWithClipping() throws {
        let floats: [Float] = [0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, .nan, .infinity, -.infinity]
        let bytes = B.riff(B.chunk("fmt ", B.fmt(code: 3, channels: 2, rate: 48000, bits: 32)), B.chunk("data", B.float32(floats)))
        let audio = try WAVFile.decode(bytes: bytes)
        XCTAssertEqual(audio.channels, 2)
        XCTAssertEqual(audio.frames, 5)
        XCTAssertEqual(audio.samples, [0, 16384, -16384, 32767, -32768, 32767, -32768, 0, 32767, -32768])
    }

    func testWaveFormatExtensibleFloat() throws {
        // cbSize 22, valid bits, channel mask, SubFormat GUID starting with 0x0003 (IEEE float).
        let ext = B.fmt(code: 0xFFFE, channels: 4, rate: 16000, bits: 32) + B.u16(22) + B.u16(32) + B.u32(0x33)
            + B.u16(3) + [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        let audio = try WAVFile.decode(bytes: B.riff(B.chunk("fmt ", ext), B.chunk("data", B.float32([0.25, 0, 0, -0.25]))))
        XCTAssertEqual(audio.channels, 4)
        XCTAssertEqual(audio.samples, [8192, 0, 0, -8192])
    }

    func testDataBeforeFmtIsAccepted() throws {
        let audio = try WAVFile.decode(bytes: B.riff(B.chunk("data", B.pcm16([3, 4])), B.chunk("fmt ", B.fmt())))
        XCTAssertEqual(audio.samples, [3, 4])
    }

    // MARK: Malformed input, each named in the error

    func testTooShort() { assertError(Array("RIFF".utf8), contains: "too short", "4 bytes") }

    func testNotRIFF() {
        assertError(Array("RIFX\0\0\0\0WAVE".utf8), contains: "no RIFF header", "\"RIFX\"")
        assertError([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 8), contains: "no RIFF header", "ff d8 ff e0")
    }

    func testNotWAVE() { assertError(Array("RIFF\u{4}\0\0\0AVI ".utf8), contains: "\"AVI \"", "expected \"WAVE\"") }

    func testNoFmt() { assertError(B.riff(B.chunk("data", B.pcm16([1]))), contains: "no fmt chunk") }

    func testNoData() { assertError(B.riff(B.chunk("fmt ", B.fmt())), contains: "no data chunk") }

    func testUnsupportedFormatCode() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(code: 2)), B.chunk("data", [0, 0])),
                    contains: "format code 0x0002", "ADPCM", "PCM or IEEE float only")
        assertError(B.riff(B.chunk("fmt ", B.fmt(code: 0x55)), B.chunk("data", [0, 0])), contains: "0x0055", "MP3")
    }

    func testUnsupportedBitDepth() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(bits: 24)), B.chunk("data", [0, 0, 0])),
                    contains: "fmt chunk: bits per sample 24 is not supported", "16-bit PCM or 32-bit float only")
        assertError(B.riff(B.chunk("fmt ", B.fmt(bits: 8)), B.chunk("data", [0])), contains: "bits per sample 8")
        assertError(B.riff(B.chunk("fmt ", B.fmt(code: 3, bits: 64)), B.chunk("data", [UInt8](repeating: 0, count: 8))),
                    contains: "bits per sample 64", "float")
    }

    func testChannelCount() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(channels: 0, blockAlign: 2)), B.chunk("data", [0, 0])), contains: "0 channels")
        assertError(B.riff(B.chunk("fmt ", B.fmt(channels: 33)), B.chunk("data", [0, 0])), contains: "33 channels", "at most 32")
    }

    func testRateZero() { assertError(B.riff(B.chunk("fmt ", B.fmt(rate: 0)), B.chunk("data", [0, 0])), contains: "sample rate is 0") }

    func testBlockAlignMismatch() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(channels: 2, blockAlign: 2)), B.chunk("data", [0, 0])),
                    contains: "block align 2", "expected 4")
    }

    func testDataNotWholeFrames() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(channels: 2)), B.chunk("data", [0, 0, 0, 0, 0, 0])),
                    contains: "data chunk: 6 bytes", "4-byte frames")
    }

    func testTruncatedChunk() {
        let bytes = B.riff(B.chunk("fmt ", B.fmt()), B.chunk("data", [1, 0, 2, 0], declaredSize: 1000))
        assertError(bytes, contains: "\"data\" chunk", "1000 bytes", "only 4 remain", "truncated")
        assertError(B.riff(B.chunk("fmt ", B.fmt())) + [0x64, 0x61], contains: "truncated chunk header")
    }

    func testShortFmt() { assertError(B.riff(B.chunk("fmt ", [1, 0, 1, 0]), B.chunk("data", [0, 0])), contains: "fmt chunk: 4 bytes", "at least 16") }

    func testDuplicateChunks() {
        assertError(B.riff(B.chunk("fmt ", B.fmt()), B.chunk("fmt ", B.fmt()), B.chunk("data", [0, 0])), contains: "fmt chunk: appears twice")
        assertError(B.riff(B.chunk("fmt ", B.fmt()), B.chunk("data", [0, 0]), B.chunk("data", [0, 0])), contains: "data chunk: appears twice")
    }

    func testExtensibleWithShortExtension() {
        assertError(B.riff(B.chunk("fmt ", B.fmt(code: 0xFFFE) + B.u16(0)), B.chunk("data", [0, 0])), contains: "WAVE_FORMAT_EXTENSIBLE")
    }

    /// No byte sequence may trap: every prefix of valid files, random garbage, random
    /// corruptions of valid files and random chunk sizes must each give audio or a WAVError.
    func testArbitraryBytesNeverTrap() {
        var rng = SplitMix64(seed: 0x5EED)
        let valid = [
            WAVFile.encode(WAVAudio(sampleRate: 16000, channels: 3, samples: (0..<99).map { Int16($0 * 300 - 15000) })),
            B.riff(B.chunk("fmt ", B.fmt(code: 3, channels: 2, bits: 32)), B.chunk("LIST", [1, 2, 3]),
                   B.chunk("data", B.float32([0.1, -0.2, 0.3, 4]))),
        ]
        var decoded = 0, rejected = 0
        func attempt(_ bytes: [UInt8]) {
            do {
                let a = try WAVFile.decode(bytes: bytes)
                XCTAssertEqual(a.samples.count % a.channels, 0)
                decoded += 1
            } catch {
                XCTAssertFalse(error.message.isEmpty)
                rejected += 1
            }
        }
        for v in valid {
            for n in 0...v.count { attempt(Array(v[0..<n])) }
            for _ in 0..<2000 {
                var c = v
                for _ in 0..<(1 + Int(rng.next() % 4)) { c[Int(rng.next() % UInt64(c.count))] = UInt8(truncatingIfNeeded: rng.next()) }
                attempt(c)
            }
        }
        for _ in 0..<3000 {
            let n = Int(rng.next() % 80)
            var bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if rng.next() % 2 == 0 && n >= 12 {   // plausible header, random chunks after it
                bytes.replaceSubrange(0..<4, with: Array("RIFF".utf8))
                bytes.replaceSubrange(8..<12, with: Array("WAVE".utf8))
            }
            attempt(bytes)
        }
        XCTAssertGreaterThan(decoded, 2, "the valid files themselves must decode")
        XCTAssertGreaterThan(rejected, 1000)
    }
}

