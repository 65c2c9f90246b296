import CRoomTLS
import RoomBase
import RoomSystem

/// How an appliance decides that the signalling server is the real one (docs/security.md,
/// "Signalling (TLS)"). With `caFile` the certificate must chain to one of its CAs; with
/// `pins` the server's public key must be one of them; with both, both must hold; with
/// neither, the system's trust store (a publicly issued certificate). The host name is
/// always checked.
public struct TLSClientSettings: Sendable, Equatable {
    /// PEM file of the CA certificate(s) to trust instead of the system's store.
    public var caFile: String?
    /// Accepted SPKI pins, "sha256/<base64 of SHA-256 of the DER SubjectPublicKeyInfo>".
    public var pins: [String]
    /// The name the certificate must carry; nil: the host name (or address) connected to.
    public var serverName: String?

    public init(caFile: String? = nil, pins: [String] = [], serverName: String? = nil) {
        self.caFile = caFile
        self.pins = pins
        self.serverName = serverName
    }

}

/// The appliance's side: one per session configuration (the CA file is read when it is made).
/// Its connections may run on any loops (OpenSSL contexts are thread-safe; the ciphertext
/// passes through each loop's `scratch`).
public final class TLSClientContext {
    let raw: OpaquePointer
    public let settings: TLSClientSettings

    public init(settings: TLSClientSettings) throws(SystemError) {
        for pin in settings.pins {
            if let problem = SPKIPin.problem(pin) { throw SystemError("TLS: \(problem)") }
        }
        // OpenSSL says "system lib" for a missing file; the errno says what is wrong.
        if let ca = settings.caFile { try Files.checkReadable(ca, what: "TLS: CA file") }
        var error = [CChar](repeating: 0, count: 512)
        let context: OpaquePointer? = {
            if let ca = settings.caFile {
                return roomtls_client_context(ca, 0, &error, error.count)
            }
            return roomtls_client_context(nil, settings.pins.isEmpty ? 1 : 0, &error, error.count)
        }()
        guard let context else { throw SystemError("TLS: \(cText(error))") }
        raw = context
        self.settings = settings
    }

    deinit { roomtls_context_free(raw) }


    /// Pin-only: no CA file, so the chain of trust cannot be checked; the pin replaces it.
    var acceptsUntrustedChain: Bool { settings.caFile == nil && !settings.pins.isEmpty }
}

/// The server's side: its certificate chain and key, read when it is made. `RoomServer` makes
/// a new one on reload; connections already open keep theirs. Its connections may run on any
/// loops (see `TLSClientContext`).
public final class TLSServerContext {
    let raw: OpaquePointer
    public let certificateChainFile: String
    public let keyFile: String
    /// The SPKI pin of the leaf certificate (what appliances may pin).
    public let pin: String
    /// The chain file's text as loaded: a reload tells a renewal from the same file.
    public let chainText: String

    public init(certificateChainFile: String, keyFile: String) throws(SystemError) {
        try Files.checkReadable(certificateChainFile, what: "TLS: certificate file")
        try Files.checkReadable(keyFile, what: "TLS: key file")
        var error = [CChar](repeating: 0, count: 512)
        guard let context = roomtls_server_context(certificateChainFile, keyFile, &error, error.count) else {
            throw SystemError("TLS: \(cText(error))")
        }
        raw = context
        self.certificateChainFile = certificateChainFile
        self.keyFile = keyFile
        pin = (try? TLSCertificates.spkiPin(ofFile: certificateChainFile)) ?? "?"
        chainText = (try? Files.readText(certificateChainFile)) ?? ""
    }

    deinit { roomtls_context_free(raw) }
}

public enum TLSCertificates {
    /// The SPKI pin of the first certificate of a PEM file ("sha256/…"), for roomd.conf's
    /// `tls_pin` (roomserver --print-spki-pin).
    public static func spkiPin(ofFile path: String) throws(SystemError) -> String {
        var pin = [CChar](repeating: 0, count: 128)
        var error = [CChar](repeating: 0, count: 512)
        guard roomtls_file_spki_pin(path, &pin, pin.count, &error, error.count) == 1 else {
            throw SystemError(cText(error))
        }
        return cText(pin)
    }
}

/// A NUL-terminated C string in a buffer, as a String.
func cText(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}
