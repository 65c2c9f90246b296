import RoomSystem

/// Points alsa-lib at a board's extra ALSA configuration and at our plugins before the first
/// ALSA call (alsa-lib reads its configuration once per process).
public enum AlsaEnvironment {
    public static let simCardLibrary = "libasound_module_pcm_roomsim.so"

    /// - `ALSA_CONFIG_PATH` becomes the system configuration plus the board's file, unless the
    ///   caller already set it (then it is respected as-is, and reported by the caller).
    /// - `ALSA_PLUGIN_DIR` becomes the directory holding this executable when the simulated
    ///   card's plugin was built next to it, unless already set.
    /// Returns a one-line description of what was set, for the start-up log.
    @discardableResult
    public static func prepare(boardAlsaConfig: String?) -> String {
        var notes: [String] = []
        if let boardAlsaConfig {
            if let existing = Environment.get("ALSA_CONFIG_PATH") {
                notes.append("ALSA_CONFIG_PATH kept as \(existing)")
            } else {
                let system = Environment.get("ROOMD_ALSA_SYSTEM_CONFIG") ?? "/usr/share/alsa/alsa.conf"
                Environment.set("ALSA_CONFIG_PATH", system + ":" + boardAlsaConfig)
                notes.append("ALSA_CONFIG_PATH=\(system):\(boardAlsaConfig)")
            }
        }
        if Environment.get("ALSA_PLUGIN_DIR") == nil {
            let dir = Files.directory(of: Files.executablePath())
            if Files.exists(dir + "/" + simCardLibrary) {
                Environment.set("ALSA_PLUGIN_DIR", dir)
                notes.append("ALSA_PLUGIN_DIR=\(dir)")
            }
        }
        return notes.joined(separator: ", ")
    }
}
