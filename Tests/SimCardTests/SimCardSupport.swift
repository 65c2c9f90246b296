// Helpers for the roomsim tests: locating the plugin, room files, WAV files, PCM setup.
// Only CAlsa + Glibc + XCTest and the suite's rerun policy (RoomBase/RoomSystem are deliberately not
// used here).
import CAlsa
import Glibc
import RoomTestSupport
import XCTest

enum SimCard {
    static let pluginName = "libasound_module_pcm_roomsim.so"

    /// The repository root, from this source file's path (Tests/SimCardTests/<file>).
    static let repoRoot: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    /// The build directory: the directory of the running test executable (/proc/self/exe).
    static let buildDir: String = {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        guard n > 0 else { return "" }
        let exe = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var parts = exe.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast()
        // swift test runs <build>/<Package>PackageTests.xctest; be tolerant of a bundle dir
        var dir = parts.joined(separator: "/")
        if dir.hasSuffix(".xctest") {
            dir = String(dir[..<(dir.lastIndex(of: "/") ?? dir.endIndex)])
        }
        return dir
    }()

    /// Sets ALSA_PLUGIN_DIR / ALSA_CONFIG_PATH (before any ALSA call: alsa-lib caches the
    /// plugin directory per process). Fails the test with a clear message when the plugin
    /// was not built (`swift test` does not build dynamic library products by itself).
    static func setUp(file: StaticString = #filePath, line: UInt = #line) throws {
        let plugin = "\(buildDir)/\(pluginName)"
        guard access(plugin, R_OK) == 0 else {
            XCTFail("""
                roomsim plugin not found at \(plugin). `swift test` does not build the dynamic \
                library product: run `swift build --product asound_module_pcm_roomsim` \
                (or `swift build`) first.
                """, file: file, line: line)
            throw XCTSkip("plugin missing")
        }
        setenv("ALSA_PLUGIN_DIR", buildDir, 1)
        setenv("ALSA_CONFIG_PATH", "/usr/share/alsa/alsa.conf:\(repoRoot)/board/sim/asound.conf", 1)
    }
}

/// A temporary directory with a room file; ROOMSIM_CONFIG points at it.
final class Room {
    let dir: String
    var conf: String { "\(dir)/room.conf" }
    var status: String { "\(dir)/status.txt" }
    var control: String { "\(dir)/control" }

    init(_ body: String) {
        var template = Array("/tmp/roomsim-test-XXXXXX".utf8CString)
        let p = mkdtemp(&template)!
        dir = String(cString: p)
        let text = "status = status.txt\n" + body + "\n"
        writeFile(conf, Array(text.utf8))
        setenv("ROOMSIM_CONFIG", conf, 1)
    }

    deinit { removeTree(dir) }

    /// `capture`/`playback`/`faults` line of the status file as key -> value.
    func statusLine(_ name: String) -> [String: String] {
        guard let text = readText(status) else { return [:] }
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.first.map(String.init) == name else { continue }
            var out: [String: String] = [:]
            for w in words.dropFirst() {
                if let eq = w.firstIndex(of: "=") {
                    out[String(w[..<eq])] = String(w[w.index(after: eq)...])
                }
            }
            return out
        }
        return [:]
    }
}

/// Removes a directory and what is in it (a scene's .roomsim-cache/ too).
func removeTree(_ path: String) {
    if let d = opendir(path) {
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            guard name != "." && name != ".." else { continue }
            if e.pointee.d_type == UInt8(DT_DIR) { removeTree("\(path)/\(name)") } else { unlink("\(path)/\(name)") }
        }
        closedir(d)
    }
    rmdir(path)
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0, "cannot create \(path)")
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

func readBytes(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return out
}

func readText(_ path: String) -> String? {
    readBytes(path).map { String(decoding: $0, as: UTF8.self) }
}

/// A PCM16 WAV file image of interleaved samples.
func wavBytes(channels: Int, rate: Int, samples: [Int16]) -> [UInt8] {
    var b: [UInt8] = []
    func u32(_ v: Int) { b += [UInt8(v & 255), UInt8(v >> 8 & 255), UInt8(v >> 16 & 255), UInt8(v >> 24 & 255)] }
    func u16(_ v: Int) { b += [UInt8(v & 255), UInt8(v >> 8 & 255)] }
    let data = samples.count * 2
    b += Array("RIFF".utf8); u32(36 + data); b += Array("WAVEfmt ".utf8)
    u32(16); u16(1); u16(channels); u32(rate); u32(rate * channels * 2); u16(channels * 2); u16(16)
    b += Array("data".utf8); u32(data)
    for s in samples { u16(Int(UInt16(bitPattern: s))) }
    return b
}

