import RoomCaptureChain

extension AudioProcessor {
    /// Runs one microphone channel through the chain block by block at CPU speed, with `far`
    /// (the same length; silence when nil) as the speaker's signal, and returns what it sends.
    func processOffline(_ mic: [Float], far: [Float]? = nil, block: Int) -> [Float] {
        var out = [Float](repeating: 0, count: mic.count)
        var farBlock = [Float](repeating: 0, count: block), inBlock = farBlock, outBlock = farBlock
        for b in 0..<(mic.count / block) {
            for i in 0..<block { farBlock[i] = far?[b * block + i] ?? 0; inBlock[i] = mic[b * block + i] }
            farBlock.withUnsafeBufferPointer { f in
                var fp: UnsafePointer<Float>? = f.baseAddress
                _ = analyzeRender(&fp)
            }
            inBlock.withUnsafeBufferPointer { i in
                outBlock.withUnsafeMutableBufferPointer { o in
                    var ip: UnsafePointer<Float>? = i.baseAddress
                    var op: UnsafeMutablePointer<Float>? = o.baseAddress
                    _ = processCapture(&ip, into: &op, delayMilliseconds: 0)
                }
            }
            for i in 0..<block { out[b * block + i] = outBlock[i] }
        }
        return out
    }
}
