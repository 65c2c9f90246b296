import Foundation
import Glibc

/// A child process started with posix_spawn and reaped by its own pid, for peers that close the
/// descriptors they inherit (kamailio does at start). Foundation's `Process` on Linux takes the
/// closing of its per-child socket for the child's exit and then waits for it with a blocking
/// `waitpid` on its one monitor thread: with kamailio running, every other `Process` of the test
/// (roomctl, make-dev-certs) then waits forever for its exit to be noticed. Found with gdb in
/// CallProcessTests: `wait4(kamailio's pid, …, 0)` on Foundation's thread, `waitUntilExit` on ours.
public final class SpawnedProcess {
    public let pid: pid_t
    private var exited = false

    /// Starts `executable` with `arguments`, stdin from /dev/null, stdout and stderr into `log`.
    public init(_ executable: String, _ arguments: [String], log: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, nil, argv, environ)
        guard rc == 0 else {
            throw NSError(domain: "spawn", code: Int(rc), userInfo: [NSLocalizedDescriptionKey: "\(executable): \(String(cString: strerror(rc)))"])
        }
        pid = child
    }

    /// Still running (reaps it when it has ended).
    public var isRunning: Bool {
        guard !exited else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { exited = true }
        return !exited
    }

    /// SIGTERM, then SIGKILL after `grace` seconds (at once with `grace` 0); returns once it is reaped.
    public func stop(grace: Double = 3) {
        guard !exited else { return }
        kill(pid, grace > 0 ? SIGTERM : SIGKILL)
        let deadline = Date().addingTimeInterval(grace)
        while isRunning && Date() < deadline { usleep(10_000) }
        if isRunning {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            exited = true
        }
    }

    deinit { stop() }
}
