/// What each module under Sources/ may import: the layering of docs/architecture.md, checked by
/// `ArchitectureTests` against every `import` in the sources. The list is exact — an import
/// not listed fails, and so does a listed one that nothing uses — so it always reads as the
/// true dependency graph. Change it in the same commit as the import, and say why in
/// docs/architecture.md when a module reaches a layer it did not reach before.
///
/// An import the layering should not have but the code still needs is marked `debt:` (none
/// today; docs/architecture.md, "Debts"), so that nothing *new* of the kind slips in meanwhile.
enum AllowedImports {
    /// C adapter targets (one C library or one C file of ours each): they import nothing Swift.
    static let cTargets: Set<String> = [
        "CAlsa", "CGpiod", "CLibcrypto", "CLinux", "COpenSSL", "COpus", "COSIP", "CRoomDTLS", "CRoomFFT", "CRoomTLS", "CSRTP",
        "CSRTPOpenSSLCipher", "CCaptureChain", "CWebRTCAudioProcessing", "RoomAllocProbe",
        "RoomSimCard", "RoomSimRoom", "roomsim-scene",
    ]

    /// The toolchain's own modules, allowed where listed like any other.
    static let modules: [String: Set<String>] = [
        // Pure Swift, no C: the base every layer may use, then media, DSP, settings and the room's
        // vocabulary on top of it, then the wire messages.
        "RoomBase": ["Synchronization"],
        "RoomMedia": ["RoomBase"],
        "RoomDSP": ["RoomBase", "Synchronization"],
        "RoomTelephony": [],
        "RoomSettings": ["RoomBase"],
        "RoomJSON": ["FoundationEssentials"],
        "RoomModel": [],
        "RoomSDP": [],
        // Wire messages and tokens: signed and checked through the crypto adapter.
        "RoomProtocol": ["FoundationEssentials", "RoomBase", "RoomCrypto", "RoomJSON", "RoomMedia", "RoomModel"],
        // The one Glibc layer among the libraries, below everything but RoomBase (executables and
        // tools below also import Glibc: they wire, and are no one's dependency).
        "RoomSystem": ["CLinux", "Glibc", "RoomBase", "Synchronization"],
        "RoomBuildInfo": ["RoomBase"],
        // Adapters.
        "RoomTLS": ["CRoomTLS", "RoomBase", "RoomSystem"],
        "RoomDTLS": ["CRoomDTLS", "RoomSDP"],                                       // the fingerprint the SDP announced
        "RoomCrypto": ["CLibcrypto", "RoomMedia", "RoomSystem"],                    // random SRTP keys; locked pages
        "RoomMediaCrypto": ["CSRTP", "CSRTPOpenSSLCipher", "RoomMedia"],
        "RoomICE": ["RoomCrypto"],
        "RoomCallMedia": ["RoomBase", "RoomMedia", "RoomMediaCrypto", "RoomSystem"],
        "RoomGPIO": ["CGpiod", "RoomSettings", "RoomSystem"],
        "RoomALSA": ["CAlsa", "RoomSystem"],
        "RoomOpus": ["COpus", "RoomSystem"],
        "RoomSIP": ["COSIP", "RoomBase", "RoomCrypto", "RoomSDP", "RoomSystem"],     // digest MD5 through RoomCrypto; call offer/answer (RoomSDP)
        "RoomCaptureChain": ["CCaptureChain", "RoomBase", "RoomDSP"],
        // Features.
        "RoomAudio": ["RoomALSA", "RoomBase", "RoomCaptureChain", "RoomDSP", "RoomMedia", "RoomOpus", "RoomSettings",
                      "RoomSystem", "RoomTelephony", "Synchronization"],
        "RoomClient": ["RoomBase", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomSystem", "RoomTLS"],
        "RoomControl": ["RoomBase", "RoomJSON", "RoomModel", "RoomSettings", "RoomSystem"],
        // Synchronization: the worker threads' shared count and hand-over table (RoomServerWorkers).
        "RoomServerKit": ["FoundationEssentials", "RoomBase", "RoomCrypto", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol",
                          "RoomSettings", "RoomSystem", "RoomTLS", "Synchronization"],
        "RoomWebRTC": ["FoundationEssentials", "RoomDTLS", "RoomICE", "RoomMedia", "RoomMediaCrypto", "RoomProtocol", "RoomSDP", "RoomSystem"],
        "RoomJanus": ["FoundationEssentials", "RoomBase", "RoomCrypto", "RoomJSON", "RoomSystem", "RoomTLS"],
        "RoomJanusBackend": ["RoomBase", "RoomJanus", "RoomMedia", "RoomModel", "RoomProtocol", "RoomSDP", "RoomSystem", "RoomTLS",
                             "RoomWebRTC"],
        // The appliance (RoomALSA for the ALSA environment at start-up).
        "RoomAppliance": ["RoomALSA", "RoomAudio", "RoomBase", "RoomBuildInfo", "RoomCallMedia", "RoomCaptureChain", "RoomClient",
                          "RoomControl", "RoomCrypto", "RoomDSP", "RoomGPIO", "RoomJSON", "RoomJanusBackend", "RoomMedia", "RoomMediaCrypto",
                          "RoomModel", "RoomProtocol", "RoomSDP", "RoomSIP", "RoomSettings", "RoomSystem", "RoomTLS"],
        // Executables: they parse and run.
        "roomd": ["Glibc", "RoomAppliance", "RoomSystem"],
        // roomctl: no audio, no room service (its link set is checked too).
        "roomctl": ["Glibc", "RoomBuildInfo", "RoomControl", "RoomSystem"],
        "roomserver": ["Glibc", "RoomBase", "RoomBuildInfo", "RoomCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem", "RoomTLS"],
        // Tools.
        "roombench": ["CLinux", "Glibc", "RoomAudio", "RoomCaptureChain", "RoomMedia", "RoomMediaCrypto", "RoomOpus", "RoomProtocol", "RoomSystem"],
        "roomload": ["Glibc", "RoomBase", "RoomCrypto", "RoomMedia", "RoomMediaCrypto", "RoomModel", "RoomProtocol", "RoomServerKit", "RoomSystem",
                     "RoomTLS", "Synchronization"],
        "roomproxy": ["Glibc", "RoomBase", "RoomSystem"],
        // The build plugin that stamps the commit into RoomBuildInfo.
        "BuildInfoPlugin": ["Foundation", "PackagePlugin"],
    ]

    /// Shared libraries roomctl must not load: it runs on any machine that has the socket, and
    /// a person or a script should not need the audio stack to ask roomd something.
    static let roomctlMustNotLink = ["libasound", "libopus", "libwebrtc-audio-processing", "libsrtp2", "libgpiod"]
}
