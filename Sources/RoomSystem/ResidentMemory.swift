import CLinux
import Glibc

/// What this process holds resident, and giving back the file pages only start-up needed.
/// docs/benchmarks.md ("Where roomd's memory goes in a call") explains the numbers.
public enum ResidentMemory {
    /// Resident set split as the kernel counts it (/proc/self/status, MiB): `file` is pages of
    /// mapped files (code, read-only data, the sim card's input file), clean and shared with the
    /// page cache; `anonymous` is heap, stacks and the copy-on-write pages of mapped files
    /// (relocated data), which only this process holds.
    public static func breakdown() -> (file: Double, anonymous: Double) {
        guard let text = try? Files.readText("/proc/self/status") else { return (0, 0) }
        var file = 0.0, anon = 0.0
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let kb = Double(fields[1]) else { continue }
            if fields[0] == "RssFile:" { file = kb / 1024 } else if fields[0] == "RssAnon:" { anon = kb / 1024 }
        }
        return (file, anon)
    }

    /// glibc's malloc_trim(0): returns the free pages inside the heap to the kernel.
    public static func trimHeap() {
        _ = clinux_malloc_trim()
    }

    /// The peak resident set so far (VmHWM), MiB: start-up included.
    public static func peakMegabytes() -> Double {
        guard let text = try? Files.readText("/proc/self/status") else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count >= 2, let kb = Double(fields[1]) { return kb / 1024 }
        }
        return 0
    }

    /// Unmaps the resident pages of read-only file mappings (code, read-only data) with
    /// `madvise(MADV_DONTNEED)`, so that afterwards the process holds only the pages it touches
    /// again; call it once start-up is over. The pages stay in the page cache (clean, shared with
    /// other processes, reclaimable), so one touched again costs a minor fault, not a read.
    ///
    /// Only mappings that cannot lose data are touched: mapped from a file, not writable, and
    /// with no anonymous (copy-on-write) page. A read-only mapping with such pages — RELRO after
    /// the dynamic loader relocated it, code a debugger patched — would fall back to the file's
    /// bytes, so it is skipped whole. Returns how many KiB were resident in what was released.
    /// Allocates (it reads /proc/self/smaps): not for the audio thread.
    @discardableResult
    public static func releaseReadOnlyFilePages() -> Int {
        guard let text = try? Files.readText("/proc/self/smaps") else { return 0 }
        var released = 0
        // One mapping: its header, then its fields; acted on when the next header (or the end) comes.
        var range: (UInt, UInt)? = nil
        var eligible = false, rss = 0, anonymous = -1
        func finish() {
            if let (start, end) = range, eligible, rss > 0, anonymous == 0,
               madvise(UnsafeMutableRawPointer(bitPattern: start), Int(end - start), MADV_DONTNEED) == 0 {
                released += rss
            }
            range = nil; eligible = false; rss = 0; anonymous = -1
        }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.contains("-"), !first.hasSuffix(":"), fields.count >= 5 {
                finish()
                let bounds = first.split(separator: "-")
                guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) else { continue }
                range = (start, end)
                let perms = fields[1]
                // A path (not [heap], [stack], [vdso], anonymous), read-only, private.
                eligible = fields.count >= 6 && fields[5].hasPrefix("/") && !fields.contains("(deleted)")
                    && (perms == "r-xp" || perms == "r--p")
            } else if first == "Rss:", fields.count >= 2, let kb = Int(fields[1]) {
                rss = kb
            } else if first == "Anonymous:", fields.count >= 2, let kb = Int(fields[1]) {
                anonymous = kb
            }
        }
        finish()
        return released
    }
}
