import RoomSystem
import XCTest

/// `HostPort`: what `room.server` and `--server` accept, and the lookup behind a name.
final class HostPortTests: XCTestCase {
    func testParsesNamesAndNumericAddresses() throws {
        let name = try HostPort(parsing: "rooms.example.org:7700")
        XCTAssertEqual(name.host, "rooms.example.org")
        XCTAssertEqual(name.port, 7700)
        XCTAssertNil(name.numericAddress, "a name is looked up when connecting")
        let v4 = try HostPort(parsing: "192.0.2.10:7700")
        XCTAssertEqual(v4.numericAddress, try SocketAddress(parsing: "192.0.2.10:7700"))
        let v6 = try HostPort(parsing: "[::1]:7700")
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.description, "[::1]:7700")
        XCTAssertEqual(try v6.resolve(), [.ipv6Loopback(port: 7700)], "numeric: no lookup")
        for bad in ["rooms.example.org", "rooms.example.org:0", "rooms_example:7700", "-a.b:1", "1.2.3.999:1", "a..b:1", ":7700"] {
            XCTAssertThrowsError(try HostPort(parsing: bad), bad)
        }
    }

    func testResolvesLocalhostAndReportsAnUnknownName() throws {
        let addresses = try HostPort(host: "localhost", port: 7700).resolve()
        XCTAssertFalse(addresses.isEmpty)
        XCTAssertTrue(addresses.allSatisfy { $0.port == 7700 && ($0.host == "127.0.0.1" || $0.host == "::1") }, "\(addresses)")
        XCTAssertThrowsError(try HostPort(host: "no-such-host.invalid", port: 1).resolve()) {
            XCTAssertTrue("\($0)".contains("cannot resolve no-such-host.invalid"), "\($0)")
        }
    }
}
