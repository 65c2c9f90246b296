import CCaptureChain
import RoomBase
import RoomDSP

/// The array's beam on its own (capture_chain.h `rbeam_*`, the same beams the chain steers), for
/// measuring off the audio thread: `roomctl selftest` asks it how much quieter the room's noise
/// is through the beam than through mic 0. Not for the audio thread: `process` allocates its
/// output, and the chain has its own beam inside the processor.
///
/// One thread at a time (the handle is not Sendable); make one per measurement.
public final class ArrayBeam: SelfTestSteerableBeam {
    private let beam: OpaquePointer
    public let mics: Int
    /// Samples per 10 ms block, what `process` consumes per step.
    public let blockFrames: Int
    /// How many samples the output lags the mics: the beam's low-delay overlap-add holds 2 ms
    /// (capture_chain.h, rbeam_process; apm_shim.cpp builds it with rate / 500).
    public let latency: Int

    /// Nil when the C side refuses the array (fewer than 2 or more than 8 mics, a rate that is
    /// not a multiple of 100 Hz, out of memory).
    public init?(rate: Int, micPositions: [Point3]) {
        guard rate >= 8000, rate % 100 == 0, micPositions.count >= 2, micPositions.count <= 8 else { return nil }
        let xyz = micPositions.flatMap { [Float($0.x), Float($0.y), Float($0.z)] }
        guard xyz.allSatisfy(\.isFinite),
              let handle = xyz.withUnsafeBufferPointer({ rbeam_create(Int32(rate), Int32(micPositions.count), $0.baseAddress) })
        else { return nil }
        beam = handle
        mics = micPositions.count
        blockFrames = Int(rbeam_frames_per_block(handle))
        latency = rate / 500
    }

    deinit { rbeam_destroy(beam) }

    /// Points the beam at `azimuthDegrees` (board frame: 0 = +x, counter-clockwise) at once.
    public func steer(_ azimuthDegrees: Double) {
        rbeam_steer(beam, Float(azimuthDegrees))
    }

    /// The beam over `planes` (one per mic, equal lengths): whole blocks only, so the output is
    /// the input's length rounded down to a block. Empty when the planes do not match the array.
    public func process(_ planes: [[Float]]) -> [Float] {
        guard planes.count == mics, blockFrames > 0, let count = planes.first?.count,
              planes.allSatisfy({ $0.count == count }) else { return [] }
        let blocks = count / blockFrames
        var out = [Float](repeating: 0, count: blocks * blockFrames)
        // One contiguous copy so each block's plane pointers are plain offsets.
        var flat = [Float](repeating: 0, count: mics * count)
        for (m, plane) in planes.enumerated() { flat.replaceSubrange((m * count)..<((m + 1) * count), with: plane) }
        var pointers = [UnsafePointer<Float>?](repeating: nil, count: mics)
        flat.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                for b in 0..<blocks {
                    for m in 0..<mics { pointers[m] = input.baseAddress! + m * count + b * blockFrames }
                    pointers.withUnsafeBufferPointer { rbeam_process(beam, $0.baseAddress, output.baseAddress! + b * blockFrames) }
                }
            }
        }
        return out
    }
}

/// `SelfTestBeam` with roomd's beam: the daemon hands this value to the analysis's worker,
/// which builds the beam there (the handle never crosses threads).
public struct ArrayBeamMeter: SelfTestBeam {
    public let rate: Int
    public let micPositions: [Point3]

    public init(rate: Int, micPositions: [Point3]) {
        self.rate = rate
        self.micPositions = micPositions
    }

    public func make() -> (any SelfTestSteerableBeam)? { ArrayBeam(rate: rate, micPositions: micPositions) }
}
