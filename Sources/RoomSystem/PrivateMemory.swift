import CLinux
import Glibc

/// What the daemons hold in memory — join tokens, SRTP and media keys, roomserver's signing
/// keys — must not land in a core file a crash leaves behind, nor be readable by another
/// user's debugger. Called once at start (after any re-exec: execve makes a process dumpable
/// again); systemd's `LimitCORE=0` in both units says the same for the unit.
public enum PrivateMemory {
    /// RLIMIT_CORE 0 and PR_SET_DUMPABLE 0. Returns the error's text when either failed.
    public static func keep() -> String? {
        clinux_keep_memory_private() == 0 ? nil : String(cString: strerror(errno))
    }
}
