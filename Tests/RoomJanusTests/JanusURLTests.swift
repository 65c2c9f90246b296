import RoomJanus
import RoomSystem
import XCTest

final class JanusURLTests: XCTestCase {
    func parse(_ text: String) throws -> JanusURL { try JanusURL(parsing: text) }

    /// The message a wrong value gets, or "parsed" when it is accepted (which fails the test).
    func problem(_ text: String, key: String = "room.janus_url") -> String {
        do {
            let url = try JanusURL(parsing: text, key: key)
            return "parsed as \(url)"
        } catch {
            return error.description
        }
    }

    func testTheIssuesExamplesAndJanussDefaultPorts() throws {
        let plain = try parse("ws://janus.example:8188/")
        XCTAssertEqual(plain, JanusURL(scheme: .ws, host: "janus.example", port: 8188, path: "/"))
        XCTAssertFalse(plain.isSecure)
        let secure = try parse("wss://10.0.0.5:8989/janus")
        XCTAssertEqual(secure, JanusURL(scheme: .wss, host: "10.0.0.5", port: 8989, path: "/janus"))
        XCTAssertTrue(secure.isSecure)
        XCTAssertEqual(secure.endpoint, HostPort(host: "10.0.0.5", port: 8989))
        XCTAssertNotNil(secure.endpoint.numericAddress, "a numeric host needs no lookup")

        XCTAssertEqual(try parse("ws://janus.example").port, 8188, "Janus's ws_port")
        XCTAssertEqual(try parse("wss://janus.example").port, 8989, "Janus's wss_port")
        XCTAssertEqual(try parse("wss://janus.example").path, "/")
        XCTAssertEqual(try parse("wss://janus.example:443/janus").port, 443)
        XCTAssertEqual(try parse("WSS://Janus.Example/").scheme, .wss, "schemes are case-insensitive (RFC 3986 §3.1)")
        XCTAssertEqual(try parse("ws://janus.example/janus?room=4.12").path, "/janus?room=4.12", "a query is part of the request target")
        XCTAssertEqual(try parse("ws://janus.example?x=1").path, "/?x=1")
    }

    func testIPv6GoesInBrackets() throws {
        let url = try parse("wss://[2001:db8::5]:8990/janus")
        XCTAssertEqual(url.host, "2001:db8::5", "kept without brackets, as HostPort keeps it")
        XCTAssertEqual(url.port, 8990)
        XCTAssertEqual(url.hostHeader, "[2001:db8::5]:8990")
        XCTAssertEqual(url.description, "wss://[2001:db8::5]:8990/janus")
        XCTAssertEqual(try parse("ws://[::1]").port, 8188)
        XCTAssertEqual(try parse("ws://[::1]").endpoint.numericAddress?.family, .ipv6)
        XCTAssertEqual(problem("ws://::1/"), "room.janus_url: an IPv6 address goes in brackets (wss://[2001:db8::1]:8989/): ::1")
        XCTAssertEqual(problem("ws://2001:db8::5:8188/"), "room.janus_url: an IPv6 address goes in brackets (wss://[2001:db8::1]:8989/): 2001:db8::5:8188")
        XCTAssertEqual(problem("ws://[::1/"), "room.janus_url: IPv6 address without its closing ]: ws://[::1/")
        XCTAssertEqual(problem("ws://[10.0.0.5]/"), "room.janus_url: not an IPv6 address between the brackets: 10.0.0.5")
        XCTAssertEqual(problem("ws://[]/"), "room.janus_url: not an IPv6 address between the brackets: (empty)")
        XCTAssertEqual(problem("ws://[::1]8188/"), "room.janus_url: expected :port after ]: ws://[::1]8188/")
    }

    func testHostHeaderLeavesOutOnlyHTTPsDefaultPort() throws {
        XCTAssertEqual(try parse("ws://janus.example/").hostHeader, "janus.example:8188", "Janus's default is not HTTP's")
        XCTAssertEqual(try parse("ws://janus.example:80/").hostHeader, "janus.example")
        XCTAssertEqual(try parse("wss://janus.example:443/").hostHeader, "janus.example")
        XCTAssertEqual(try parse("wss://janus.example:80/").hostHeader, "janus.example:80")
        XCTAssertEqual(try parse("ws://10.0.0.5:8188/x").description, "ws://10.0.0.5:8188/x")
        XCTAssertEqual(try parse("ws://10.0.0.5").description, "ws://10.0.0.5:8188/")
    }

