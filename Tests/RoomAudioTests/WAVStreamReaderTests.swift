import Glibc
import RoomAudio
import RoomBase
import RoomDSP
import RoomSystem
import RoomTestSupport
import XCTest

/// `roomd --far-end` reads its file as it plays (issue 9: held whole, a 24 s file was 2.3 MB of
/// roomd's resident set). What a streamed file plays must be what the whole-file decoder gives.
final class WAVStreamReaderTests: XCTestCase {
    private func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        close(fd)
    }

    /// A stereo file with a LIST chunk of odd size before the data: the reader finds the data,
    /// returns the first channel, in pieces of any size, and starts over at the end.
    func testStreamsTheFirstChannelInPiecesAndLoops() throws {
        let dir = makeTemporaryDirectory("wavstream")
        defer { dir.remove() }
        let frames = 1000
        var samples: [Int16] = []
        for i in 0..<frames { samples += [Int16(i), Int16(-i)] }
        var bytes = WAVFile.encode(WAVAudio(sampleRate: 48000, channels: 2, samples: samples))
        // LIST chunk (5 bytes + pad) between fmt and data.
        let list: [UInt8] = Array("LIST".utf8) + [5, 0, 0, 0] + Array("hello".utf8) + [0]
        bytes.insert(contentsOf: list, at: 36)
        write(bytes, to: dir.path + "/s.wav")

        let reader = try WAVStreamReader(path: dir.path + "/s.wav", loops: true)
        XCTAssertEqual(reader.layout.channels, 2)
        XCTAssertEqual(reader.layout.frames, frames)
        var got: [Int16] = []
        var piece = [Int16](repeating: 0, count: 333)
        while got.count < 2500 {
            let n = piece.withUnsafeMutableBufferPointer { reader.read(into: $0) }
            XCTAssertEqual(n, 333, "a looping file always fills the request")
            got += piece[0..<n]
        }
        for k in 0..<got.count { if got[k] != Int16(k % frames) { XCTFail("sample \(k): \(got[k]), expected \(k % frames)"); break } }
    }

    /// Without looping the stream ends at the file's end; a float file converts like the
    /// whole-file decoder; the feed ring takes what fits.
    func testFloatFileOnceEndsAndFeedsARing() throws {
        let dir = makeTemporaryDirectory("wavstream")
        defer { dir.remove() }
        let frames = 300
        var bytes: [UInt8] = []
        func u16(_ v: Int) { bytes.append(UInt8(truncatingIfNeeded: v)); bytes.append(UInt8(truncatingIfNeeded: v >> 8)) }
        func u32(_ v: Int) { u16(v & 0xFFFF); u16(v >> 16) }
        bytes += Array("RIFF".utf8); u32(36 + frames * 4); bytes += Array("WAVE".utf8)
        bytes += Array("fmt ".utf8); u32(16); u16(3); u16(1); u32(48000); u32(48000 * 4); u16(4); u16(32)
        bytes += Array("data".utf8); u32(frames * 4)
        for i in 0..<frames { u32(Int(Float(Double(i) / Double(frames) - 0.5).bitPattern)) }
        write(bytes, to: dir.path + "/f.wav")
        let whole = try WAVFile.decode(bytes: bytes).samples

        let reader = try WAVStreamReader(path: dir.path + "/f.wav", loops: false)
        let ring = SPSCRing<Int16>(capacity: 256)
        var scratch = [Int16](repeating: 0, count: 100)
        reader.feed(ring, scratch: &scratch)
        XCTAssertEqual(ring.availableToRead, 256, "the feed fills the ring")
        var out: [Int16] = []
        while let s = ring.pop() { out.append(s) }
        reader.feed(ring, scratch: &scratch)
        XCTAssertEqual(ring.availableToRead, frames - 256, "then the rest of the file, and no more")
        XCTAssertTrue(reader.finished)
        while let s = ring.pop() { out.append(s) }
        XCTAssertEqual(out, whole)
    }

    /// A file that is not a WAV, or that is truncated, is refused at open, naming the file.
    func testBadFilesAreRefusedNamingTheFile() throws {
        let dir = makeTemporaryDirectory("wavstream")
        defer { dir.remove() }
        write(Array("not a wav at all".utf8), to: dir.path + "/bad.wav")
        XCTAssertThrowsError(try WAVStreamReader(path: dir.path + "/bad.wav", loops: true)) { error in
            XCTAssertTrue("\(error)".contains("bad.wav") && "\(error)".contains("RIFF"), "\(error)")
        }
        let good = WAVFile.encode(WAVAudio(sampleRate: 48000, channels: 1, samples: [Int16](repeating: 1, count: 100)))
        write(Array(good.prefix(100)), to: dir.path + "/cut.wav")
        XCTAssertThrowsError(try WAVStreamReader(path: dir.path + "/cut.wav", loops: true)) { error in
            XCTAssertTrue("\(error)".contains("cut.wav") && "\(error)".contains("truncated"), "\(error)")
        }
        XCTAssertThrowsError(try WAVStreamReader(path: dir.path + "/missing.wav", loops: true)) { error in
            XCTAssertTrue("\(error)".contains("missing.wav"), "\(error)")
        }
    }
}
