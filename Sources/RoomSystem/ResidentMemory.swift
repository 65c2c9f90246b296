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
        let kb = statusKilobytes("RssFile:", "RssAnon:")
        return (Double(kb[0] ?? 0) / 1024, Double(kb[1] ?? 0) / 1024)
    }

    /// glibc's malloc_trim(0): returns the free pages inside the heap to the kernel.
    public static func trimHeap() {
        _ = clinux_malloc_trim()
    }

    /// The peak resident set so far (VmHWM), MiB: start-up included.
    public static func peakMegabytes() -> Double {
        Double(statusKilobytes("VmHWM:")[0] ?? 0) / 1024
    }

    /// "Name:  N kB" fields of /proc/self/status, in the order asked, read as bytes: the status
    /// line asks for them every second, and splitting its ~55 lines into Strings was most of the
    /// line's cost (perf, the engine bench).
    private static func statusKilobytes(_ names: StaticString...) -> [Int?] {
        var found = [Int?](repeating: nil, count: names.count)
        guard let status = try? Files.read("/proc/self/status") else { return found }
        status.withUnsafeBufferPointer { text in
            forEachLine(of: text) { line in
                var fields = BlankSeparatedFields(line)
                guard let name = fields.next(), let i = names.firstIndex(where: { bytes($0).elementsEqual(name) }) else { return }
                found[i] = fields.next().flatMap(decimal)
            }
        }
        return found
    }

    /// Calls `body` with each line of `text`, without its newline.
    private static func forEachLine(of text: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        var at = 0
        while at < text.count {
            var lineEnd = at
            while lineEnd < text.count, text[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            body(UnsafeBufferPointer(rebasing: text[at..<lineEnd]))
            at = lineEnd + 1
        }
    }

    private static func bytes(_ text: StaticString) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
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
        guard let smaps = try? Files.read("/proc/self/smaps") else { return 0 }
        return smaps.withUnsafeBufferPointer { releaseMappings(listedIn: $0) }
    }

    /// The smaps text read as bytes, a line and a field at a time: with Swift strings (a `split`
    /// per line and per field) the release took ~10 ms of the event loop's CPU in roomd, madvise
    /// and the heap trim included, 0.05 % of a core over the engine bench's 20 s; this way ~2 ms
    /// (perf samples, docs/benchmarks.md "The event loop's share").
    private static func releaseMappings(listedIn text: UnsafeBufferPointer<UInt8>) -> Int {
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
        forEachLine(of: text) { line in
            var fields = BlankSeparatedFields(line)
            guard let first = fields.next() else { return }
            if first.last == UInt8(ascii: ":") {
                if first.elementsEqual("Rss:".utf8), let kb = fields.next().flatMap(decimal) {
                    rss = kb
                } else if first.elementsEqual("Anonymous:".utf8), let kb = fields.next().flatMap(decimal) {
                    anonymous = kb
                }
                return
            }
            // A header: "start-end perms offset device inode [path]".
            guard let dash = first.firstIndex(of: UInt8(ascii: "-")), let perms = fields.next(),
                  fields.next() != nil, fields.next() != nil, fields.next() != nil else { return }
            finish()
            guard let start = hexadecimal(UnsafeBufferPointer(rebasing: first[first.startIndex..<dash])),
                  let end = hexadecimal(UnsafeBufferPointer(rebasing: first[(dash + 1)...])) else { return }
            range = (start, end)
            // A path (not [heap], [stack], [vdso], anonymous), read-only, private.
            let path = fields.rest
            eligible = path.first == UInt8(ascii: "/") && !contains(path, " (deleted)")
                && (perms.elementsEqual("r-xp".utf8) || perms.elementsEqual("r--p".utf8))
        }
        finish()
        return released
    }

    /// The fields of one line, split at runs of blanks (spaces, tabs); `rest` is what follows
    /// the fields taken so far (a path may hold spaces).
    private struct BlankSeparatedFields {
        let line: UnsafeBufferPointer<UInt8>
        var at: Int

        init(_ line: UnsafeBufferPointer<UInt8>) { self.line = line; at = line.startIndex }

        private func isBlank(_ i: Int) -> Bool { line[i] == UInt8(ascii: " ") || line[i] == UInt8(ascii: "\t") }

        mutating func next() -> UnsafeBufferPointer<UInt8>? {
            while at < line.endIndex, isBlank(at) { at += 1 }
            guard at < line.endIndex else { return nil }
            let start = at
            while at < line.endIndex, !isBlank(at) { at += 1 }
            return UnsafeBufferPointer(rebasing: line[start..<at])
        }

        var rest: UnsafeBufferPointer<UInt8> {
            var from = at
            while from < line.endIndex, isBlank(from) { from += 1 }
            return UnsafeBufferPointer(rebasing: line[from...])
        }
    }

    private static func decimal(_ digits: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for d in digits {
            guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(d - UInt8(ascii: "0"))
        }
        return value
    }

    private static func hexadecimal(_ digits: UnsafeBufferPointer<UInt8>) -> UInt? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt = 0
        for d in digits {
            let nibble: UInt8
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = d - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = d - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = d - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt(nibble)
        }
        return value
    }

    private static func contains(_ haystack: UnsafeBufferPointer<UInt8>, _ needle: StaticString) -> Bool {
        let n = bytes(needle)
        guard haystack.count >= n.count else { return false }
        var i = haystack.startIndex
        while i + n.count <= haystack.endIndex {
            if UnsafeBufferPointer(rebasing: haystack[i..<(i + n.count)]).elementsEqual(n) { return true }
            i += 1
        }
        return false
    }
}
