import RoomCaptureChain

extension AudioProcessor {
    /// Runs one microphone channel through the chain block by block at CPU speed, with `far`
    /// (the same length; silence when nil) as the speaker's signal, and returns what it sends.
    func processOffline(_ mic: [Float], far: [Float]? = nil, block: Int) -> [Float] {
        processOffline(mics: [mic], far: far, block: block)
    }

    /// The same for every mic of an array (one plane each, the same length), calling
    /// `afterBlock` with each block's index after it was processed — where the engine steers.
    func processOffline(mics: [[Float]], far: [Float]? = nil, block: Int, afterBlock: (Int) -> Void = { _ in }) -> [Float] {
        let count = mics[0].count
        var out = [Float](repeating: 0, count: count)
        var farBlock = [Float](repeating: 0, count: block), outBlock = farBlock
        var planes = [Float](repeating: 0, count: mics.count * block)
        for b in 0..<(count / block) {
            for i in 0..<block { farBlock[i] = far?[b * block + i] ?? 0 }
            for (m, mic) in mics.enumerated() { for i in 0..<block { planes[m * block + i] = mic[b * block + i] } }
            farBlock.withUnsafeBufferPointer { f in
                var fp: UnsafePointer<Float>? = f.baseAddress
                _ = analyzeRender(&fp)
            }
            planes.withUnsafeBufferPointer { p in
                let ins: [UnsafePointer<Float>?] = (0..<mics.count).map { p.baseAddress! + $0 * block }
                outBlock.withUnsafeMutableBufferPointer { o in
                    var op: UnsafeMutablePointer<Float>? = o.baseAddress
                    _ = ins.withUnsafeBufferPointer { processCapture($0.baseAddress!, into: &op, delayMilliseconds: 0) }
                }
            }
            for i in 0..<block { out[b * block + i] = outBlock[i] }
            afterBlock(b)
        }
        return out
    }
}
