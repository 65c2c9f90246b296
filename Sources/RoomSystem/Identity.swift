import Glibc

// Who and where this process runs, by name: the control socket's permissions and
// authorization, and the appliance's default name, without a module above this one
// importing Glibc for a type or a one-line call.

/// A user id (uid_t): the control API compares a peer's against root's and roomd's own.
public typealias UserID = uid_t
/// A group id (gid_t): the control socket's group, a peer's primary and supplementary groups.
public typealias GroupID = gid_t
/// A process id (pid_t): a control client's, read from its socket's credentials.
public typealias ProcessID = pid_t
/// File permission bits (mode_t), as `chmod 0660` writes them.
public typealias FileMode = mode_t

/// The identity of the running process.
public enum ProcessIdentity {
    /// The effective user id: what the kernel checks this process's file access against, and
    /// the user that may always change roomd through its control socket.
    public static var effectiveUserID: UserID { geteuid() }
    /// The real group id: the group a file created by this process gets by default (the
    /// control socket's when no control group is configured).
    public static var groupID: GroupID { getgid() }
}

/// The machine's name.
public enum HostName {
    /// The host name (gethostname), nil when the system does not give one.
    public static var current: String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
