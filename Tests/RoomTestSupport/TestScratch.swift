import Foundation
import Synchronization

/// Per-process scratch directories under the system's temporary directory, removed when the
/// test process exits. Each CI run left ~55 MB behind in /tmp (room files, WAV captures, a
/// test CA) under names carrying the process's PID, and a rig that runs the suite every night
/// fills its disk. `ROOMD_KEEP_TEST_FILES=1` keeps them, to look at a failed test's files.
public enum TestScratch {
    private static let registered = Mutex<[String]>([])

    /// `NSTemporaryDirectory()/<prefix>-<pid>`, created, and removed at exit with everything in it.
    public static func directory(_ prefix: String) -> String {
        let dir = NSTemporaryDirectory() + "\(prefix)-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // The handler is registered with the first directory, once: the same prefix asked
        // again (every SimCard.scratch call) adds nothing.
        let first = registered.withLock { dirs -> Bool in
            guard !dirs.contains(dir) else { return false }
            dirs.append(dir)
            return dirs.count == 1
        }
        // XCTest ends the process with exit(), which runs atexit handlers; a test killed by a
        // signal leaves its files, which is what one wants to see after a crash.
        if first { atexit { TestScratch.removeAll() } }
        return dir
    }

    private static func removeAll() {
        if ProcessInfo.processInfo.environment["ROOMD_KEEP_TEST_FILES"] == "1" { return }
        for dir in registered.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: dir) }
    }
}
