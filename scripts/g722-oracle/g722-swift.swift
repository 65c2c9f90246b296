// roomd's Swift G.722 with the oracle's command line, for comparing the two on any input and
// for timing the release-optimized code. Dev-only: compiled by compare.sh and bench.sh with
// swiftc -O straight from Sources/RoomTelephony/G722*.swift, not by the Swift package.
//
//   g722-swift encode IN.s16 OUT.g722
//   g722-swift decode IN.g722 OUT.s16            (overloads wrapped, as libspandsp 0.0.6)
//   g722-swift bench IN.s16 SECONDS              (µs per 20 ms frame, encode and decode)
//
// Under LD_PRELOAD=libroomallocprobe.so (the package's RoomAllocProbe) the bench also counts
// the heap allocations and Swift retains made by the frames, the tables' first use included.
import Foundation

func readFile(_ path: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { fatalError("cannot read \(path)") }
    return [UInt8](data)
}

@main
enum G722Swift {
    static func main() {
        let arguments = CommandLine.arguments
        switch arguments.count > 1 ? arguments[1] : "" {
        case "encode" where arguments.count == 4:
            let raw = readFile(arguments[2])
            let samples = (0..<raw.count / 2).map { Int16(bitPattern: UInt16(raw[2 * $0]) | UInt16(raw[2 * $0 + 1]) << 8) }
            var bytes = [UInt8](repeating: 0, count: samples.count / 2)
            let written = G722Encoder().encode(samples, count: samples.count & ~1, into: &bytes)
            _ = FileManager.default.createFile(atPath: arguments[3], contents: Data(bytes[0..<written]))
        case "decode" where arguments.count == 4:
            let bytes = readFile(arguments[2])
            var samples = [Int16](repeating: 0, count: 2 * bytes.count)
            let decoder = G722Decoder()
            decoder.wrapsOverloadedOutput = true
            _ = decoder.decode(bytes, count: bytes.count, into: &samples)
            _ = FileManager.default.createFile(atPath: arguments[3], contents: samples.withUnsafeBytes { Data($0) })
        case "bench" where arguments.count == 4:
            // The input's first second, repeated: the same frames as the oracle's bench.
            let raw = readFile(arguments[2])
            let input = (0..<16_000).map { Int16(bitPattern: UInt16(raw[2 * $0]) | UInt16(raw[2 * $0 + 1]) << 8) }
            let frames = Int(arguments[3])! * 50
            var bytes = [UInt8](repeating: 0, count: 160)
            var output = [Int16](repeating: 0, count: 320)
            let encoder = G722Encoder(), decoder = G722Decoder()
            var encodeTime = 0.0, decodeTime = 0.0, checksum = 0
            typealias Counter = @convention(c) () -> UInt
            let allocations = dlsym(nil, "roomallocprobe_thread_count").map { unsafeBitCast($0, to: Counter.self) }
            let retains = dlsym(nil, "roomallocprobe_thread_retains").map { unsafeBitCast($0, to: Counter.self) }
            let allocationsBefore = allocations?() ?? 0, retainsBefore = retains?() ?? 0
            input.withUnsafeBufferPointer { samples in
                for frame in 0..<frames {
                    let start = samples.baseAddress! + 320 * (frame % 50)
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    _ = encoder.encode(start, count: 320, into: &bytes)
                    let t1 = DispatchTime.now().uptimeNanoseconds
                    _ = decoder.decode(bytes, count: 160, into: &output)
                    let t2 = DispatchTime.now().uptimeNanoseconds
                    encodeTime += Double(t1 - t0)
                    decodeTime += Double(t2 - t1)
                    checksum &+= Int(output[frame % 320])
                }
            }
            if let allocations, let retains {
                print("allocations in the frames: \(allocations() - allocationsBefore), retains: \(retains() - retainsBefore)")
            }
            print(String(format: "%d frames of 20 ms: encode %.2f µs/frame, decode %.2f µs/frame (checksum %d)",
                         frames, encodeTime / Double(frames) / 1000, decodeTime / Double(frames) / 1000, checksum))
        default:
            print("usage: g722-swift encode IN.s16 OUT.g722 | decode IN.g722 OUT.s16 | bench IN.s16 SECONDS")
            exit(2)
        }
    }
}
