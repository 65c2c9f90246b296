import Glibc
import RoomSystem

/// A GPIO board in software, with the same interface as `LibgpiodBackend` (docs/gpio.md).
///
/// Each button is a pipe-like descriptor carrying text commands, one per line: `press`
/// (or `1`, `down`) and `release` (or `0`, `up`); other words are ignored with a warning.
/// With a control `directory`, each button is a FIFO `<directory>/<button>` (`mute`, `hand`)
/// that any process can write to (`echo press > $DIR/mute`), and every LED change rewrites
/// `<directory>/leds` atomically as one line `mute=1 hand=0 stage=0`. Without a directory the
/// buttons are anonymous pipes, driven only by `press`/`release` in this process.
///
/// Line offsets are accepted and ignored; a button opens at most once. Use on one thread.
public final class SimulatedGPIO: GPIOBackend {
    public let directory: String?
    public private(set) var ledStates: [LEDID: Bool] = [:]
    private var writers: [ButtonID: Int32] = [:]
    private var ownedWriters: [Int32] = []

    public var stateFilePath: String? { directory.map { $0 + "/leds" } }
    public func controlPath(_ button: ButtonID) -> String? { directory.map { $0 + "/" + button.rawValue } }

    /// Creates `directory` (mode 0755) if needed and writes an all-off `leds` file.
    public init(directory: String? = nil) throws(SystemError) {
        self.directory = directory
        if let directory {
            if mkdir(directory, 0o755) != 0 && errno != EEXIST { throw .errno("gpio sim directory \(directory)") }
            try writeStateFile()
        }
    }

    deinit { for fd in ownedWriters { Glibc.close(fd) } }

    /// True when the LED is lit, nil when no output line was opened for it.
    public func led(_ led: LEDID) -> Bool? { ledStates[led] }

    /// The state file's line for the current LEDs (LEDs never opened read 0).
    public var stateLine: String {
        LEDID.allCases.map { "\($0.rawValue)=\(ledStates[$0] == true ? 1 : 0)" }.joined(separator: " ")
    }

    /// Injects an edge from inside the process (the same path the control FIFO takes).
    public func press(_ button: ButtonID) { send(button, "press\n") }
    public func release(_ button: ButtonID) { send(button, "release\n") }

    private func send(_ button: ButtonID, _ text: String) {
        guard let fd = writers[button] else { return }
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    public func openInput(_ button: ButtonID, line: Int) throws(SystemError) -> GPIOInput {
        let label = "gpio chip sim line \(line) (\(button.rawValue) button)"
        if writers[button] != nil { throw SystemError("\(label): already open") }
        let readFD: Int32
        if let path = controlPath(button) {
            var st = stat()
            if lstat(path, &st) == 0 {
                if (st.st_mode & S_IFMT) != S_IFIFO { throw SystemError("\(label): \(path) exists and is not a FIFO") }
            } else if mkfifo(path, 0o660) != 0 {
                throw .errno("\(label): mkfifo \(path)")
            } else {
                // mkfifo applies the umask (systemd's UMask=0027 would leave 0640): the rig,
                // a member of the group, must be able to press.
                _ = chmod(path, 0o660)
            }
            // Read-write: the daemon is its own writer, so the FIFO never reports end of file
            // or hangs up when an outside writer closes, and open does not block.
            readFD = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            if readFD < 0 { throw .errno("\(label): open \(path)") }
            writers[button] = readFD
        } else {
            var fds: [Int32] = [0, 0]
            if pipe(&fds) != 0 { throw .errno("\(label): pipe") }
            for fd in fds {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
            readFD = fds[0]
            writers[button] = fds[1]
            ownedWriters.append(fds[1])
        }
        let input = Input(fd: readFD, label: label)
        input.onClose = { [weak self] in self?.forget(button) }
        return input
    }

    private func forget(_ button: ButtonID) {
        guard let fd = writers.removeValue(forKey: button) else { return }
        if let i = ownedWriters.firstIndex(of: fd) { ownedWriters.remove(at: i); Glibc.close(fd) }
    }

    public func openOutput(_ led: LEDID, line: Int) throws(SystemError) -> GPIOOutput {
        if ledStates[led] != nil { throw SystemError("gpio chip sim line \(line) (\(led.rawValue) LED): already open") }
        ledStates[led] = false
        try writeStateFile()
        return Output(owner: self, led: led)
    }

    fileprivate func set(_ led: LEDID, _ on: Bool) throws(SystemError) {
        guard ledStates[led] != on else { return }
        ledStates[led] = on
        try writeStateFile()
    }

    private func writeStateFile() throws(SystemError) {
        guard let path = stateFilePath else { return }
        try Files.writeAtomically(path, Array((stateLine + "\n").utf8))
    }

    final class Input: GPIOInput {
        var fd: Int32
        let label: String
        private var pending: [UInt8] = []
        var onClose: (() -> Void)?
        var fileDescriptor: Int32 { fd }
        init(fd: Int32, label: String) { self.fd = fd; self.label = label }
        deinit { close() }

        func readEdges() throws(SystemError) -> [ButtonEdge] {
            guard fd >= 0 else { return [] }
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { return [] }
                throw .errno("\(label): read")
            }
            pending.append(contentsOf: buffer[0..<n])
            var edges: [ButtonEdge] = []
            while let nl = pending.firstIndex(where: { $0 == 10 || $0 == 32 || $0 == 9 || $0 == 13 }) {
                let word = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                switch word {
                case "": continue
                case "press", "1", "down": edges.append(ButtonEdge(pressed: true))
                case "release", "0", "up": edges.append(ButtonEdge(pressed: false))
                default: Log.warning("\(label): unknown command '\(word.prefix(40))' (press or release)")
                }
            }
            if pending.count > 256 { pending.removeAll() }  // garbage without a newline
            return edges
        }

        func close() {
            guard fd >= 0 else { return }
            onClose?()
            onClose = nil
            Glibc.close(fd)
            fd = -1
        }
    }

    final class Output: GPIOOutput {
        weak var owner: SimulatedGPIO?
        let led: LEDID
        init(owner: SimulatedGPIO, led: LEDID) { self.owner = owner; self.led = led }
        func set(_ on: Bool) throws(SystemError) { try owner?.set(led, on) }
        func close() {}
    }
}
