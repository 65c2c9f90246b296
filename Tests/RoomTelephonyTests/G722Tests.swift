import Foundation
@testable import RoomTelephony
import XCTest

/// G.722 against libspandsp, the coder Debian's baresip (our far end in call tests) uses:
/// Tests/Fixtures/g722 holds its encoding of a synthetic signal (speech-like sounds, noise
/// bursts, silence, full-scale clipping, chirps), its decoding of those bytes, and its decoding
/// of random bytes, all written by scripts/g722-oracle/make-fixtures.py.
final class G722Tests: XCTestCase {
    private static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/g722")

    private func bytes(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: Self.fixtures.appendingPathComponent(name)))
    }

    private func samples(_ name: String) throws -> [Int16] {
        let data = try Data(contentsOf: Self.fixtures.appendingPathComponent(name))
        return data.withUnsafeBytes { raw in
            (0..<data.count / 2).map { Int16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * $0, as: Int16.self)) }
        }
    }

    /// Encodes `input` in pieces of `piece` samples (the last may be shorter) with one encoder.
    private func encode(_ input: [Int16], piece: Int, with encoder: G722Encoder = G722Encoder()) -> [UInt8] {
        var output = [UInt8](repeating: 0xEE, count: input.count / 2)
        input.withUnsafeBufferPointer { samples in
            output.withUnsafeMutableBufferPointer { bytes in
                var done = 0
                while done < input.count {
                    let n = min(piece, input.count - done)
                    let written = encoder.encode(samples.baseAddress! + done, count: n, into: bytes.baseAddress! + done / 2)
                    XCTAssertEqual(written, n / 2)
                    done += n
                }
            }
        }
        return output
    }

    private func decode(_ input: [UInt8], piece: Int, with decoder: G722Decoder = G722Decoder()) -> [Int16] {
        var output = [Int16](repeating: 0x3EEE, count: 2 * input.count)
        input.withUnsafeBufferPointer { bytes in
            output.withUnsafeMutableBufferPointer { samples in
                var done = 0
                while done < input.count {
                    let n = min(piece, input.count - done)
                    let written = decoder.decode(bytes.baseAddress! + done, count: n, into: samples.baseAddress! + 2 * done)
                    XCTAssertEqual(written, 2 * n)
                    done += n
                }
            }
        }
        return output
    }

    /// The first index where two sequences differ, for a message that says where to look.
    private func firstDifference<T: Equatable>(_ a: [T], _ b: [T]) -> String {
        guard a.count == b.count else { return "lengths \(a.count) and \(b.count)" }
        guard let i = a.indices.first(where: { a[$0] != b[$0] }) else { return "none" }
        return "first at \(i): \(a[i]) vs \(b[i])"
    }

    func testEncoderMatchesLibspandspByteForByte() throws {
        let input = try samples("input.s16")
        let expected = try bytes("input.g722")
        XCTAssertEqual(input.count, 2 * expected.count)
        let ours = encode(input, piece: input.count)
        XCTAssert(ours == expected, "encoder differs from libspandsp: \(firstDifference(ours, expected))")
    }

    /// Every sample, with the decoder storing overloads as libspandsp 0.0.6 does (wrapped):
    /// the synthesis filter's full sums agree, not only the samples within 16 bits.
    func testDecoderMatchesLibspandspSampleForSample() throws {
        try assertDecodesLikeLibspandsp("input.g722", "input-decoded.s16")
    }

    /// Random bytes include codes no encoder sends (the lower band's 0-3) and sequences that
    /// drive the predictors and the output filter into their limits.
    func testDecoderMatchesLibspandspOnRandomBytes() throws {
        try assertDecodesLikeLibspandsp("random.g722", "random-decoded.s16")
    }

    private func assertDecodesLikeLibspandsp(_ input: String, _ oracle: String, line: UInt = #line) throws {
        let wrapping = G722Decoder()
        wrapping.wrapsOverloadedOutput = true
        let expected = try samples(oracle)
        let ours = decode(try bytes(input), piece: Int.max, with: wrapping)
        XCTAssert(ours == expected, "decoder differs from libspandsp on \(input): \(firstDifference(ours, expected))", line: line)
    }

    /// What roomd plays: the same samples as libspandsp except where the output overflows
    /// 16 bits, which it saturates instead of wrapping. Both fixtures overflow somewhere
    /// (the clipped passages; random codes), so the difference is exercised.
    func testDecoderSaturatesWhereLibspandsp006Wraps() throws {
        for (name, oracle) in [("input.g722", "input-decoded.s16"), ("random.g722", "random-decoded.s16")] {
            let expected = try samples(oracle)
            let ours = decode(try bytes(name), piece: 160)
            XCTAssertEqual(ours.count, expected.count)
            let differing = ours.indices.filter { ours[$0] != expected[$0] }
            let notAtALimit = differing.filter { ours[$0] != .max && ours[$0] != .min }
            XCTAssert(notAtALimit.isEmpty, "\(name): \(notAtALimit.count) samples differ from libspandsp's "
                + "without being an overload, the first at \(notAtALimit.first ?? 0)")
            XCTAssertGreaterThan(differing.count, 0, "\(name) no longer overloads the decoder")
        }
    }

    /// A call encodes 10 or 20 ms at a time: the state carried between calls must make the
    /// pieces' bytes the same as one call's.
    func testEncodingAndDecodingInFramesEqualsWhole() throws {
        let input = try samples("input.s16")
        let whole = encode(input, piece: input.count)
        XCTAssertEqual(encode(input, piece: 160), whole, "10 ms pieces")
        XCTAssertEqual(encode(input, piece: 320), whole, "20 ms pieces")
        let decodedWhole = decode(whole, piece: whole.count)
        XCTAssertEqual(decode(whole, piece: 80), decodedWhole, "10 ms pieces")
        XCTAssertEqual(decode(whole, piece: 160), decodedWhole, "20 ms pieces")
    }

    func testResetStartsANewStreamIdentically() throws {
        let input = try samples("input.s16")
        let encoder = G722Encoder()
        let first = encode(input, piece: 320, with: encoder)
        // Stop half-way through a loud part, so the state is far from the initial one.
        _ = encode(Array(input[0..<24_000]), piece: 320, with: encoder)
        encoder.reset()
        XCTAssertEqual(encode(input, piece: 320, with: encoder), first)

        let decoder = G722Decoder()
        let decoded = decode(first, piece: 160, with: decoder)
        _ = decode(Array(first[0..<12_000]), piece: 160, with: decoder)
        decoder.reset()
        XCTAssertEqual(decode(first, piece: 160, with: decoder), decoded)
    }

    /// Independent of the oracle: a 1 kHz tone at −12 dBFS comes through at the same level
    /// and with the codec's noise well below it. The codec delays by 22 samples (the two
    /// filters' 23 taps), so the output is compared with the input that many samples back.
    func testToneKeepsItsLevelAndSNR() {
        let rate = 16_000.0
        let input = (0..<16_000).map { Int16((8_192 * sin(2 * Double.pi * 1_000 * Double($0) / rate)).rounded()) }
        let output = decode(encode(input, piece: 320), piece: 160)
        let delay = 22
        var inputPower = 0.0, outputPower = 0.0, noisePower = 0.0
        // Skip the first 0.25 s, while the scale factors grow from their reset values.
        for n in 4_000..<input.count {
            let x = Double(input[n - delay]), y = Double(output[n])
            inputPower += x * x
            outputPower += y * y
            noisePower += (y - x) * (y - x)
        }
        let levelChange = 10 * log10(outputPower / inputPower)
        let snr = 10 * log10(inputPower / noisePower)
        XCTAssertLessThan(abs(levelChange), 0.5, "level changed by \(levelChange) dB")
        XCTAssertGreaterThan(snr, 30, "SNR \(snr) dB")
    }
}
