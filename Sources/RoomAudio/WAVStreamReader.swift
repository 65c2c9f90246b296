import RoomBase
import RoomDSP
import RoomSystem

/// A WAV file's first channel read from disk as it is needed (`roomd --far-end`), so playing a
/// file costs a small ring instead of the whole file in memory: a 24 s far-end file held whole
/// was 2.3 MB of roomd's resident set (issue 9's `roomd.rss_mb`). The counterpart of
/// `WAVRecorder`. On the event loop: `pread`s of a few kilobytes every 50 ms.
public final class WAVStreamReader {
    public let path: String
    public let layout: WAVFile.Layout
    /// Start over at the end of the data (`--far-end` loops unless `--far-end-once`).
    public let loops: Bool
    /// nil once a read failed (the stream ended).
    private var file: SystemFile?
    /// Next frame to read, from the start of the data chunk.
    private var frame = 0
    private var bytes: [UInt8] = []

    /// Opens `path` and reads its layout; throws naming the file (and what is wrong with it).
    public init(path: String, loops: Bool) throws(SystemError) {
        self.path = path
        self.loops = loops
        let file = try SystemFile(path: path, access: .read)
        let size = try file.size()
        do {
            layout = try WAVFile.layout(size: size) { offset, count in
                var chunk = [UInt8](repeating: 0, count: count)
                let n = chunk.withUnsafeMutableBytes { file.read(into: $0, at: offset) }
                return Array(chunk.prefix(max(0, n)))
            }
        } catch {
            throw SystemError("\(path): \(error)")
        }
        guard layout.frames > 0 else { throw SystemError("\(path): the data chunk holds no audio") }
        self.file = file
    }

    /// True once a file that does not loop has been read to its end.
    public var finished: Bool { !loops && frame >= layout.frames }

    /// Fills `out` with the next samples of the first channel; returns how many (fewer only at
    /// the end of a file that does not loop, or on a read error, which ends the stream).
    public func read(into out: UnsafeMutableBufferPointer<Int16>) -> Int {
        var filled = 0
        while filled < out.count, let file {
            if frame >= layout.frames {
                guard loops else { break }
                frame = 0
            }
            let frames = min(out.count - filled, layout.frames - frame)
            let length = frames * layout.bytesPerFrame
            if bytes.count < length { bytes = [UInt8](repeating: 0, count: length) }
            let offset = layout.dataOffset + frame * layout.bytesPerFrame
            let n = bytes.withUnsafeMutableBytes { file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<length]), at: offset) }
            guard n > 0 else {
                // Shrunk or unreadable under us: the far end stops, roomd goes on.
                file.close()
                self.file = nil
                break
            }
            let got = n / layout.bytesPerFrame
            guard got > 0 else { break }
            bytes.withUnsafeBytes { raw in
                WAVFile.firstChannel(UnsafeRawBufferPointer(rebasing: raw[0..<(got * layout.bytesPerFrame)]), layout: layout,
                                     into: UnsafeMutableBufferPointer(rebasing: out[filled..<(filled + got)]))
            }
            filled += got
            frame += got
        }
        return filled
    }

    /// Tops up `ring` with as much as it takes (up to the end of a file that does not loop).
    public func feed(_ ring: SPSCRing<Int16>, scratch: inout [Int16]) {
        while true {
            let space = min(ring.availableToWrite, scratch.count)
            guard space > 0 else { return }
            let got = scratch.withUnsafeMutableBufferPointer { read(into: UnsafeMutableBufferPointer(rebasing: $0[0..<space])) }
            guard got > 0 else { return }
            _ = scratch.withUnsafeBufferPointer { ring.write(from: UnsafeBufferPointer(rebasing: $0[0..<got])) }
        }
    }
}
