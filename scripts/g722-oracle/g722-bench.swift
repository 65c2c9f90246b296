// The cost of roomd's G.722 per 20 ms frame, from the release build's own object code
// (`swift build -c release --target RoomTelephony`; bench.sh links this file against it).
// Dev-only, not part of the Swift package.
//
//   g722-bench IN.s16 SECONDS      µs per 20 ms frame, encode and decode, over IN's first
//                                  second repeated (the frames `g722-oracle bench` times)
//
// Under LD_PRELOAD=libroomallocprobe.so (the package's RoomAllocProbe) it first counts the
// heap allocations and Swift retains made inside encode and decode over one second with fresh
// coders (so the tables' first use is included), then times.
import Foundation
import RoomTelephony

@main
enum G722Bench {
    typealias Counter = @convention(c) () -> UInt

    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count == 3, let seconds = Int(arguments[2]),
              let raw = FileManager.default.contents(atPath: arguments[1]), raw.count >= 32_000 else {
            print("usage: g722-bench IN.s16 SECONDS   (IN at least 1 s of 16 kHz s16le)")
            exit(2)
        }
        let input = (0..<16_000).map { Int16(bitPattern: UInt16(raw[2 * $0]) | UInt16(raw[2 * $0 + 1]) << 8) }
        var bytes = [UInt8](repeating: 0, count: 160)
        var output = [Int16](repeating: 0, count: 320)

        if let allocations = counter("roomallocprobe_thread_count"), let retains = counter("roomallocprobe_thread_retains") {
            // Plain buffers, so that the counts are the coders' own and not the arrays' that
            // a call with `&array` would retain.
            let frameBytes = UnsafeMutablePointer<UInt8>.allocate(capacity: 160)
            let frameSamples = UnsafeMutablePointer<Int16>.allocate(capacity: 320)
            let encoder = G722Encoder(), decoder = G722Decoder()
            var allocated: UInt = 0, retained: UInt = 0
            input.withUnsafeBufferPointer { samples in
                for frame in 0..<50 {
                    let a0 = allocations(), r0 = retains()
                    _ = encoder.encode(samples.baseAddress! + 320 * frame, count: 320, into: frameBytes)
                    _ = decoder.decode(frameBytes, count: 160, into: frameSamples)
                    allocated += allocations() - a0
                    retained += retains() - r0
                }
            }
            print("inside encode and decode, 50 frames: \(allocated) allocations, \(retained) retains")
        }

        let frames = seconds * 50
        let encoder = G722Encoder(), decoder = G722Decoder()
        var encodeTime: UInt64 = 0, decodeTime: UInt64 = 0, checksum = 0
        input.withUnsafeBufferPointer { samples in
            for frame in 0..<frames {
                let start = samples.baseAddress! + 320 * (frame % 50)
                let t0 = DispatchTime.now().uptimeNanoseconds
                _ = encoder.encode(start, count: 320, into: &bytes)
                let t1 = DispatchTime.now().uptimeNanoseconds
                _ = decoder.decode(bytes, count: 160, into: &output)
                let t2 = DispatchTime.now().uptimeNanoseconds
                encodeTime += t1 - t0
                decodeTime += t2 - t1
                checksum &+= Int(output[frame % 320])
            }
        }
        print(String(format: "%d frames of 20 ms: encode %.2f µs/frame, decode %.2f µs/frame (checksum %d)",
                     frames, Double(encodeTime) / Double(frames) / 1000, Double(decodeTime) / Double(frames) / 1000,
                     checksum))
    }

    static func counter(_ name: String) -> Counter? {
        dlsym(nil, name).map { unsafeBitCast($0, to: Counter.self) }
    }
}