/// Samples of a PCM16 WAV image (after a 44-byte canonical header, as roomsim writes it).
func wavSamples(_ bytes: [UInt8]) -> (channels: Int, rate: Int, samples: [Int16])? {
    guard bytes.count >= 44, Array(bytes[0..<4]) == Array("RIFF".utf8) else { return nil }
    func u32(_ o: Int) -> Int { Int(bytes[o]) | Int(bytes[o + 1]) << 8 | Int(bytes[o + 2]) << 16 | Int(bytes[o + 3]) << 24 }
    let channels = Int(bytes[22]) | Int(bytes[23]) << 8
    let size = u32(40)
    guard 44 + size <= bytes.count else { return nil }
    var s: [Int16] = []
    s.reserveCapacity(size / 2)
    var i = 44
    while i + 1 < 44 + size {
        s.append(Int16(bitPattern: UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8))
        i += 2
    }
    return (channels, u32(24), s)
}

/// Runs body with stderr redirected to a file; returns body's result and what it wrote there.
func capturingStderr<T>(_ body: () throws -> T) rethrows -> (T, String) {
    var template = Array("/tmp/roomsim-stderr-XXXXXX".utf8CString)
    let fd = mkstemp(&template)
    precondition(fd >= 0, "mkstemp")
    let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    defer { unlink(path) }
    fflush(nil)
    let saved = dup(2)
    dup2(fd, 2)
    close(fd)
    defer { fflush(nil); dup2(saved, 2); close(saved) }
    let result = try body()
    fflush(nil)
    return (result, readText(path) ?? "")
}

func monotonicNs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

struct AlsaError: Error, CustomStringConvertible {
    let what: String
    let code: Int32
    var description: String { "\(what): \(code) (\(String(cString: snd_strerror(code))))" }
}

/// An open, configured roomsim PCM (S16_LE or FLOAT_LE interleaved).
final class PCM {
    let handle: OpaquePointer
    let channels: Int
    let period: Int

    static func open(_ stream: snd_pcm_stream_t) -> (PCM?, Int32) {
        var h: OpaquePointer?
        let rc = snd_pcm_open(&h, "roomsim", stream, 0)
        guard rc == 0, let h else { return (nil, rc) }
        return (PCM(handle: h), 0)
    }

    private init(handle: OpaquePointer) {
        self.handle = handle
        channels = 0
        period = 0
    }

    init(_ stream: snd_pcm_stream_t, channels: Int, rate: Int = 48000, period: Int = 480,
         periods: Int = 4, format: snd_pcm_format_t = SND_PCM_FORMAT_S16_LE) throws {
        var h: OpaquePointer?
        var rc = snd_pcm_open(&h, "roomsim", stream, 0)
        guard rc == 0, let h else { throw AlsaError(what: "snd_pcm_open", code: rc) }
        handle = h
        self.channels = channels
        self.period = period
        rc = PCM.configure(h, channels: channels, rate: rate, period: period, periods: periods,
                           format: format)
        if rc < 0 {
            snd_pcm_close(h)
            throw AlsaError(what: "hw_params", code: rc)
        }
    }

    /// Applies hw params; returns the first error.
    static func configure(_ h: OpaquePointer, channels: Int, rate: Int, period: Int, periods: Int,
                          format: snd_pcm_format_t) -> Int32 {
        var hw: OpaquePointer?
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        var rc = snd_pcm_hw_params_any(h, hw)
        if rc >= 0 { rc = snd_pcm_hw_params_set_access(h, hw, SND_PCM_ACCESS_RW_INTERLEAVED) }
        if rc >= 0 { rc = snd_pcm_hw_params_set_format(h, hw, format) }
        if rc >= 0 { rc = snd_pcm_hw_params_set_channels(h, hw, UInt32(channels)) }
        if rc >= 0 { rc = snd_pcm_hw_params_set_rate(h, hw, UInt32(rate), 0) }
        var p = snd_pcm_uframes_t(period)
        var dir: Int32 = 0
        if rc >= 0 { rc = snd_pcm_hw_params_set_period_size_near(h, hw, &p, &dir) }
        var b = snd_pcm_uframes_t(period * periods)
        if rc >= 0 { rc = snd_pcm_hw_params_set_buffer_size_near(h, hw, &b) }
        if rc >= 0 { rc = snd_pcm_hw_params(h, hw) }
        return rc
    }

    func read(_ buf: inout [Int16], frames: Int, at offset: Int = 0) -> Int {
        buf.withUnsafeMutableBufferPointer {
            snd_pcm_readi(handle, $0.baseAddress! + offset * channels, snd_pcm_uframes_t(frames))
        }
    }

    func write(_ buf: [Int16], frames: Int, at offset: Int = 0) -> Int {
        buf.withUnsafeBufferPointer {
            snd_pcm_writei(handle, $0.baseAddress! + offset * channels, snd_pcm_uframes_t(frames))
        }
    }

