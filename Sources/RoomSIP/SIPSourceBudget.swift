import RoomSystem

/// A per-source datagram budget for the SIP socket, which anyone may now write to (calls come
/// from strangers): each source address gets a token bucket, so one flooding host is cut off
/// before osip parses its datagrams while the registrar and other callers keep their share.
/// The table of sources is bounded too: when full, the source seen longest ago is forgotten.
struct SIPSourceBudget {
    /// Datagrams a source may send in a burst, and its sustained rate per second. A call's
    /// signalling is a handful of datagrams a second at most (retransmissions included).
    var burst: Double = 40
    var perSecond: Double = 20
    var maximumSources = 256

    private var buckets: [SocketAddress: (tokens: Double, last: UInt64)] = [:]

    /// Whether a datagram from `source` at `now` (monotonic nanoseconds) fits its budget.
    mutating func admit(_ source: SocketAddress, now: UInt64) -> Bool {
        var bucket = buckets[source] ?? (burst, now)
        let elapsed = now > bucket.last ? Double(now - bucket.last) / 1e9 : 0
        bucket.tokens = min(burst, bucket.tokens + elapsed * perSecond)
        bucket.last = now
        let admitted = bucket.tokens >= 1
        if admitted { bucket.tokens -= 1 }
        if buckets[source] == nil, buckets.count >= maximumSources,
           let oldest = buckets.min(by: { $0.value.last < $1.value.last })?.key {
            buckets[oldest] = nil
        }
        buckets[source] = bucket
        return admitted
    }
}
