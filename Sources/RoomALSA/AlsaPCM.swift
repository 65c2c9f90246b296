import CAlsa
import RoomSystem

/// Why a PCM operation failed, in words an installer can act on (device name and ALSA's text).
public struct AudioDeviceError: Error, CustomStringConvertible, Sendable {
    public let device: String
    public let message: String
    public let code: Int32
    public var description: String { "audio device \"\(device)\": \(message)" }

    /// The device is gone (unplugged, driver error, simulated loss) rather than merely late:
    /// the engine closes it and reopens with back-off instead of recovering in place.
    public var isDeviceLost: Bool { AlsaCode.isDeviceLost(code) }
}

/// ALSA's error codes by name: ALSA returns `-errno`, and the engine decides between
/// recovering in place and reopening the device through these instead of comparing numbers.
public enum AlsaCode {
    /// -EBADFD: no PCM is open (what `AlsaPCM` answers once closed, and the engine without a device).
    public static var notOpen: Int32 { @inline(__always) get { -Errno.badDescriptorState.rawValue } }
    /// -EIO: the device failed without a code of its own (streams that would not start again).
    public static var ioError: Int32 { @inline(__always) get { -Errno.ioError.rawValue } }

    /// An xrun (-EPIPE), a suspend (-ESTRPIPE), or a call interrupted or that would block
    /// (-EINTR, -EAGAIN): the stream is recovered in place (`AlsaPCM.recover`). On the audio
    /// thread: inlined, allocates nothing.
    @inline(__always)
    public static func isXrun(_ code: Int32) -> Bool {
        code == -Errno.brokenPipe.rawValue || code == -Errno.streamsPipeError.rawValue
            || code == -Errno.interrupted.rawValue || code == -Errno.wouldBlock.rawValue
    }

    /// The device is gone (-ENODEV, -EIO, -EBADFD, -ENOENT, -ENXIO) rather than merely late.
    public static func isDeviceLost(_ code: Int32) -> Bool {
        code == -Errno.noSuchDevice.rawValue || code == ioError || code == notOpen
            || code == -Errno.noSuchFile.rawValue || code == -Errno.noSuchDeviceOrAddress.rawValue
    }
}

@inline(__always) func alsaText(_ code: Int32) -> String { String(cString: snd_strerror(code)) }

/// One ALSA PCM stream in interleaved S16_LE, opened with exactly the rate and channel count the
/// board asks for: resampling or remixing behind the engine's back would break echo cancellation,
/// so a device that cannot do them is refused with a clear error instead.
///
/// Not Sendable on purpose: a snd_pcm_t belongs to the audio thread that opened it.
public final class AlsaPCM {
    public enum Direction: Sendable { case capture, playback }

    public let device: String
    public let direction: Direction
    public let rate: Int
    public let channels: Int
    public let periodFrames: Int
    public let bufferFrames: Int
    private var pcm: OpaquePointer?

    public init(device: String, direction: Direction, rate: Int, channels: Int,
                periodFrames: Int, periods: Int) throws(AudioDeviceError) {
        self.device = device
        self.direction = direction
        self.rate = rate
        self.channels = channels
        self.periodFrames = periodFrames
        let stream = direction == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK
        var handle: OpaquePointer?
        let rc = snd_pcm_open(&handle, device, stream, 0)
        guard rc >= 0, let handle else {
            throw AudioDeviceError(device: device, message: "cannot open for \(direction): \(alsaText(rc))", code: rc)
        }
        pcm = handle
        var actualBuffer = 0
        do throws(AudioDeviceError) {
            actualBuffer = try Self.configure(handle, device: device, direction: direction, rate: rate,
                                              channels: channels, periodFrames: periodFrames, periods: periods)
        } catch {
            snd_pcm_close(handle)
            pcm = nil
            throw error
        }
        bufferFrames = actualBuffer
    }

    deinit { if let pcm { snd_pcm_close(pcm) } }

