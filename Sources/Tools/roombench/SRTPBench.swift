import Glibc
import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomSystem

/// What SRTP costs per packet, in isolation: protect and unprotect of a 10 ms Opus-sized RTP
/// packet (12-byte header, 8-byte audio-level extension, 120-byte payload) through roomd's
/// `SRTPSession`, and the heap allocations per packet when the allocation probe is preloaded
/// (Debian's libsrtp2 does its AES-GCM through NSS, which allocates inside every call).
enum SRTPBench {
    static func run() {
        let key = SRTPMasterKey.random()
        guard let sender = try? SRTPSession(key: key, direction: .protect),
              let receiver = try? SRTPSession(key: key, direction: .unprotect)
        else {
            printError("roombench: libsrtp2 did not set up\n")
            return
        }
        let packets = 200_000, headerSize = 20, payloadSize = 120
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        let probe = AllocationProbe()
        func packet(_ i: Int) {
            buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
            buffer[0] = 0x90; buffer[1] = 111          // V=2, X=1, Opus
            buffer[2] = UInt8(truncatingIfNeeded: i >> 8); buffer[3] = UInt8(truncatingIfNeeded: i)
            buffer[8] = 0x12; buffer[9] = 0x34; buffer[10] = 0x56; buffer[11] = 0x78
            buffer[12] = 0xBE; buffer[13] = 0xDE; buffer[14] = 0; buffer[15] = 1
            buffer[16] = 0x10; buffer[17] = 0x80 | 30; buffer[18] = 0; buffer[19] = 0
        }
        var protectNs: UInt64 = 0, unprotectNs: UInt64 = 0
        var allocations: UInt = 0, failures = 0
        for i in 0 ..< packets {
            packet(i)
            let allocBefore = probe.isAvailable ? probe.threadAllocations() : 0
            let t0 = monotonicNanoseconds()
            guard let n = sender.protect(buffer, length: headerSize + payloadSize) else { failures += 1; continue }
            let t1 = monotonicNanoseconds()
            guard case .rtp = receiver.unprotect(buffer, length: n) else { failures += 1; continue }
            let t2 = monotonicNanoseconds()
            if probe.isAvailable { allocations += probe.threadAllocations() - allocBefore }
            // The first packets set up the stream (libsrtp clones its template per SSRC).
            if i >= 1000 {
                protectNs += t1 - t0
                unprotectNs += t2 - t1
            }
        }
        let measured = Double(packets - 1000)
        let config = ",\"config\":\"AEAD_AES_128_GCM, \(headerSize)-byte header + \(payloadSize)-byte payload, \(packets) packets, \(SRTPSession.libraryVersion), AES-GCM by \(SRTPLibrary.gcmBackend)\",\"failures\":\(failures)"
        MicroBench.emit("srtp", "srtp.protect_ns", Double(protectNs) / measured, "ns", config)
        MicroBench.emit("srtp", "srtp.unprotect_ns", Double(unprotectNs) / measured, "ns", config)
        if probe.isAvailable && probe.verify() {
            MicroBench.emit("srtp", "srtp.allocations_per_packet", Double(allocations) / Double(packets), "count",
                            config + ",\"measure\":\"heap allocations per protect + unprotect, this thread (roomallocprobe)\"")
        }
    }
}
