/// Numbers as text for logs, status lines, JSON and error messages. RoomBase has no
/// Foundation, and `String(describing:)` prints "-91.99999999" or "1e+20" where people expect
/// "-92.0".

/// `x` with exactly `decimals` digits after the point ("-92.0", "41.30"); "null" for NaN and
/// infinities, so a JSON line stays valid. Rounds half away from zero; "-0.0" prints as "0.0".
public func fixedDecimalText(_ x: Double, _ decimals: Int) -> String {
    guard x.isFinite else { return "null" }
    var scale = 1
    for _ in 0..<max(0, decimals) { scale *= 10 }
    let scaled = (x.magnitude * Double(scale)).rounded()
    guard scaled < 1e15 else { return "\(x)" }
    let units = Int(scaled)
    var text = x < 0 && units != 0 ? "-" : ""
    text += String(units / scale)
    if decimals > 0 {
        let fraction = String(units % scale)
        text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
    return text
}

/// The shortest text that reads back as `x`: "-6" for a whole number, "-6.5" otherwise.
public func shortestNumberText(_ x: Double) -> String {
    x == x.rounded() && x.magnitude < 1e15 ? String(Int(x)) : "\(x)"
}

/// `v` in hex, zero-padded to `width` digits ("0041", "00000001").
public func hexDigits(_ v: UInt32, width: Int, uppercase: Bool = true) -> String {
    let digits = String(v, radix: 16, uppercase: uppercase)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

/// Bytes as two hex digits each, joined by `separator` ("5d41402a…", "52 49 46 46").
public func hexBytes(_ bytes: some Sequence<UInt8>, separator: String = "", uppercase: Bool = false) -> String {
    bytes.map { hexDigits(UInt32($0), width: 2, uppercase: uppercase) }.joined(separator: separator)
}