    func testWrongValuesAreRefusedWithTheReason() {
        XCTAssertEqual(problem("http://janus.example:8088/janus"), "room.janus_url: scheme must be ws or wss: http")
        XCTAssertEqual(problem("https://janus.example/"), "room.janus_url: scheme must be ws or wss: https")
        XCTAssertEqual(problem("://janus.example/"), "room.janus_url: scheme must be ws or wss: (none)")
        XCTAssertEqual(problem("janus.example:8188"),
                       "room.janus_url: expected ws://host[:port][/path] or wss://host[:port][/path]: janus.example:8188")
        XCTAssertEqual(problem(""), "room.janus_url: empty; expected ws://host[:port][/path] or wss://host[:port][/path]")
        XCTAssertEqual(problem("ws://"), "room.janus_url: host missing: ws://")
        XCTAssertEqual(problem("ws:///janus"), "room.janus_url: host missing: ws:///janus")
        XCTAssertEqual(problem("ws://:8188/"), "room.janus_url: host missing: ws://:8188/")
        XCTAssertEqual(problem("ws://janus.example:0/"), "room.janus_url: port must be 1-65535: 0")
        XCTAssertEqual(problem("ws://janus.example:65536/"), "room.janus_url: port must be 1-65535: 65536")
        XCTAssertEqual(problem("ws://janus.example:99999999999999999999/"), "room.janus_url: port must be 1-65535: 99999999999999999999")
        XCTAssertEqual(problem("ws://janus.example:+80/"), "room.janus_url: port must be 1-65535: +80")
        XCTAssertEqual(problem("ws://janus.example:8188x/"), "room.janus_url: port must be 1-65535: 8188x")
        XCTAssertEqual(problem("ws://janus.example:/"),
                       "room.janus_url: port missing after ':' (leave out the ':' for Janus's default, 8188): ws://janus.example:/")
        XCTAssertEqual(problem("ws://janus_server/"), "room.janus_url: host is neither a host name nor an IPv4 address: janus_server")
        XCTAssertEqual(problem("ws://10.0.0.999/"), "room.janus_url: host is neither a host name nor an IPv4 address: 10.0.0.999")
        XCTAssertEqual(problem("ws://admin:secret@janus.example/"), "room.janus_url: user information (user@) is not supported: ws://admin:secret@janus.example/")
        XCTAssertEqual(problem("ws://janus.example/#room"),
                       "room.janus_url: a fragment (#…) has no meaning in a WebSocket URL (RFC 6455 §3): ws://janus.example/#room")
        XCTAssertEqual(problem("ws://janus.example/ janus"),
                       "room.janus_url: only printable ASCII without spaces is allowed (percent-encode the rest): \"ws://janus.example/ janus\"")
        XCTAssertEqual(problem(" ws://janus.example/"),
                       "room.janus_url: only printable ASCII without spaces is allowed (percent-encode the rest): \" ws://janus.example/\"")
        XCTAssertEqual(problem("ws://janus.example/\r\nX: y"),
                       "room.janus_url: only printable ASCII without spaces is allowed (percent-encode the rest): \"ws://janus.example/\\u{d}\\u{a}X: y\"")
        XCTAssertEqual(problem("ws://jänus.example/"),
                       "room.janus_url: only printable ASCII without spaces is allowed (percent-encode the rest): \"ws://jänus.example/\"")
        XCTAssertEqual(problem("ws://" + String(repeating: "a", count: 3000)), "room.janus_url: longer than 2048 bytes")
        XCTAssertEqual(problem("http://x/", key: "--janus"), "--janus: scheme must be ws or wss: http", "the caller names the setting")
    }

    func testRequestTargetsThatCouldSplitTheRequestLineAreRefused() {
        XCTAssertNil(JanusURL.pathProblem("/"))
        XCTAssertNil(JanusURL.pathProblem("/janus?x=%20"))
        XCTAssertEqual(JanusURL.pathProblem("janus"), "path must start with /: \"janus\"")
        XCTAssertEqual(JanusURL.pathProblem(""), "path must start with /: \"\"")
        XCTAssertEqual(JanusURL.pathProblem("/a b"), "path may hold only printable ASCII without spaces (percent-encode the rest): \"/a b\"")
        XCTAssertEqual(JanusURL.pathProblem("/a\r\nHost: evil"),
                       "path may hold only printable ASCII without spaces (percent-encode the rest): \"/a\\u{d}\\u{a}Host: evil\"")
    }

    /// Every prefix and every one-byte change of valid URLs parses or is refused — no trap —
    /// and whatever parses prints back to a URL that parses to the same value.
    func testPrefixesAndMutationsParseOrThrowAndRoundTrip() {
        let samples = ["wss://[2001:db8::5]:8990/janus?x=1", "ws://janus.example:8188/", "wss://10.0.0.5:8989/janus"]
        let alphabet = Array("[]:/?#@.%x09 \u{0}\r".unicodeScalars)
        var parsed = 0
        for sample in samples {
            let scalars = Array(sample.unicodeScalars)
            var variants: [String] = []
            for n in 0 ... scalars.count { variants.append(String(String.UnicodeScalarView(scalars[0 ..< n]))) }
            for i in scalars.indices {
                for c in alphabet {
                    var s = scalars
                    s[i] = c
                    variants.append(String(String.UnicodeScalarView(s)))
                }
            }
            for text in variants {
                guard let url = try? JanusURL(parsing: text) else { continue }
                parsed += 1
                XCTAssertEqual(try? JanusURL(parsing: url.description), url, "\(text) → \(url)")
                XCTAssertNil(JanusURL.pathProblem(url.path), text)
            }
        }
        XCTAssertGreaterThan(parsed, 20)
    }
}
