
/// The messages a call exchanges every second or so — `ping`, `pong`, `ok`, `loss_report`,
/// `receiver_loss`, `active_speakers` — read and written without Codable.
///
/// Why: JSONDecoder and JSONEncoder are FoundationEssentials' largest code in roomd. Start-up
/// gives its pages back 3 s in (`ResidentMemory.releaseReadOnlyFilePages`); a call that keeps
/// coding these messages through Codable maps that code again (docs/benchmarks.md, "A call's
/// memory, 2026-11-25: signalling without Codable, libraries bound at load").
///
/// This is a fast path, not a second decoder: it accepts only the plainest form of these
/// messages (ASCII strings without escapes, integers without fraction or exponent, no `null`,
/// no key twice, no key the type does not use, every value in range) and answers nil for
/// anything else, which then goes through Codable (`SignalMessage.decode`), so every error a
/// peer sees is the one it always was. Where it answers, it answers what Codable would:
/// `SignalFastPathTests` checks both paths against each other, bytes and values.
package enum SignalFastPath {
    // MARK: Decoding

    /// The message in `payload`, or nil when it is not one of the fast path's messages in
    /// the form it reads.
    package static func decode(_ payload: [UInt8]) -> SignalMessage? {
        payload.withUnsafeBufferPointer { bytes in
            var reader = Reader(bytes: bytes)
            guard let fields = reader.object() else { return nil }
            return fields.message()
        }
    }

    private enum Kind { case ping, pong, ok, receiverLoss, lossReport, activeSpeakers }

    /// What one object held, by key. `present` has a bit per key so a key twice is seen.
    private struct Fields {
        var present: UInt16 = 0
        var kind: Kind = .ping
        var id: Int64 = 0
        var t: Int64 = 0
        var requestID: Int64 = 0
        var receivers: Int64 = 0
        var lostScalar: Int64 = 0
        var lostArray: [Int64]? = nil
        var ssrcs: [Int64] = []
        var ids: [Int64] = []
        var levels: [Int64] = []

        static let type: UInt16 = 1 << 0, id: UInt16 = 1 << 1, t: UInt16 = 1 << 2, requestID: UInt16 = 1 << 3
        static let receivers: UInt16 = 1 << 4, lostPermille: UInt16 = 1 << 5, ssrcs: UInt16 = 1 << 6
        static let ids: UInt16 = 1 << 7, levels: UInt16 = 1 << 8

        /// The message, when the keys are exactly `type`, optionally `id`, and `required`,
        /// and every value is in range; nil otherwise.
        func message() -> SignalMessage? {
            guard present & Self.type != 0 else { return nil }
            var id: Int?
            if present & Self.id != 0 {
                guard let value = Int(exactly: self.id) else { return nil }
                id = value
            }
            func keys(_ required: UInt16) -> Bool { present & ~Self.id == Self.type | required }
            switch kind {
            case .ping, .pong:
                guard keys(Self.t) else { return nil }
                return SignalMessage(id: id, kind == .pong ? .pong(t: t) : .ping(t: t))
            case .ok:
                guard keys(Self.requestID), let requestID = Int(exactly: requestID) else { return nil }
                return SignalMessage(id: id, .ok(requestID: requestID))
            case .receiverLoss:
                guard keys(Self.lostPermille | Self.receivers), lostArray == nil,
                    let permille = UInt16(exactly: lostScalar), permille <= SignalLimits.maxLossPermille,
                    let receivers = Int(exactly: receivers), receivers >= 0
                else { return nil }
                return SignalMessage(id: id, .receiverLoss(.init(lostPermille: permille, receivers: receivers)))
            case .lossReport:
                guard keys(Self.ssrcs | Self.lostPermille), let lostArray,
                    let ssrcs = Self.narrow(ssrcs, UInt32.self), let permille = Self.narrow(lostArray, UInt16.self),
                    SignalLimits.checkLossReport(ssrcs: ssrcs.count, permille: permille) == nil
                else { return nil }
                return SignalMessage(id: id, .lossReport(.init(ssrcs: ssrcs, lostPermille: permille)))
            case .activeSpeakers:
                guard keys(Self.ids | Self.levels), let ids = Self.narrow(ids, UInt32.self),
                    let levels = Self.narrow(levels, UInt8.self), levels.count == ids.count,
                    !levels.contains(where: { $0 > SignalLimits.maxAudioLevel })
                else { return nil }
                return SignalMessage(id: id, .activeSpeakers(.init(ids: ids, levels: levels)))
            }
        }

        static func narrow<T: FixedWidthInteger>(_ values: [Int64], _ type: T.Type) -> [T]? {
            var out: [T] = []
            out.reserveCapacity(values.count)
            for value in values {
                guard let narrowed = T(exactly: value) else { return nil }
                out.append(narrowed)
            }
            return out
        }
    }

    /// A cursor over one payload. Every method answers nil (or false) on anything outside the
    /// fast path's subset of JSON, without saying why: Codable will.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func skipSpace() {
            while at < bytes.count {
                switch bytes[at] {
                case 0x20, 0x09, 0x0A, 0x0D: at += 1
                default: return
                }
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        func peek() -> UInt8? { at < bytes.count ? bytes[at] : nil }

        /// The whole payload: one object, then only whitespace.
        mutating func object() -> Fields? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var fields = Fields()
            repeat {
                guard let key = string() else { return nil }
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard value(for: key, into: &fields) else { return nil }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
            skipSpace()
            return at == bytes.count ? fields : nil
        }

        /// A string of printable ASCII without escapes: its bounds inside `bytes`.
        mutating func string() -> (start: Int, end: Int)? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    at += 1
                    return (start, at - 1)
                }
                // Escapes, control characters and non-ASCII (whose UTF-8 Codable validates).
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            return nil
        }

        /// The message types the fast path reads, by their `type` string; nil for any other.
        func kind(of value: (start: Int, end: Int)) -> Kind? {
            if keyIs(value, "ping") { return .ping }
            if keyIs(value, "pong") { return .pong }
            if keyIs(value, "ok") { return .ok }
            if keyIs(value, "receiver_loss") { return .receiverLoss }
            if keyIs(value, "loss_report") { return .lossReport }
            if keyIs(value, "active_speakers") { return .activeSpeakers }
            return nil
        }

        /// The string at `key` (a key or a value) is `name`.
        func keyIs(_ key: (start: Int, end: Int), _ name: StaticString) -> Bool {
            guard key.end - key.start == name.utf8CodeUnitCount else { return false }
            let expected = name.utf8Start
            for i in 0 ..< name.utf8CodeUnitCount where bytes[key.start + i] != expected[i] { return false }
            return true
        }

        mutating func value(for key: (start: Int, end: Int), into fields: inout Fields) -> Bool {
            func mark(_ bit: UInt16) -> Bool {
                guard fields.present & bit == 0 else { return false }  // a key twice
                fields.present |= bit
                return true
            }
            if keyIs(key, "type") {
                guard mark(Fields.type), let value = string(), let kind = kind(of: value) else { return false }
                fields.kind = kind
            } else if keyIs(key, "id") {
                guard mark(Fields.id), let value = integer() else { return false }
                fields.id = value
            } else if keyIs(key, "t") {
                guard mark(Fields.t), let value = integer() else { return false }
                fields.t = value
            } else if keyIs(key, "request_id") {
                guard mark(Fields.requestID), let value = integer() else { return false }
                fields.requestID = value
            } else if keyIs(key, "receivers") {
                guard mark(Fields.receivers), let value = integer() else { return false }
                fields.receivers = value
            } else if keyIs(key, "lost_permille") {
                guard mark(Fields.lostPermille) else { return false }
                if peek() == UInt8(ascii: "[") {
                    guard let values = integers() else { return false }
                    fields.lostArray = values
                } else {
                    guard let value = integer() else { return false }
                    fields.lostScalar = value
                }
            } else if keyIs(key, "ssrcs") {
                guard mark(Fields.ssrcs), let values = integers() else { return false }
                fields.ssrcs = values
            } else if keyIs(key, "ids") {
                guard mark(Fields.ids), let values = integers() else { return false }
                fields.ids = values
            } else if keyIs(key, "levels") {
                guard mark(Fields.levels), let values = integers() else { return false }
                fields.levels = values
            } else {
                return false  // a key the fast path does not read: Codable decides
            }
            return true
        }

        /// `[` integers `]`, at most 64 of them (more is not a message of a call).
        mutating func integers() -> [Int64]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var values: [Int64] = []
            if take(UInt8(ascii: "]")) { return values }
            repeat {
                skipSpace()
                guard values.count < 64, let value = integer() else { return nil }
                values.append(value)
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) ? values : nil
        }

        /// An integer as JSON writes one (`-`? then `0` or a digit 1-9 and more digits), that
        /// fits an Int64 and is not `-0`; followed by what may follow a value.
        mutating func integer() -> Int64? {
            let negative = at < bytes.count && bytes[at] == UInt8(ascii: "-")
            if negative { at += 1 }
            let start = at
            var magnitude: UInt64 = 0
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[at] - UInt8(ascii: "0")))
                guard !o1, !o2 else { return nil }
                magnitude = sum
                at += 1
            }
            let digits = at - start
            guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
            // A fraction, an exponent or anything else glued on: not the fast path's.
            if at < bytes.count {
                switch bytes[at] {
                case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"): break
                default: return nil
                }
            }
            if negative {
                guard magnitude != 0, magnitude <= UInt64(Int64.max) + 1 else { return nil }
                return Int64(bitPattern: 0 &- magnitude)
            }
            return Int64(exactly: magnitude)
        }
    }

    // MARK: Encoding

    /// The bytes `JSONEncoder` writes for `message` (sorted keys, as `SignalMessage.encode`
    /// asks), or nil for a message the fast path does not write. The caller validates first.
    package static func encode(_ message: SignalMessage) -> [UInt8]? {
        var out = Writer()
        out.open()
        if let id = message.id { out.key("id"); out.integer(Int64(id)) }
        switch message.body {
        case let .ping(t), let .pong(t):
            out.key("t"); out.integer(t)
        case let .ok(requestID):
            out.key("request_id"); out.integer(Int64(requestID))
        case let .lossReport(report):
            out.key("lost_permille"); out.integers(report.lostPermille)
            out.key("ssrcs"); out.integers(report.ssrcs)
        case let .receiverLoss(loss):
            out.key("lost_permille"); out.integer(Int64(loss.lostPermille))
            out.key("receivers"); out.integer(Int64(loss.receivers))
        case let .activeSpeakers(speakers):
            out.key("ids"); out.integers(speakers.ids)
            out.key("levels"); out.integers(speakers.levels)
        default:
            return nil
        }
        // Every fast-path message's other keys sort before "type".
        out.key("type")
        out.string(message.body.typeName)
        out.bytes.append(UInt8(ascii: "}"))
        return out.bytes
    }

    private struct Writer {
        var bytes: [UInt8] = []
        var first = true

        mutating func open() {
            bytes.reserveCapacity(96)
            bytes.append(UInt8(ascii: "{"))
        }

        mutating func key(_ name: StaticString) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            bytes.append(UInt8(ascii: "\""))
            bytes.append(UInt8(ascii: ":"))
        }

        /// Only type names come here: ASCII letters and underscores, nothing to escape.
        mutating func string(_ text: String) {
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: text.utf8)
            bytes.append(UInt8(ascii: "\""))
        }

        mutating func integer(_ value: Int64) {
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            var magnitude = value.magnitude
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 19 digits at most, written backwards
            var count = 0
            withUnsafeMutableBytes(of: &digits) { buffer in
                repeat {
                    buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                    count += 1
                } while magnitude > 0
                for i in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[i]) }
            }
        }

        mutating func integers<T: FixedWidthInteger>(_ values: [T]) {
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                integer(Int64(value))
            }
            bytes.append(UInt8(ascii: "]"))
        }
    }
}
