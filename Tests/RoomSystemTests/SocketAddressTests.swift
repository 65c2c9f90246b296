import RoomSystem
import XCTest

final class SocketAddressTests: XCTestCase {
    func testParsingAndDescription() throws {
        let v4 = try SocketAddress(parsing: "192.0.2.7:4000")
        XCTAssertEqual(v4.family, .ipv4)
        XCTAssertEqual(v4.port, 4000)
        XCTAssertEqual(v4.host, "192.0.2.7")
        XCTAssertEqual(v4.description, "192.0.2.7:4000")
        let v6 = try SocketAddress(parsing: "[2001:db8::1]:443")
        XCTAssertEqual(v6.family, .ipv6)
        XCTAssertEqual(v6.description, "[2001:db8::1]:443")
        XCTAssertEqual(try SocketAddress(parsing: v6.description), v6)
        XCTAssertEqual(try SocketAddress(parsing: "[::]:0").port, 0)
    }

    func testBadAddressesNameTheProblem() {
        for (text, why) in [("2001:db8::1:80", "[address]:port"), ("example.com:80", "numeric"),
                            ("1.2.3.4:70000", "port"), ("1.2.3.4", "host:port"), ("[::1:80", "]"),
                            ("[::1]80", ":port"), ("1.2.3:80", "numeric")] {
            XCTAssertThrowsError(try SocketAddress(parsing: text), text) { error in
                XCTAssertTrue("\(error)".contains(text) && "\(error)".contains(why), "\(error)")
            }
        }
        XCTAssertThrowsError(try SocketAddress(unixPath: "/" + String(repeating: "x", count: 200)))
    }

    func testEqualityAndHashing() throws {
        let a = try SocketAddress(parsing: "127.0.0.1:5000")
        XCTAssertEqual(a, .ipv4Loopback(port: 5000))
        XCTAssertNotEqual(a, .ipv4Loopback(port: 5001))
        XCTAssertNotEqual(a, try SocketAddress(parsing: "127.0.0.2:5000"))
        XCTAssertNotEqual(SocketAddress.ipv6Loopback(port: 5000), try SocketAddress(parsing: "[::2]:5000"))
        XCTAssertEqual(SocketAddress.ipv6Loopback(port: 5000), try SocketAddress(parsing: "[::1]:5000"))
        XCTAssertNotEqual(a, .ipv6Loopback(port: 5000))
        let set: Set<SocketAddress> = [a, .ipv4Loopback(port: 5000), .ipv6Loopback(port: 5000), try SocketAddress(unixPath: "/run/x")]
        XCTAssertEqual(set.count, 3)
        XCTAssertEqual(try SocketAddress(unixPath: "/run/roomd/control").description, "unix:/run/roomd/control")
        XCTAssertEqual(try SocketAddress(unixPath: "@abstract").host, "@abstract")
        XCTAssertNotEqual(try SocketAddress(unixPath: "@x"), try SocketAddress(unixPath: "/x"))
    }
}
