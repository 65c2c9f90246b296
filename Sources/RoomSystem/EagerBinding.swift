import Glibc

/// Binding every library's imports when the program loads (`LD_BIND_NOW`) instead of on first
/// call.
///
/// Why: roomd itself is linked `-z now`, but the libraries it loads (libopus, libcrypto,
/// libasound, libsrtp2, webrtc-audio-processing …) bind their calls lazily, each on its first
/// call. A first call after start-up's page release (`ResidentMemory.releaseReadOnlyFilePages`)
/// makes the dynamic loader look the name up in every loaded object (`do_lookup_x`), which maps
/// the hash and symbol tables at the head of each library again: in a call, the audio thread's
/// Opus decoder did that 5 s in (perf, `-e minor-faults`), about 0.5-0.7 MB of the resident set
/// (docs/benchmarks.md, "A call's memory, 2026-11-25"). It is also a lookup, with the loader's
/// lock, on the real-time thread mid-period. Bound at load, the lookups all happen before the
/// release.
public enum EagerBinding {
    /// Re-executes this program (same file, same arguments, same process id) with
    /// `LD_BIND_NOW=1` unless `LD_BIND_NOW` is already in the environment; set it to the empty
    /// string to keep lazy binding. Returns when it did not re-execute (already set, or the exec
    /// failed: the program then goes on lazily bound, as before). Call it first thing in `main`,
    /// before any thread or file descriptor exists.
    public static func reexecUnlessBound() {
        guard getenv("LD_BIND_NOW") == nil else { return }
        guard setenv("LD_BIND_NOW", "1", 1) == 0 else { return }
        execv(executablePath(), CommandLine.unsafeArgv)
        // No /proc, or the file is gone: run as is, and let children start as before.
        unsetenv("LD_BIND_NOW")
    }

    /// The running executable's own path, read from `/proc/self/exe`, so that the kernel names
    /// the process after it again: exec'd as `/proc/self/exe` itself, the process would be
    /// called `exe` (its `comm`: `ps -C roomd`, `pidof`, `top`, the journal's `_COMM` would no
    /// longer find it). The link itself is the fallback when the path cannot serve: unreadable,
    /// or the file was deleted (an upgrade replaced it) — running the old image under the name
    /// `exe` is better than starting a different version.
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "/proc/self/exe" }
        let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return "/proc/self/exe" }
        return path
    }
}
