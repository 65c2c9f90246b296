import Glibc
import RoomDSP
import RoomSystem

/// 16-bit PCM written to a WAV file as it arrives (`roomd --record`), so a recording costs a
/// few kilobytes of memory instead of the whole session, and a path that cannot be written is
/// reported when roomd starts instead of when it stops, with the recording lost (issue 10).
///
/// The samples go to `path.partial`; `finish` fills in the header's sizes, syncs and renames it
/// to `path`, so `path` only ever holds a complete file. On the event loop (plain blocking
/// writes of a few kilobytes every 50 ms).
public final class WAVRecorder {
    public let path: String
    private let partial: String
    private var fd: Int32
    private var dataBytes = 0
    private var chunk: [UInt8] = []

    /// Creates `path.partial` with a header; throws naming the file when it cannot.
    public init(path: String, sampleRate: Int, channels: Int = 1) throws(SystemError) {
        self.path = path
        let partial = path + ".partial"
        self.partial = partial
        fd = retryingEINTR { open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        if fd < 0 { throw .errno(partial) }
        do {
            // RoomDSP's encoder with no samples is the header alone; `finish` fills in the sizes.
            try writeAll(WAVFile.encode(WAVAudio(sampleRate: sampleRate, channels: channels, samples: [])))
        } catch {
            close(fd)
            unlink(partial)
            throw error
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Appends samples (interleaved when stereo).
    public func append(_ samples: UnsafeBufferPointer<Int16>) throws(SystemError) {
        guard fd >= 0, !samples.isEmpty else { return }
        chunk.removeAll(keepingCapacity: true)
        chunk.reserveCapacity(samples.count * 2)
        for s in samples {
            let u = UInt16(bitPattern: s)
            chunk.append(UInt8(truncatingIfNeeded: u))
            chunk.append(UInt8(truncatingIfNeeded: u >> 8))
        }
        try writeAll(chunk)
        dataBytes += chunk.count
    }

    public var samplesWritten: Int { dataBytes / 2 }

    /// Writes the sizes into the header, syncs, renames to `path`.
    public func finish() throws(SystemError) {
        guard fd >= 0 else { return }
        defer { close(fd); fd = -1 }
        var sizes = [UInt8]()
        func u32(_ v: Int) { for k in 0..<4 { sizes.append(UInt8(truncatingIfNeeded: v >> (8 * k))) } }
        u32(36 + dataBytes)
        if pwriteAll(sizes, at: 4) == false { throw .errno(partial) }
        sizes = []
        u32(dataBytes)
        if pwriteAll(sizes, at: 40) == false { throw .errno(partial) }
        if retryingEINTR({ fsync(fd) }) != 0 { throw .errno(partial) }
        if Glibc.rename(partial, path) != 0 { throw .errno(path) }
        try Files.syncDirectory(of: path)
    }

    private func writeAll(_ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = retryingEINTR { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) } }
            if n < 0 { throw .errno(partial) }
            offset += n
        }
    }

    private func pwriteAll(_ bytes: [UInt8], at position: Int) -> Bool {
        let n = retryingEINTR { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, off_t(position)) } }
        return n == bytes.count
    }
}
