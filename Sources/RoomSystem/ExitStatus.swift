/// Exit statuses by name: BSD's sysexits.h values, which systemd units, the rig's scripts and
/// installers' tooling can tell apart (a configuration error is not a missing device), plus
/// the GNU usage status every program here shares. One table so that no program writes 78 and
/// another 64 for the same reason.
public enum ExitStatus {
    public static let success: Int32 = 0
    /// A command line that does not parse (GNU and POSIX utilities use 2; `CommandLineUsageError`).
    public static let usage: Int32 = 2
    /// EX_NOINPUT: an input file is missing or unreadable (`--far-end`).
    public static let noInput: Int32 = 66
    /// EX_UNAVAILABLE: a service or device is not there (the sound card, the daemon).
    public static let unavailable: Int32 = 69
    /// EX_SOFTWARE: an internal error (a thread that would not start).
    public static let software: Int32 = 70
    /// EX_OSERR: the system refused something it should give (a socket, the event loop).
    public static let osError: Int32 = 71
    /// EX_CANTCREAT: an output file cannot be created (`--record`).
    public static let cannotCreate: Int32 = 73
    /// EX_TEMPFAIL: try again later.
    public static let tryAgain: Int32 = 75
    /// EX_NOPERM: not allowed (the control socket's group).
    public static let noPermission: Int32 = 77
    /// EX_CONFIG: the configuration is wrong (the message names file, line and key).
    public static let configuration: Int32 = 78
}