    /// Reads `frames` frames (blocking). An overrun (-EPIPE: this process came to the card later
    /// than its buffer allows, 40 ms with the default 4 periods, which a stalled machine does)
    /// ends the read there and is reported, not thrown, so that the caller's `Disturbance.rerun`
    /// can judge the run; any other error throws.
    func readAll(_ frames: Int) throws -> CaptureRead {
        var buf = [Int16](repeating: 0, count: frames * channels)
        var done = 0
        while done < frames {
            let n = read(&buf, frames: min(period, frames - done), at: done)
            if n == -Int(EPIPE) { return CaptureRead(samples: buf, framesRead: done, overran: true) }
            if n < 0 { throw AlsaError(what: "snd_pcm_readi", code: Int32(n)) }
            done += n
        }
        return CaptureRead(samples: buf, framesRead: done, overran: false)
    }

    func close() { snd_pcm_close(handle) }
}

/// What `PCM.readAll` got.
struct CaptureRead {
    /// Interleaved; zeros after `framesRead` when the read overran.
    let samples: [Int16]
    let framesRead: Int
    /// The capture stream overran (-EPIPE) before all the frames were read.
    let overran: Bool

    /// The samples of a read that was not spoilt by an overrun; throws (failing the test) when
    /// it was: the caller's rerun policy let this run stand, so every run it allowed overran.
    func whole() throws -> [Int16] {
        guard !overran else {
            throw AlsaError(what: "snd_pcm_readi: overrun after \(framesRead) frames in every run the rerun policy allowed",
                            code: -EPIPE)
        }
        return samples
    }
}

/// Opens a capture stream of `channels` on the current room (ROOMSIM_CONFIG), reads `frames`
/// frames and closes it; again, by the suite's one policy, while an overrun spoilt the read (a
/// new open starts the input file at frame 0 again, so every run captures the same thing).
/// Throws when the last run overran too, or on any other error.
func captureAll(_ label: String, channels: Int, frames: Int) throws -> [Int16] {
    try Disturbance.rerun(label, disturbed: { (read: CaptureRead) in read.overran }) {
        let pcm = try PCM(SND_PCM_STREAM_CAPTURE, channels: channels)
        defer { pcm.close() }
        return try pcm.readAll(frames)
    }.whole()
}

/// What the 4 mics captured while the speaker played an impulse, and the room's status after.
struct ImpulseRun {
    let mics: [Int16]                 // interleaved, 4 channels
    /// Every read and write returned all its frames (false after an xrun).
    let complete: Bool
    let capture, playback: [String: String]
    var captureStart: Double { Double(capture["start_ns"] ?? "") ?? 0 }
    var playbackStart: Double { Double(playback["start_ns"] ?? "") ?? 0 }
    /// How far capture frame j lies behind speaker sample j, in samples at 48 kHz: capture
    /// sample j hears speaker sample round((tc0 + j/rate - delay - tp0) * rate).
    func speakerOffset(echoDelayMs: Double) -> Double {
        (captureStart - playbackStart - echoDelayMs * 1e6) * 48000 / 1e9
    }
}

/// Full duplex in lock-step on the room's card: starts capture, primes playback with 960 frames,
/// then reads 480 frames of 4 mics and writes the next 480 speaker frames (silence but one sample
/// of `level` at `at`) until `total` frames were read. 20 ms of primed speaker is all the slack
/// there is: a stall of this process longer than that underruns the speaker, which measures the
/// machine, not the card, so such a run is made again (the suite's one policy) and only the last
/// one is asserted on.
func playImpulse(_ room: Room, at: Int, level: Int16, total: Int,
                 file: StaticString = #filePath, line: UInt = #line) throws -> ImpulseRun {
    let run = try Disturbance.rerun("impulse through the card", disturbed: { !$0.complete || $0.playback["xruns"] != "0" }) {
        try playImpulseOnce(room, at: at, level: level, total: total)
    }
    XCTAssertTrue(run.complete, "every read and write of the run was whole", file: file, line: line)
    return run
}

private func playImpulseOnce(_ room: Room, at: Int, level: Int16, total: Int) throws -> ImpulseRun {
    let cap = try PCM(SND_PCM_STREAM_CAPTURE, channels: 4)
    let play = try PCM(SND_PCM_STREAM_PLAYBACK, channels: 1)
    defer { cap.close(); play.close() }
    var played = [Int16](repeating: 0, count: total + 960)
    played[at] = level
    var complete = snd_pcm_start(cap.handle) == 0 && play.write(played, frames: 960) == 960
    var written = 960, got = 0
    var mics = [Int16](repeating: 0, count: total * 4)
    while complete, got < total {
        let n = cap.read(&mics, frames: 480, at: got)
        if n != 480 { complete = false; break }
        got += n
        if play.write(played, frames: 480, at: written) != 480 { complete = false; break }
        written += 480
    }
    return ImpulseRun(mics: mics, complete: complete, capture: room.statusLine("capture"), playback: room.statusLine("playback"))
}
