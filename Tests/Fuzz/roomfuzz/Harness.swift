import Glibc
import RoomJSON

/// The program: libFuzzer's driver (linked by `-sanitize=fuzzer`), given our entry point.
///
/// Why not libFuzzer's own `main`: SwiftPM links an executable target with
/// `--defsym main=roomfuzz_main` (so tests could link its code), which needs a Swift entry
/// point; `LLVMFuzzerRunDriver` is libFuzzer's documented way to be called from one. The
/// command line is libFuzzer's (`-max_total_time=`, corpus directories, crash files).
@main
enum RoomFuzz {
    static func main() {
        _ = selectedTarget
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput))
    }
}

/// libFuzzer's C entry point, declared here rather than in a C header: a header would need a C
/// target in Package.swift for this one declaration. Calling it with Swift's convention is
/// sound for these arguments (three pointers in, a 32-bit int out go in the same registers as
/// C's on x86_64 and arm64); the callback itself is `@convention(c)`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Called once per input; which parser the input goes to is chosen by `ROOMFUZZ_TARGET`, so
/// one build serves every target (on two shared cores a build per target would cost more than
/// the fuzzing does).
///
/// A harness traps (`fuzzCheck`) when an invariant a caller relies on breaks; a thrown parse
/// error is the expected answer to garbage and is ignored.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data.map(UnsafeRawPointer.init), count: data == nil ? 0 : size)
    selectedTarget.run(bytes)
    return 0
}

/// Read once, before the first input (`main` touches it, so a wrong name stops the run at once
/// instead of at the first input).
let selectedTarget: FuzzTarget = {
    let name = getenv("ROOMFUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: " ")
        var message = "roomfuzz: set ROOMFUZZ_TARGET to one of: \(names)\n"
        message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        exit(2)
    }
    return target
}()

/// The fuzz targets; the names are those of `scripts/fuzz` and of `Tests/Fuzz/corpus/<name>/`.
enum FuzzTarget: String, CaseIterable {
    /// roomctl → roomd request lines (StrictJSON + request validation) and roomd → roomctl
    /// response/event lines as roomctl reads them.
    case control
    /// Signalling: TCP byte stream → frames → messages, both directions.
    case signal
    /// Join tokens (HS256 JWT): header and claims parsing behind a valid signature, the placement
    /// claims of verified claims, and raw tokens (also as an appliance first reads them).
    case token
    /// RTP datagrams (RFC 3550, RFC 6464 audio level) as roomd and roomserver parse them, and
    /// the media binding datagram.
    case rtp
    /// SRTP (AEAD_AES_128_GCM through libsrtp2 and the OpenSSL cipher): unprotect of arbitrary
    /// datagrams, and protect → unprotect round trips of whatever parses as RTP.
    case srtp
    /// The jitter buffer driven by a fuzzed sequence of inserts and playout decisions.
    case jitter
    /// roomd.conf (INI reader + appliance configuration).
    case roomdconf = "roomd-conf"
    /// roomserver.conf.
    case serverconf = "roomserver-conf"
    /// board.conf (board profiles).
    case board
    /// Session descriptions and ICE candidates (the WebRTC path's signalling, issue 12).
    case sdp
    /// `room.janus_url` (`JanusURL`): where the appliance finds Janus's WebSocket API.
    case janusurl = "janus-url"
    /// RTCP compound packets and SRTCP from a WebRTC peer (issue 12), and the receive
    /// statistics and reports of `RTCPSession`.
    case rtcp
    /// Janus's JSON messages (`JanusMessage`) as a `JanusAudioBridgeSession` takes them, in each
    /// state of a join.
    case janus
    /// The WebSocket to Janus (`WebSocketClient`): the server's upgrade response, then frames.
    case websocket
    /// STUN datagrams on the WebRTC media socket: `STUNMessage` and the `ICEAgent`'s checks.
    case stun

    /// SIP datagrams at the user agent's socket: osip's parser and RoomSIP's reading of the
    /// registrar's answers (issue 29).
    case sip
    /// What a call reads from the far end besides SIP: the offer/answer (`CallAudioNegotiation`,
    /// SDES included), RFC 4733 events, G.722/G.711 payloads, RTP at a `CallMediaSession`.
    case call

    func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .control: fuzzControl(bytes)
        case .signal: fuzzSignal(bytes)
        case .token: fuzzToken(bytes)
        case .rtp: fuzzRTP(bytes)
        case .srtp: fuzzSRTP(bytes)
        case .jitter: fuzzJitter(bytes)
        case .roomdconf: fuzzRoomdConf(bytes)
        case .serverconf: fuzzServerConf(bytes)
        case .board: fuzzBoard(bytes)
        case .sdp: fuzzSDP(bytes)
        case .janusurl: fuzzJanusURL(bytes)
        case .rtcp: fuzzRTCP(bytes)
        case .janus: fuzzJanus(bytes)
        case .websocket: fuzzWebSocket(bytes)
        case .stun: fuzzSTUN(bytes)
        case .sip: fuzzSIP(bytes)
        case .call: fuzzCall(bytes)
        }
    }
}

/// A broken invariant: a crash the fuzzer records, with the reason in its log.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #fileID, line: UInt = #line) {
    if !condition() { fatalError(message(), file: file, line: line) }
}

/// `ROOMFUZZ_VERBOSE=1`: each target says what its parser answered, on stderr. For checking
/// that seeds are valid inputs and for reading a crash's input (`scripts/fuzz TARGET FILE`).
let verbose = getenv("ROOMFUZZ_VERBOSE") != nil

func note(_ message: @autoclosure () -> String) {
    guard verbose else { return }
    var line = "roomfuzz: " + message() + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
