import RoomAudio
import RoomGPIO
import RoomSettings
import RoomSystem

/// The LED ring shows where the talker is (docs/gpio.md, "The LED ring"): ten times a second
/// the engine's talker direction and the mute state become a pattern, written when it changes.
final class TalkerRing {
    private let output: LEDRingOutput
    private let ring: BoardRing
    private let loop: EventLoop
    private var timer: EventLoop.TimerID?
    private var shown: [RingColor]?

    init(ring: BoardRing, loop: EventLoop, engine: AudioEngine, muted: @escaping () -> Bool) throws(SystemError) {
        output = try LEDRings.open(ring)
        self.ring = ring
        self.loop = loop
        timer = loop.schedule(after: .zero, repeating: .milliseconds(100)) { [unowned self, unowned engine] in
            let talker = engine.stats.talker
            self.show(RingPattern.pixels(ring: ring, talkerAzimuthDegrees: talker?.azimuthDegrees,
                                         locked: talker?.locked ?? false, muted: muted()))
        }
    }

    private func show(_ pixels: [RingColor]) {
        guard pixels != shown else { return }
        do {
            try output.show(pixels)
            shown = pixels
        } catch {
            Log.warning("\(error); the LED ring stops")
            close()
        }
    }

    func close() {
        if let timer { loop.cancel(timer) }
        timer = nil
        output.close()
    }
}
