// swift-tools-version:6.0
// roomd: the daemon of a conference-room audio appliance. Linux only; no Swift package
// dependencies — only the toolchain and Debian's C libraries (see README.md).
import PackageDescription

// How roomd is linked in release builds (what boards install), for memory: issue 9 asked for
// roomd ≤ 12 MB resident in a call, and most of what it held was its own file's pages.
// docs/benchmarks.md ("Where roomd's memory goes in a call") has the accounting and commands.
// - lld instead of gold, for the two options below (the toolchain ships it).
// - `-z pack-relative-relocs` (DT_RELR, glibc ≥ 2.36): the ~38,000 relative relocations the
//   static Swift runtime's metadata needs take 7 KB instead of 890 KB, all of which the dynamic
//   loader read (and so kept resident) at start-up.
// - `--symbol-ordering-file`: the functions roomd runs (Sources/roomd/link-order.txt, made by
//   scripts/link-order) are placed together at the start of .text, so the 64 KB the kernel maps
//   around each code fault holds code that runs instead of neighbours that never do. Names the
//   code no longer has are ignored (no warning); new functions land after the listed ones.
// - `--no-export-dynamic`: the static runtime's link arguments export every public symbol of
//   roomd's modules (~5,500) to the dynamic symbol table, which nothing looks up (roomd loads
//   only C plugins, and dlsym finds the alloc probe's symbols in the probe); the tables were
//   0.4 MB resident. (Crash addresses are symbolized from the binary's .symtab or debug symbols.)
// - `-z now`: every library function roomd calls is bound at start-up. Bound lazily, the first
//   call of one after start-up's pages were given back (ResidentMemory) made the dynamic loader
//   look it up in every library's hash table, mapping 64 KB of each again (~0.7 MB in a call).
// - `-z max-page-size=65536`: segments aligned to 64 KB, so the kernel loads roomd at a 64 KB
//   boundary and its 64 KB fault-around windows cover the same bytes of the file every run (the
//   hot-first order then starts at a window's start). At 4 KB the load address moved the windows:
//   roomd's resident code was 3.2-3.8 MB from run to run, now 3.5 MB every run. The file does not
//   grow (lld keeps offsets congruent without padding).
// - `--script=Sources/roomd/rodata.ld`: the read-only constants get a read-only output section
//   of their own. Swift emits some writable sections named `.rodata`, and lld gave the whole
//   1.8 MB `.rodata` their write permission, so it sat in a writable segment that start-up's
//   release must skip (dropping a written page would lose data); now only those 64 KB do.
let roomdReleaseLink: [LinkerSetting] = [
    .unsafeFlags([
        "-use-ld=lld",
        "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/roomd/link-order.txt",
        "-Xlinker", "--no-warn-symbol-ordering",
        "-Xlinker", "--no-export-dynamic",
        "-Xlinker", "-z", "-Xlinker", "now",
        "-Xlinker", "-z", "-Xlinker", "max-page-size=65536",
        "-Xlinker", "--script=\(Context.packageDirectory)/Sources/roomd/rodata.ld",
    ], .when(configuration: .release)),
]