    private static func configure(_ pcm: OpaquePointer, device: String, direction: Direction, rate: Int,
                                  channels: Int, periodFrames: Int, periods: Int) throws(AudioDeviceError) -> Int {
        func fail(_ what: String, _ rc: Int32) -> AudioDeviceError {
            AudioDeviceError(device: device, message: "\(what): \(alsaText(rc))", code: rc)
        }
        var hw: OpaquePointer?
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        var rc = snd_pcm_hw_params_any(pcm, hw)
        if rc < 0 { throw fail("no hardware configuration", rc) }
        rc = snd_pcm_hw_params_set_rate_resample(pcm, hw, 0)
        rc = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        if rc < 0 { throw fail("interleaved read/write access not supported", rc) }
        rc = snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE)
        if rc < 0 { throw fail("16-bit little-endian samples not supported", rc) }
        rc = snd_pcm_hw_params_set_channels(pcm, hw, UInt32(channels))
        if rc < 0 {
            var lo: UInt32 = 0, hi: UInt32 = 0
            snd_pcm_hw_params_get_channels_min(hw, &lo)
            snd_pcm_hw_params_get_channels_max(hw, &hi)
            throw AudioDeviceError(device: device, message: "\(channels) channels not supported for \(direction) (device offers \(lo)..\(hi))", code: rc)
        }
        rc = snd_pcm_hw_params_set_rate(pcm, hw, UInt32(rate), 0)
        if rc < 0 {
            var lo: UInt32 = 0, hi: UInt32 = 0
            var dir: Int32 = 0
            snd_pcm_hw_params_get_rate_min(hw, &lo, &dir)
            snd_pcm_hw_params_get_rate_max(hw, &hi, &dir)
            throw AudioDeviceError(device: device, message: "rate \(rate) Hz not supported for \(direction) (device offers \(lo)..\(hi) Hz)", code: rc)
        }
        var period = snd_pcm_uframes_t(periodFrames)
        var dir: Int32 = 0
        rc = snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir)
        if rc < 0 { throw fail("period of \(periodFrames) frames not supported", rc) }
        if Int(period) != periodFrames {
            throw AudioDeviceError(device: device, message: "period of \(periodFrames) frames not supported (nearest \(period))", code: -Errno.invalidArgument.rawValue)
        }
        var buffer = snd_pcm_uframes_t(periodFrames * periods)
        rc = snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)
        if rc < 0 { throw fail("buffer of \(periodFrames * periods) frames not supported", rc) }
        rc = snd_pcm_hw_params(pcm, hw)
        if rc < 0 { throw fail("cannot apply hardware parameters", rc) }

        var sw: OpaquePointer?
        snd_pcm_sw_params_malloc(&sw)
        defer { snd_pcm_sw_params_free(sw) }
        snd_pcm_sw_params_current(pcm, sw)
        snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(periodFrames))
        // Playback starts explicitly once the engine has pre-filled it; capture on first read.
        let threshold: snd_pcm_uframes_t = direction == .playback ? buffer * 2 : 1
        snd_pcm_sw_params_set_start_threshold(pcm, sw, threshold)
        rc = snd_pcm_sw_params(pcm, sw)
        if rc < 0 { throw fail("cannot apply software parameters", rc) }
        return Int(buffer)
    }

    public func start() throws(AudioDeviceError) {
        guard let pcm else { return }
        let rc = snd_pcm_start(pcm)
        if rc < 0 { throw AudioDeviceError(device: device, message: "cannot start \(direction): \(alsaText(rc))", code: rc) }
    }

    /// Reads exactly `frames` frames unless an error occurs. Returns frames read or a negative
    /// ALSA error code. Never allocates.
    @inline(__always)
    public func read(_ buffer: UnsafeMutablePointer<Int16>, frames: Int) -> Int {
        guard let pcm else { return Int(AlsaCode.notOpen) }
        var done = 0
        while done < frames {
            let n = snd_pcm_readi(pcm, buffer + done * channels, snd_pcm_uframes_t(frames - done))
            if n < 0 { return Int(n) }
            done += Int(n)
        }
        return done
    }

    /// Writes `frames` frames; returns frames written or a negative ALSA error code.
    @inline(__always)
    public func write(_ buffer: UnsafePointer<Int16>, frames: Int) -> Int {
        guard let pcm else { return Int(AlsaCode.notOpen) }
        var done = 0
        while done < frames {
            let n = snd_pcm_writei(pcm, buffer + done * channels, snd_pcm_uframes_t(frames - done))
            if n < 0 { return Int(n) }
            done += Int(n)
        }
        return done
    }

    /// Recovers from an xrun (-EPIPE) or suspend (-ESTRPIPE) in place. Returns 0 on success.
    public func recover(_ code: Int32) -> Int32 {
        guard let pcm else { return AlsaCode.notOpen }
        return snd_pcm_recover(pcm, code, 1)
    }

    /// Frames the application can write (playback) or read (capture) now, or a negative error.
    @inline(__always)
    public func available() -> Int {
        guard let pcm else { return Int(AlsaCode.notOpen) }
        return Int(snd_pcm_avail_update(pcm))
    }

    /// Frames between the application pointer and the sound actually leaving/entering the
    /// hardware: the playback part of the echo path delay.
    @inline(__always)
    public func delayFrames() -> Int {
        guard let pcm else { return 0 }
        var d: snd_pcm_sframes_t = 0
        return snd_pcm_delay(pcm, &d) == 0 ? Int(d) : 0
    }

    public func drop() { if let pcm { snd_pcm_drop(pcm) } }

    /// After `drop`: ready to be written (playback pre-fill) and started again.
    public func prepare() -> Int32 {
        guard let pcm else { return AlsaCode.notOpen }
        return snd_pcm_prepare(pcm)
    }

    public var stateName: String {
        guard let pcm else { return "closed" }
        return String(cString: snd_pcm_state_name(snd_pcm_state(pcm)))
    }
}
