import Glibc

/// Memory for key material: pages of their own, locked (mlock: never written to swap), left
/// out of core dumps (MADV_DONTDUMP), with an inaccessible guard page on each side so an
/// overrun faults instead of reading a neighbour, and zeroed before they are unmapped. A Swift
/// array would be copied on write, moved by the allocator and freed with the key still in it.
/// Three pages of address space at least, so this is for a handful of long-lived secrets.
public final class LockedPages: @unchecked Sendable {
    /// The usable bytes (`count` of them) between the guard pages.
    public let base: UnsafeMutableRawPointer
    public let count: Int
    private let mapping: UnsafeMutableRawPointer
    private let mappingSize: Int
    private let dataSize: Int
    /// Whether mlock succeeded (RLIMIT_MEMLOCK can refuse it; the key is still held, only
    /// swappable, which is what a process without the limit gets from any allocator).
    public let isLocked: Bool

    /// Traps only when the process cannot map the pages (out of address space).
    public init(count: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        self.count = count
        dataSize = max(page, (count + page - 1) / page * page)
        mappingSize = dataSize + 2 * page
        guard let m = mmap(nil, mappingSize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), m != MAP_FAILED else {
            fatalError("LockedPages: mmap of \(mappingSize) bytes failed: \(Errno.current)")
        }
        mapping = m
        base = m + page
        if mprotect(base, dataSize, PROT_READ | PROT_WRITE) != 0 {
            fatalError("LockedPages: mprotect failed: \(Errno.current)")
        }
        _ = madvise(base, dataSize, MADV_DONTDUMP)
        isLocked = mlock(base, dataSize) == 0
    }

    deinit {
        // memset_explicit is C23; a volatile-free loop could be elided, so clear through
        // explicit_bzero, which glibc promises not to optimise away.
        explicit_bzero(base, dataSize)
        if isLocked { _ = munlock(base, dataSize) }
        _ = munmap(mapping, mappingSize)
    }
}
