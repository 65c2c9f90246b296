import Glibc
import RoomSystem

// roomproxy: a lossy, jittery, reordering relay between roomd and roomserver (docs/roomproxy.md).
let options: ProxyOptions
switch ProxyOptions.parse(Array(CommandLine.arguments.dropFirst())) {
case .exit(let text, let code):
    if code == 0 { printLine(text) } else { printError(text) }
    exit(code)
case .run(let o):
    options = o
}
Log.level = options.logLevel

do {
    let loop = try EventLoop()
    let proxy = try Proxy(options: options, loop: loop)
    // Created before any other thread exists (there are none), so the mask covers them all.
    let signals = try SignalSource(signals: [SIGINT, SIGTERM], loop: loop) { signal in
        Log.notice("roomproxy: signal \(signal), stopping")
        loop.stop()
    }
    try proxy.start()
    if let path = options.controlPath {
        // Ten times a second, like the simulated card's control file: a test changes the
        // network mid-call and sees the effect within 0.1 s.
        loop.schedule(after: .milliseconds(100), repeating: .milliseconds(100)) {
            guard Files.exists(path) else { return }
            do {
                let line = try Files.readText(path)
                try? Files.remove(path)
                let (impairment, directions) = try ProxyOptions.controlImpairment(line, directions: options.directions)
                proxy.setImpairment(impairment, directions: directions)
            } catch {
                Log.warning("roomproxy: \(path): \(error); the impairment is unchanged")
            }
        }
    }
    if options.statsInterval > 0 {
        let every = Duration.nanoseconds(Int64(options.statsInterval * 1e9))
        loop.schedule(after: every, repeating: every) { printLine(proxy.statsJSON(final: false)) }
    }
    try loop.run()
    printLine(proxy.statsJSON(final: true))
    signals.close()
    exit(0)
} catch {
    printError("roomproxy: \(error)")
    exit(1)
}
