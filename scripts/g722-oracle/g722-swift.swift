// roomd's Swift G.722 with the oracle's command line, for comparing the two on any input.
// Dev-only: compiled by build-swift.sh with swiftc -O straight from
// Sources/RoomTelephony/G722*.swift (as part of the module, to reach the decoder's internal
// wrapping switch), not by the Swift package.
//
//   g722-swift encode IN.s16 OUT.g722
//   g722-swift decode IN.g722 OUT.s16            (overloads wrapped, as libspandsp 0.0.6)
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
        default:
            print("usage: g722-swift encode IN.s16 OUT.g722 | decode IN.g722 OUT.s16")
            exit(2)
        }
    }
}
