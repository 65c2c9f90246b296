import RoomJanus
import RoomSystem

/// `room.janus_url` values (issue 12): the setting's text as the configuration reader hands it
/// over. A URL that parses must be one the connection can use as it is — a port, a request
/// target that cannot split the request line, a host `HostPort` accepts — and must print to a
/// URL that parses to the same value (what roomd logs is what it uses).
func fuzzJanusURL(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    let url: JanusURL
    do { url = try JanusURL(parsing: text) } catch {
        fuzzCheck(error.key == "room.janus_url" && !error.message.isEmpty, "an error without its setting or reason: \(error)")
        note("janus-url refused: \(error)")
        return
    }
    note("janus-url: \(url)")
    fuzzCheck(url.port != 0, "port 0 accepted: \(text)")
    fuzzCheck(!url.host.isEmpty, "empty host accepted: \(text)")
    fuzzCheck(JanusURL.pathProblem(url.path) == nil, "a path the request line cannot carry: \(url.path)")
    fuzzCheck(url.host.contains(":") == (url.endpoint.numericAddress?.family == .ipv6), "host neither a name/IPv4 nor IPv6: \(url.host)")
    fuzzCheck(url.endpoint.numericAddress != nil || HostPort.isHostName(url.host), "host neither numeric nor a name: \(url.host)")
    fuzzCheck((try? JanusURL(parsing: url.description)) == url, "printed as \(url.description), which does not parse back")
}
