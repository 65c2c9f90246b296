import Foundation
import XCTest

/// TLS between the real roomd and roomserver processes (issue 11): a certificate that fails
/// the appliance's checks refuses the room, and `roomctl status` tells the installer why.
final class SignallingTLSProcessTests: ProcessTestCase {
    /// A TLS listener without its certificate is refused at start with the key to fix; a
    /// certificate file that is not there names the file. Neither starts serving.
    func testRoomserverRefusesToStartWithoutItsCertificate() throws {
        let server = try executable("roomserver")
        let dir = SimCard.scratch("tls-no-cert")
        let example = try String(contentsOfFile: SimCard.repoRoot + "/docs/roomserver.conf.example", encoding: .utf8)
        let noTLS = example.replacingOccurrences(of: "cert_file = tls/server.pem\n", with: "")
            .replacingOccurrences(of: "key_file = tls/server.key\n", with: "")
        try noTLS.write(toFile: dir + "/a.conf", atomically: true, encoding: .utf8)
        let a = try runSeparated(server, ["--config", dir + "/a.conf"])
        XCTAssertEqual(a.status, 78, a.stderr)
        XCTAssertTrue(a.stderr.contains("server.listen: is TLS and needs [tls] cert_file and key_file"), a.stderr)

        // The example as shipped, with no certificate made next to it.
        try example.replacingOccurrences(of: "127.0.0.1:7700", with: "127.0.0.1:0")
            .replacingOccurrences(of: "127.0.0.1:7701", with: "127.0.0.1:0")
            .write(toFile: dir + "/b.conf", atomically: true, encoding: .utf8)
        let b = try runSeparated(server, ["--config", dir + "/b.conf"])
        XCTAssertEqual(b.status, 71, b.stderr)
        XCTAssertTrue(b.stderr.contains("certificate file \(dir)/tls/server.pem: No such file or directory"), b.stderr)
    }

    func testWrongCAIsRefusedAndRoomctlShowsWhy() throws {
        let server = try executable("roomserver"), roomd = try executable("roomd"), roomctl = try executable("roomctl")
        let dir = SimCard.scratch("tls-wrong-ca")
        let (tcp, _, _) = try startServer(server, dir: dir)
        // Another deployment's CA: the server's certificate does not chain to it.
        let make = Process()
        make.executableURL = URL(fileURLWithPath: SimCard.repoRoot + "/scripts/make-dev-certs")
        make.arguments = [dir + "/other"]
        make.standardOutput = FileHandle.nullDevice
        try make.run()
        make.waitUntilExit()
        let token = try mintToken(server, config: dir + "/server.conf", room: "tls", user: "a")
        try launch(roomd, ["--board", SimCard.repoRoot + "/board/sim", "--server", "127.0.0.1:\(tcp)", "--token", token,
                           "--tls-ca-file", dir + "/other/ca.pem",
                           "--role", "audience", "--duration", "20", "--stats-interval", "0", "--config", "none",
                           "--state-dir", "none", "--control-socket", dir + "/a.sock"],
                   env: ["ROOMSIM_CONFIG": try E2E.writeRoom(dir, "a")], log: dir + "/a.log")
        waitForSocket(dir + "/a.sock")
        var status: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let r = try runSeparated(roomctl, ["--socket", dir + "/a.sock", "--json", "status"])
            let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any]
            status = (object?["result"] as? [String: Any]) ?? object ?? [:]
            if status["connection"] as? String == "failed" { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertEqual(status["connection"] as? String, "failed", "\(status)")
        let reason = status["reason"] as? String ?? ""
        XCTAssertTrue(reason.contains("certificate verify failed: unable to get local issuer certificate (wrong CA?)"), reason)
        // The human-readable status says it too.
        let text = try runSeparated(roomctl, ["--socket", dir + "/a.sock", "status"])
        XCTAssertTrue(text.stdout.contains("wrong CA?"), text.stdout)
        let serverLog = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
        XCTAssertFalse(serverLog.contains("joined room"), "nobody joined: \(serverLog)")
    }
}
