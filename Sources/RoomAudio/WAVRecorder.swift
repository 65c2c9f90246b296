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
    /// nil once `finish` ran.
    private var file: SystemFile?
    private var dataBytes = 0
    private var chunk: [UInt8] = []

    /// Creates `path.partial` with a header; throws naming the file when it cannot.
    public init(path: String, sampleRate: Int, channels: Int = 1) throws(SystemError) {
        self.path = path
        let partial = path + ".partial"
        self.partial = partial
        let file = try SystemFile(path: partial, access: .write, options: .createTruncating)
        do {
            // RoomDSP's encoder with no samples is the header alone; `finish` fills in the sizes.
            try file.writeAll(WAVFile.encode(WAVAudio(sampleRate: sampleRate, channels: channels, samples: [])))
        } catch {
            file.close()
            try? Files.remove(partial)
            throw error
        }
        self.file = file
    }

    /// Appends samples (interleaved when stereo).
    public func append(_ samples: UnsafeBufferPointer<Int16>) throws(SystemError) {
        guard let file, !samples.isEmpty else { return }
        chunk.removeAll(keepingCapacity: true)
        chunk.reserveCapacity(samples.count * 2)
        for s in samples {
            let u = UInt16(bitPattern: s)
            chunk.append(UInt8(truncatingIfNeeded: u))
            chunk.append(UInt8(truncatingIfNeeded: u >> 8))
        }
        try file.writeAll(chunk)
        dataBytes += chunk.count
    }

    public var samplesWritten: Int { dataBytes / 2 }

    /// Writes the sizes into the header, syncs, renames to `path`.
    public func finish() throws(SystemError) {
        guard let file else { return }
        defer { file.close(); self.file = nil }
        var sizes = [UInt8]()
        func u32(_ v: Int) { for k in 0..<4 { sizes.append(UInt8(truncatingIfNeeded: v >> (8 * k))) } }
        u32(36 + dataBytes)
        try file.writeAll(sizes, at: 4)
        sizes = []
        u32(dataBytes)
        try file.writeAll(sizes, at: 40)
        try file.sync()
        try Files.rename(partial, to: path, label: path)
        try Files.syncDirectory(of: path)
    }
}
