import Foundation

/// Certificates made for a test with scripts/make-dev-certs (the openssl CLI, the installer's
/// recipe in docs/security.md), in a temporary directory removed with the object. Shared by the
/// test targets that need a CA and a server certificate (TLS signalling, wss to Janus, the
/// capture test), so there is one way tests make them.
public final class TestCertificates {
    public let directory: String

    public init() throws {
        directory = NSTemporaryDirectory() + "roomd-test-certs-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Issues `name`.pem/.key signed by CA `ca` (made on first use); returns the leaf's SPKI pin.
    /// Throws when make-dev-certs fails (openssl missing, a bad argument).
    @discardableResult
    public func issue(_ name: String = "server", ca: String = "ca", san: String = "DNS:localhost,IP:127.0.0.1", days: Int = 30) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: packageRoot + "/scripts/make-dev-certs")
        process.arguments = [directory, "--ca", ca, "--name", name, "--san", san, "--days", "\(days)"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "make-dev-certs \(name) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func path(_ file: String) -> String { directory + "/" + file }
}
