import Glibc

/// Errors from the system helpers: the path or operation and errno's text, ready to report
/// as-is, and the errno itself so a caller can tell "permission denied" (add yourself to a
/// group) from "no such file" (is roomd running?) without parsing text.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    /// The error number when the error came from a system call (`errno(_:_:)`), nil otherwise.
    public let errno: Errno?
    public init(_ description: String, errno: Errno? = nil) {
        self.description = description
        self.errno = errno
    }
    /// "what: the system's text", keeping the number for callers that branch on it.
    public static func errno(_ what: String, _ number: Int32 = Glibc.errno) -> SystemError {
        let e = Errno(rawValue: number)
        return SystemError("\(what): \(e)", errno: e)
    }
}

public enum Files {
    /// Reads a whole file; refuses anything larger than `limit` so a wrong path (a device, a
    /// huge file) gives an error instead of exhausting memory.
    public static func read(_ path: String, limit: Int = 256 << 20) throws(SystemError) -> [UInt8] {
        try SystemFile(path: path, access: .read).readToEnd(limit: limit)
    }

    public static func readText(_ path: String) throws(SystemError) -> String {
        let bytes = try read(path, limit: 4 << 20)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes atomically: temp file in the same directory, fsync, rename. A crash leaves
    /// either the old or the new content, never a torn file.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(SystemError) {
        let tmp = path + ".tmp.\(getpid())"
        let file = try SystemFile(path: tmp, access: .write, options: .createTruncating)
        do {
            try file.writeAll(bytes)
            try file.sync()
        } catch {
            file.close()
            unlink(tmp)
            throw error
        }
        file.close()
        if Glibc.rename(tmp, path) != 0 { let e = errno; unlink(tmp); throw .errno(path, e) }
        // The rename lives in the directory: until the directory is on disk too, a power cut
        // can bring back the old file (or none) although the new one was synced.
        try syncDirectory(of: path)
    }

    /// fsync of the directory holding `path`, so a rename or a new file in it survives a power cut.
    public static func syncDirectory(of path: String) throws(SystemError) {
        let dir = directory(of: path)
        try SystemFile(path: dir, access: .read, options: .directory, label: "fsync \(dir)").sync()
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Throws the errno (`what` names the file's role) when this process may not read `path`:
    /// for libraries that would only say "cannot open" (OpenSSL says "system lib").
    public static func checkReadable(_ path: String, what: String) throws(SystemError) {
        if access(path, R_OK) != 0 { throw SystemError.errno("\(what) \(path)") }
    }

    /// Creates `path` and any missing parents (like `mkdir -p`); an existing directory is fine.
    public static func makeDirectories(_ path: String, mode: FileMode = 0o750) throws(SystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, mode) != 0 && errno != EEXIST { throw .errno("mkdir \(current)") }
        }
    }

    /// Renames `path` to `newPath`; the error names `label`, "rename PATH to NEWPATH" by default.
    public static func rename(_ path: String, to newPath: String, label: String? = nil) throws(SystemError) {
        if Glibc.rename(path, newPath) != 0 { throw .errno(label ?? "rename \(path) to \(newPath)") }
    }

    /// Removes a file (unlink), e.g. what a failed write leaves behind.
    public static func remove(_ path: String) throws(SystemError) {
        if unlink(path) != 0 { throw .errno("remove \(path)") }
    }

    /// Creates one directory (its parent must exist); one that exists already is fine. The
    /// error names `label`, "mkdir PATH" by default.
    public static func makeDirectory(_ path: String, mode: FileMode, label: String? = nil) throws(SystemError) {
        if mkdir(path, mode) != 0 && errno != EEXIST { throw .errno(label ?? "mkdir \(path)") }
    }

    /// Creates a FIFO (named pipe) with `mode` less the umask; the error names `label`,
    /// "mkfifo PATH" by default.
    public static func makeFIFO(_ path: String, mode: FileMode, label: String? = nil) throws(SystemError) {
        if mkfifo(path, mode) != 0 { throw .errno(label ?? "mkfifo \(path)") }
    }

    /// Sets a file's permission bits exactly (chmod: no umask), e.g. after `makeFIFO`.
    public static func changeMode(_ path: String, to mode: FileMode) throws(SystemError) {
        if chmod(path, mode) != 0 { throw .errno("chmod \(path)") }
    }

    /// What a directory entry is.
    public enum Kind: Sendable, Equatable { case regular, directory, fifo, symbolicLink, other }

    /// What `path` itself is (lstat: a symbolic link is reported as one, not followed), nil
    /// when there is nothing there (or it cannot be looked at).
    public static func kind(of path: String) -> Kind? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFIFO: return .fifo
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }

    /// The group owning `path` (stat, following links), nil when it cannot be looked at.
    public static func owningGroup(of path: String) -> GroupID? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return st.st_gid
    }

    /// The permission bits of `path` (stat, following links; 0o7777 at most), nil when it cannot
    /// be looked at: a secret's file is refused when its group or others may read it.
    public static func permissions(of path: String) -> FileMode? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return st.st_mode & 0o7777
    }

    /// Gives an existing file to `group` (owner unchanged).
    public static func changeGroup(_ path: String, to group: GroupID) throws(SystemError) {
        if chown(path, uid_t.max, group) != 0 { throw .errno("chown \(path) to group \(group)") }
    }

    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Resolves `path` against `base` unless it is absolute.
    public static func resolve(_ path: String, relativeTo base: String) -> String {
        path.hasPrefix("/") ? path : base + "/" + path
    }

    /// The canonical absolute path of an existing file (symlinks resolved), or the input when
    /// it cannot be resolved: log lines and environment variables must not depend on the cwd.
    public static func absolute(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The running executable's absolute path (from /proc/self/exe).
    public static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n <= 0 { return CommandLine.arguments.first ?? "" }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Group names from the system's group database (/etc/group, or NSS).
public enum Groups {
    /// The gid of `nameOrNumber` (a name or a number that the group database knows), or an
    /// error naming it: a typo in `control.group` must not hand the socket to a stranger gid.
    public static func id(of nameOrNumber: String) throws(SystemError) -> GroupID {
        if let n = UInt32(nameOrNumber) {
            guard name(of: GroupID(n)) != nil else { throw SystemError("group \(n): no such group") }
            return GroupID(n)
        }
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        let rc = getgrnam_r(nameOrNumber, &group, &buffer, buffer.count, &result)
        guard rc == 0 else { throw .errno("group \(nameOrNumber)", rc) }
        guard let result else { throw SystemError("group \(nameOrNumber): no such group (create it, e.g. with the board's sysusers file)") }
        return result.pointee.gr_gid
    }

    /// The name of group `gid` in the group database, nil when it has none.
    public static func name(of gid: GroupID) -> String? {
        var group = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getgrgid_r(gid, &group, &buffer, buffer.count, &result) == 0, let result else { return nil }
        return String(cString: result.pointee.gr_name)
    }

    /// Whether this process may give a file to `gid`: root may, anyone else only to a group
    /// it belongs to (effective or supplementary) — chown(2) without CAP_CHOWN.
    public static func processMayUse(_ gid: GroupID) -> Bool {
        if geteuid() == 0 || getegid() == gid { return true }
        let n = getgroups(0, nil)
        guard n > 0 else { return false }
        var list = [gid_t](repeating: 0, count: Int(n))
        let got = getgroups(n, &list)
        return got > 0 && list.prefix(Int(got)).contains(gid)
    }
}

public enum Environment {
    public static func get(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        return String(cString: v)
    }
    public static func set(_ name: String, _ value: String) { setenv(name, value, 1) }
}
