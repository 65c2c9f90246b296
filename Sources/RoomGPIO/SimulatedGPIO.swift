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
    /// Where `press` and `release` write, per open button: the FIFO itself (the input's own
    /// file, which the input closes) or a pipe's write end (closed when it leaves this table:
    /// the input closes, or this backend goes).
    private var writers: [ButtonID: SystemFile] = [:]

    public var stateFilePath: String? { directory.map { $0 + "/leds" } }
    public func controlPath(_ button: ButtonID) -> String? { directory.map { $0 + "/" + button.rawValue } }

    /// Creates `directory` (mode 0755) if needed and writes an all-off `leds` file.
    public init(directory: String? = nil) throws(SystemError) {
        self.directory = directory
        if let directory {
            try Files.makeDirectory(directory, mode: 0o755, label: "gpio sim directory \(directory)")
            try writeStateFile()
        }
    }

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
        guard let writer = writers[button] else { return }
        _ = Array(text.utf8).withUnsafeBytes { writer.write($0) }
    }

    public func openInput(_ button: ButtonID, line: Int) throws(SystemError) -> GPIOInput {
        let label = "gpio chip sim line \(line) (\(button.rawValue) button)"
        if writers[button] != nil { throw SystemError("\(label): already open") }
        let reader: SystemFile
        if let path = controlPath(button) {
            if let kind = Files.kind(of: path) {
                if kind != .fifo { throw SystemError("\(label): \(path) exists and is not a FIFO") }
            } else {
                try Files.makeFIFO(path, mode: 0o660, label: "\(label): mkfifo \(path)")
                // mkfifo applies the umask (systemd's UMask=0027 would leave 0640): the rig,
                // a member of the group, must be able to press.
                try? Files.changeMode(path, to: 0o660)
            }
            // Read-write: the daemon is its own writer, so the FIFO never reports end of file
            // or hangs up when an outside writer closes, and open does not block.
            reader = try SystemFile(path: path, access: .readWrite, options: .nonBlocking, label: "\(label): open \(path)")
            writers[button] = reader
        } else {
            let pipe = try SystemFile.pipe(label: "\(label): pipe")
            reader = pipe.read
            writers[button] = pipe.write
        }
        let input = Input(file: reader, label: label)
        input.onClose = { [weak self] in self?.forget(button) }
        return input
    }

    private func forget(_ button: ButtonID) {
        writers[button] = nil
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
        let file: SystemFile
        let label: String
        private var pending: [UInt8] = []
        var onClose: (() -> Void)?
        var fileDescriptor: Int32 { file.descriptor }
        init(file: SystemFile, label: String) { self.file = file; self.label = label }
        deinit { close() }

        func readEdges() throws(SystemError) -> [ButtonEdge] {
            guard file.isOpen else { return [] }
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { file.read(into: $0) }
            if n < 0 {
                if Errno.current.isWouldBlock { return [] }
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
            guard file.isOpen else { return }
            onClose?()
            onClose = nil
            file.close()
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
