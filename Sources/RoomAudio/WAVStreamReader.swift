import Glibc
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
    private var fd: Int32
    /// Next frame to read, from the start of the data chunk.
    private var frame = 0
    private var bytes: [UInt8] = []

    /// Opens `path` and reads its layout; throws naming the file (and what is wrong with it).
    public init(path: String, loops: Bool) throws(SystemError) {
        self.path = path
        self.loops = loops
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
        if fd < 0 { throw .errno(path) }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let error = SystemError.errno(path)
            close(fd)
            throw error
        }
        do {
            layout = try WAVFile.layout(size: Int(st.st_size)) { offset, count in
                var chunk = [UInt8](repeating: 0, count: count)
                let n = retryingEINTR { chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, off_t(offset)) } }
                return Array(chunk.prefix(max(0, n)))
            }
        } catch {
            close(fd)
            throw SystemError("\(path): \(error)")
        }
        guard layout.frames > 0 else {
            close(fd)
            throw SystemError("\(path): the data chunk holds no audio")
        }
        self.fd = fd
    }

    deinit { if fd >= 0 { close(fd) } }

    /// True once a file that does not loop has been read to its end.
    public var finished: Bool { !loops && frame >= layout.frames }

    /// Fills `out` with the next samples of the first channel; returns how many (fewer only at
    /// the end of a file that does not loop, or on a read error, which ends the stream).
    public func read(into out: UnsafeMutableBufferPointer<Int16>) -> Int {
        var filled = 0
        while filled < out.count, fd >= 0 {
            if frame >= layout.frames {
                guard loops else { break }
                frame = 0
            }
            let frames = min(out.count - filled, layout.frames - frame)
            let length = frames * layout.bytesPerFrame
            if bytes.count < length { bytes = [UInt8](repeating: 0, count: length) }
            let offset = layout.dataOffset + frame * layout.bytesPerFrame
            let n = retryingEINTR { bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, length, off_t(offset)) } }
            guard n > 0 else {
                // Shrunk or unreadable under us: the far end stops, roomd goes on.
                close(fd)
                fd = -1
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
