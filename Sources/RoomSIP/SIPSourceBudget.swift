import RoomSystem

/// A per-source datagram budget for the SIP socket, which anyone may now write to (calls come
/// from strangers): each source address gets a token bucket, so one flooding host is cut off
/// before osip parses its datagrams while the registrar and other callers keep their share.
/// The table of sources is bounded too: when full, the source seen longest ago is forgotten.
///
/// Sources that are not known peers (the registrar, a call's far end) also share one bucket:
/// a flood from many addresses (or one host forging many) would otherwise get a fresh burst for
/// every address, and the per-source table would forget the registrar first.
struct SIPSourceBudget {
    /// Datagrams a source may send in a burst, and its sustained rate per second. A call's
    /// signalling is a handful of datagrams a second at most (retransmissions included).
    var burst: Double = 40
    var perSecond: Double = 20
    var maximumSources = 256
    /// What all sources other than known peers may send together. Calls through the registrar
    /// (the usual case) do not draw on it; a caller dialling the appliance directly does.
    var strangersBurst: Double = 100
    var strangersPerSecond: Double = 50

    private var buckets: [SocketAddress: (tokens: Double, last: UInt64)] = [:]
    private var strangers: (tokens: Double, last: UInt64)?

    /// Whether a datagram from `source` at `now` (monotonic nanoseconds) fits its budget, and
    /// for a source `isKnownPeer` does not vouch for, the strangers' shared budget too.
    mutating func admit(_ source: SocketAddress, now: UInt64, isKnownPeer: () -> Bool = { true }) -> Bool {
        var bucket = buckets[source] ?? (burst, now)
        let admitted = Self.take(&bucket, now: now, burst: burst, perSecond: perSecond)
        if buckets[source] == nil, buckets.count >= maximumSources,
           let oldest = buckets.min(by: { $0.value.last < $1.value.last })?.key {
            buckets[oldest] = nil
        }
        buckets[source] = bucket
        guard admitted, !isKnownPeer() else { return admitted }
        var shared = strangers ?? (strangersBurst, now)
        defer { strangers = shared }
        return Self.take(&shared, now: now, burst: strangersBurst, perSecond: strangersPerSecond)
    }

    /// Refills `bucket` for the time since it was last used and takes a token if there is one.
    private static func take(_ bucket: inout (tokens: Double, last: UInt64), now: UInt64, burst: Double, perSecond: Double) -> Bool {
        let elapsed = now > bucket.last ? Double(now - bucket.last) / 1e9 : 0
        bucket.tokens = min(burst, bucket.tokens + elapsed * perSecond)
        bucket.last = now
        guard bucket.tokens >= 1 else { return false }
        bucket.tokens -= 1
        return true
    }

    /// Sources remembered (bounded by `maximumSources`).
    var sourcesRemembered: Int { buckets.count }
}