let package = Package(
    name: "roomd",
    products: [
        .executable(name: "roomd", targets: ["roomd"]),
        .executable(name: "roomctl", targets: ["roomctl"]),
        .executable(name: "roomserver", targets: ["roomserver"]),
        // The simulated sound card: alsa-lib loads it by this exact file name
        // (libasound_module_pcm_roomsim.so) from ALSA_PLUGIN_DIR.
        .library(name: "asound_module_pcm_roomsim", type: .dynamic, targets: ["RoomSimCard"]),
        // Heap-allocation counter, LD_PRELOADed by scripts/bench to prove the audio loop
        // allocates nothing. Never linked into roomd itself.
        .library(name: "roomallocprobe", type: .dynamic, targets: ["RoomAllocProbe"]),
        .executable(name: "roomsim-scene", targets: ["roomsim-scene"]),
    ],
    targets: [
        // One target per C library.
        .systemLibrary(name: "CAlsa", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CGpiod", pkgConfig: "libgpiod", providers: [.apt(["libgpiod-dev"])]),
        // OpenSSL 3 for signalling over TLS 1.3. Only CRoomTLS includes it: OpenSSL's API is
        // macros, variadic ctrl calls and C callbacks, which CRoomTLS turns into plain functions.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "CRoomTLS", dependencies: ["COpenSSL"]),
        // DTLS 1.2 + use_srtp on OpenSSL for the WebRTC path (issue 12), plain functions like CRoomTLS.
        .target(name: "CRoomDTLS", dependencies: ["COpenSSL"]),
        // SRTP (media encryption, docs/security.md); shim.h builds the one policy used.
        .systemLibrary(name: "CSRTP", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        // OpenSSL's libcrypto: the AES-GCM libsrtp2 runs on (CSRTPOpenSSLCipher), and the tests'
        // SRTP reference decryptor.
        .systemLibrary(name: "CLibcrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libsrtp2's AES-128-GCM replaced by one on OpenSSL EVP that allocates nothing per packet
        // (Debian's libsrtp2 is built on NSS, which does): docs/security.md.
        .target(name: "CSRTPOpenSSLCipher", dependencies: ["CSRTP", "CLibcrypto"]),
        // Headers and libraries come from pkg-config, never from fixed /usr/include paths, so a
        // cross build against an arm64 sysroot (PKG_CONFIG_SYSROOT_DIR) finds the right ones.
        // COpus: libopus's ctl calls are variadic, so shim.h wraps each in a static inline function.
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CWebRTCAudioProcessing", pkgConfig: "webrtc-audio-processing",
                       providers: [.apt(["libwebrtc-audio-processing-dev"])]),
        // libosip2 (SIP parser and transactions, no I/O) for RoomSIP: docs/calls.md, "Why libosip2".
        .systemLibrary(name: "COSIP", pkgConfig: "libosip2", providers: [.apt(["libosip2-dev"])]),
        // The one real FFT of the C code (header-only): the canceller's and the simulated room's.
        .target(name: "CRoomFFT"),
        .target(
            name: "CCaptureChain",
            dependencies: ["CWebRTCAudioProcessing", "CRoomFFT"],
            cxxSettings: [
                // SwiftPM passes pkg-config's -I but drops its -D flags: define them here.
                .define("WEBRTC_POSIX"),
                .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD"),
                // roomd's DSP runs on the audio thread in every build: unoptimised (a debug build's
                // -O0) the array's beam, locator and dereverberation pushed the debug roomd the
                // tests run into xruns during self-tests on this 2-core VM.
                .unsafeFlags(["-O2"], .when(configuration: .debug)),
            ],
            linkerSettings: [.linkedLibrary("stdc++")]
        ),
        // The simulated room (files, echo path, image-source scenes, faults): C with no ALSA in
        // it, so the plugin and the scene tool share it.
        .target(name: "RoomSimRoom", dependencies: ["CRoomFFT"], linkerSettings: [.linkedLibrary("m")]),
        // roomsim-scene: renders a scene file and writes its impulse responses (docs/sim-card.md).
        .executableTarget(name: "roomsim-scene", dependencies: ["RoomSimRoom"]),
        .target(
            name: "RoomSimCard",
            dependencies: ["RoomSimRoom"],
            publicHeadersPath: ".",
            cSettings: [.define("PIC")],
            linkerSettings: [
                .linkedLibrary("asound"), .linkedLibrary("m"),
                // The plugin is C and needs no Swift runtime, but SwiftPM links every library
                // product with swiftc, which adds swiftrt.o (it registers Swift metadata with the
                // runtime) and -lswiftCore: alsa-lib then loaded the toolchain's libswiftCore.so
                // into roomd (a second runtime beside roomd's static one, 2.1 MB resident) and into
                // aplay/arecord. -nostartfiles leaves out swiftrt.o; with -static-stdlib the runtime
                // is an archive, from which nothing is taken when nothing refers to it. So the
                // plugin must stay C (SimCardTests checks what it needs).
                .unsafeFlags(["-nostartfiles", "-static-stdlib"]),
            ]
        ),
        .target(name: "RoomAllocProbe"),

        // Swift modules, one job each.
        // Pure Swift, no C: the base every module may use (rings, heaps, inert text, numbers as
        // text, the version), media (RTP, the jitter buffer), DSP (meters, limiter, mixer, FFT,
        // WAV, self-test analysis) and settings (INI, board profiles, roomd.conf).
        .target(name: "RoomBase", dependencies: []),
        .target(name: "RoomMedia", dependencies: ["RoomBase"]),
        .target(name: "RoomDSP", dependencies: ["RoomBase"]),
        // The telephone codecs calls fall back to (G.711, G.722), written here: no C library.
        .target(name: "RoomTelephony"),
        .target(name: "RoomSettings", dependencies: ["RoomBase"]),
        .target(name: "RoomJSON", dependencies: []),
        // The version line of the programs: release version and the git commit built from.
        .target(name: "RoomBuildInfo", dependencies: ["RoomBase"], plugins: ["BuildInfo"]),
        .plugin(name: "BuildInfo", capability: .buildTool(), path: "Sources/BuildInfoPlugin"),
        // Linux interfaces the Glibc module leaves out (epoll, eventfd, signalfd, accept4, ucred).
        .target(name: "CLinux"),
        .target(name: "RoomSystem", dependencies: ["CLinux", "RoomBase"]),
        // TLS 1.3 over a RoomSystem stream connection (signalling; docs/security.md).
        .target(name: "RoomTLS", dependencies: ["CRoomTLS", "RoomBase", "RoomSystem"]),
        // One C library each: ALSA devices, the Opus codec, the capture chain's DSP (roomd's
        // canceller, suppressor, beam and locator, and the webrtc-audio-processing shim).
        .target(name: "RoomALSA", dependencies: ["CAlsa", "RoomSystem"]),
        .target(name: "RoomOpus", dependencies: ["COpus", "RoomSystem"]),
        .target(name: "RoomCaptureChain", dependencies: ["CCaptureChain", "RoomBase", "RoomDSP"]),
        .target(name: "RoomAudio", dependencies: ["RoomALSA", "RoomBase", "RoomCaptureChain", "RoomDSP", "RoomMedia", "RoomOpus", "RoomSettings", "RoomSystem", "RoomTelephony"]),
        // Hashes, HMAC, random keys and locked secrets over libcrypto: roomd's one crypto library.
        .target(name: "RoomCrypto", dependencies: ["CLibcrypto", "RoomMedia", "RoomSystem"]),
        // Signalling messages, framing and tokens, shared by roomd and roomserver.
        .target(name: "RoomProtocol", dependencies: ["RoomBase", "RoomCrypto", "RoomJSON", "RoomMedia", "RoomModel"]),
        // SRTP sessions over libsrtp2: protect and unprotect media in place (roomd, roomserver, roomload).
        .target(name: "RoomMediaCrypto", dependencies: ["CSRTP", "CSRTPOpenSSLCipher", "RoomMedia"]),
        // The room service: signalling, rooms, selective forwarding (used by roomserver and tests).
        .target(name: "RoomServerKit", dependencies: ["RoomBase", "RoomCrypto", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomSettings", "RoomSystem", "RoomTLS"]),
        // A SIP call's RTP: SDES-keyed SRTP, the agreed codec's payload type, RFC 4733 DTMF.
        .target(name: "RoomCallMedia", dependencies: ["RoomBase", "RoomMedia", "RoomMediaCrypto", "RoomSystem"]),
        // The local control API (newline-delimited JSON on a Unix socket): server side for roomd,
        // client side for roomctl. Must not depend on the audio libraries.
        .target(name: "RoomControl", dependencies: ["RoomBase", "RoomJSON", "RoomModel", "RoomSettings", "RoomSystem"]),
        // Buttons and LEDs: libgpiod (v1) backend and a simulated backend for tests and the rig.
        .target(name: "RoomGPIO", dependencies: ["CGpiod", "RoomSettings", "RoomSystem"]),
        // Joins rooms: signalling client with recovery, and the UDP media session (used by roomd).
        // What a room is to the appliance, whatever serves it: the RoomBackend port and the session
        // events, connection states and join info every backend reports (docs/architecture.md).
        .target(name: "RoomModel", dependencies: []),
        .target(name: "RoomClient", dependencies: ["RoomBase", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomSystem", "RoomTLS"]),
        // Session descriptions (SDP offer/answer) for the WebRTC path (issue 12, docs/webrtc.md).
        .target(name: "RoomSDP"),
        // STUN and ICE connectivity for the WebRTC path (issue 12, docs/webrtc.md).
        .target(name: "RoomICE", dependencies: ["RoomCrypto"]),
        // The SIP user agent on libosip2, driven by roomd's EventLoop (issue 29, docs/calls.md).
        .target(name: "RoomSIP", dependencies: ["COSIP", "RoomBase", "RoomCrypto", "RoomSDP", "RoomSystem"]),
        // DTLS-SRTP handshakes and keys for the WebRTC path (issue 12, docs/webrtc.md).
        .target(name: "RoomDTLS", dependencies: ["CRoomDTLS", "RoomSDP"]),
        // One WebRTC audio stream's media: ICE + DTLS-SRTP + SRTP on one UDP socket (issue 12).
        .target(name: "RoomWebRTC", dependencies: ["RoomDTLS", "RoomICE", "RoomMedia", "RoomMediaCrypto", "RoomProtocol", "RoomSDP", "RoomSystem"]),
        // Janus's API (WebSocket transport) for the WebRTC room backend (issue 12, docs/webrtc.md).
        .target(name: "RoomJanus", dependencies: ["RoomBase", "RoomCrypto", "RoomJSON", "RoomSystem", "RoomTLS"]),
        // roomd in a Janus AudioBridge room behind the same RoomBackend as roomserver's path (issue 12, docs/janus.md).
        .target(name: "RoomJanusBackend", dependencies: ["RoomBase", "RoomJanus", "RoomMedia", "RoomModel", "RoomProtocol", "RoomSDP", "RoomSystem", "RoomTLS", "RoomWebRTC"]),
        // The appliance: settings, the room link, the control bridge, buttons and LEDs, health,
        // status, self-test, and the daemon's start-up order; roomd only parses and runs it.
        .target(name: "RoomAppliance", dependencies: ["RoomALSA", "RoomAudio", "RoomBase", "RoomBuildInfo", "RoomCallMedia", "RoomCaptureChain", "RoomClient", "RoomControl", "RoomCrypto", "RoomDSP", "RoomGPIO", "RoomJSON", "RoomJanusBackend", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomSDP", "RoomSIP", "RoomSettings", "RoomSystem", "RoomTLS"]),
        .executableTarget(name: "roomd", dependencies: ["RoomAppliance", "RoomSystem"],
                          exclude: ["link-order.txt", "rodata.ld"], linkerSettings: roomdReleaseLink),
        .executableTarget(name: "roomserver", dependencies: ["RoomBase", "RoomBuildInfo", "RoomCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem", "RoomTLS"]),
        .executableTarget(name: "roomctl", dependencies: ["RoomBuildInfo", "RoomControl", "RoomSystem"]),
        // Micro-benchmarks behind scripts/bench (APM, Opus); the engine benches run roomd itself.
        .executableTarget(name: "roombench", dependencies: ["CLinux", "RoomAudio", "RoomCaptureChain", "RoomMedia", "RoomMediaCrypto", "RoomOpus", "RoomProtocol", "RoomSystem"], path: "Sources/Tools/roombench"),
        // Synthetic room clients for the server load benchmark (scripts/bench server).
        .executableTarget(name: "roomload", dependencies: ["RoomBase", "RoomCrypto", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem", "RoomTLS"], path: "Sources/Tools/roomload"),
        // A lossy, jittery, reordering relay between appliances and roomserver (tests, benches, the rig).
        .executableTarget(name: "roomproxy", dependencies: ["RoomBase", "RoomSystem"], path: "Sources/Tools/roomproxy"),

        .testTarget(name: "RoomBaseTests", dependencies: ["RoomBase"]),
        .testTarget(name: "RoomMediaTests", dependencies: ["RoomBase", "RoomMedia"]),
        .testTarget(name: "RoomDSPTests", dependencies: ["RoomBase", "RoomDSP"]),
        .testTarget(name: "RoomTelephonyTests", dependencies: ["RoomTelephony"]),
        .testTarget(name: "RoomCallMediaTests", dependencies: ["RoomBase", "RoomCallMedia", "RoomMedia", "RoomMediaCrypto", "RoomSystem"]),
        .testTarget(name: "RoomSettingsTests", dependencies: ["RoomBase", "RoomSettings"]),
        // Reads Sources/ and the built roomctl; depends on no module of ours on purpose.
        .testTarget(name: "ArchitectureTests"),
        .testTarget(name: "RoomSystemTests", dependencies: ["RoomBase", "RoomSettings", "RoomSystem", "RoomTestSupport"]),
        .testTarget(name: "RoomCryptoTests", dependencies: ["RoomCrypto", "RoomMedia", "RoomModel", "RoomProtocol"]),
        .testTarget(name: "RoomProtocolTests", dependencies: ["RoomBase", "RoomCrypto", "RoomMedia", "RoomModel", "RoomProtocol"]),
        .testTarget(name: "RoomGPIOTests", dependencies: ["CGpiod", "RoomGPIO", "RoomSettings", "RoomSystem"]),
        .testTarget(name: "RoomControlTests", dependencies: ["RoomControl", "RoomJSON", "RoomSystem"]),
        .testTarget(name: "RoomServerKitTests", dependencies: ["RoomBase", "RoomCrypto", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem"]),
        .testTarget(name: "RoomClientTests", dependencies: ["RoomBase", "RoomClient", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem"]),
        // Test helpers several test targets share (certificates from scripts/make-dev-certs, a
        // Janus from scripts/janus-dev, a free port).
        .target(name: "RoomTestSupport", dependencies: ["CLinux"], path: "Tests/RoomTestSupport"),
        .testTarget(name: "RoomTLSTests", dependencies: ["RoomBase", "RoomClient", "RoomMedia", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem", "RoomTLS", "RoomTestSupport"]),
        .testTarget(name: "RoomMediaCryptoTests",
                    dependencies: ["RoomTestSupport", "RoomMediaCrypto", "CLibcrypto", "RoomClient", "RoomModel", "RoomServerKit", "RoomProtocol", "RoomBase", "RoomMedia", "RoomSystem", "RoomTLS",
                                   "RoomJanusBackend", "RoomWebRTC"]),
        .testTarget(name: "SimCardTests", dependencies: ["CAlsa", "RoomTestSupport"]),
        .testTarget(name: "RoomSDPTests", dependencies: ["RoomSDP"]),
        .testTarget(name: "RoomICETests", dependencies: ["RoomICE"]),
        .testTarget(name: "RoomJanusTests", dependencies: ["RoomJanus", "RoomMedia", "RoomSDP", "RoomSystem", "RoomTLS", "RoomTestSupport", "RoomWebRTC"]),
        .testTarget(name: "RoomDTLSTests", dependencies: ["RoomDTLS", "RoomSDP"]),
        .testTarget(name: "RoomSIPTests", dependencies: ["RoomSDP", "RoomSIP", "RoomSystem", "RoomTLS", "RoomTestSupport"]),
        .testTarget(name: "RoomWebRTCTests", dependencies: ["RoomICE", "RoomJanus", "RoomSDP", "RoomSystem", "RoomTestSupport", "RoomWebRTC"]),
        .testTarget(name: "RoomAudioTests", dependencies: ["CCaptureChain", "COpus", "RoomALSA", "RoomAudio", "RoomBase", "RoomCaptureChain", "RoomControl", "RoomDSP", "RoomJSON", "RoomMedia", "RoomOpus", "RoomSettings", "RoomSystem", "RoomTelephony", "RoomTestSupport"]),
    ],
    swiftLanguageModes: [.v6],
    cLanguageStandard: .gnu11,
    cxxLanguageStandard: .cxx14
)

// Fuzzing (scripts/fuzz, docs/fuzzing.md): one libFuzzer harness over the parsers that read
// untrusted bytes. Declared only when ROOMD_FUZZ=1 (scripts/fuzz sets it and builds in its own
// scratch path, .build/fuzz), so the normal builds and `swift test` see exactly the package above.
if Context.environment["ROOMD_FUZZ"] == "1" {
    package.targets.append(.executableTarget(
        name: "roomfuzz", dependencies: ["RoomBase", "RoomMedia", "RoomSettings", "RoomSystem", "RoomProtocol", "RoomControl", "RoomServerKit", "RoomSDP", "RoomMediaCrypto", "RoomJanus", "RoomWebRTC", "RoomICE", "RoomJSON", "RoomSIP", "RoomCallMedia", "RoomTelephony"],
        path: "Tests/Fuzz/roomfuzz",
        // gold stops with an internal error (format_file_lineno) on libFuzzer's objects; lld links them.
        linkerSettings: [.unsafeFlags(["-use-ld=lld"])]))
}
