import RoomSettings
import RoomSystem
import RoomTLS

/// The settings roomd acts on, after layering (strongest first): command line, run-time
/// settings (roomctl, buttons; kept in the state directory), configuration file, defaults.
/// Equatable so a reload can compare before and after and act on what changed.
struct EffectiveSettings: Equatable {
    var boardPath: String
    var servers: [String]
    var token: String?
    var tokenFile: String?
    /// The room service's public key file (`room.placement_key`), file only: it checks whatever
    /// token is in use, the command line's included.
    var placementKey: String?
    var role: String
    var backend: RoomBackendKind
    var janusRoom: UInt64?
    var janusPin: String?
    var janusSecret: String?
    var stunServer: String?
    /// The name people in a Janus room see.
    var displayName: String
    /// How the signalling server is checked (TLS unless `plaintextSignalling`).
    var signalling: SignallingSecurity
    var profile: AudioProfile
    var volumeDB: Double
    var aecSuppression: Int32?
    var opusFrameMilliseconds: Int
    var controlSocket: String?
    var controlGroup: String?
    var logLevel: String
    var muted: Bool
}

extension EffectiveSettings {
    /// Whether these settings name a room to join: a server, or a token checked for where it
    /// places the room.
    var placesRoom: Bool { !servers.isEmpty || placementKey != nil }
}

/// room.tls_* and room.plaintext_signalling after layering: TLS unless plain is asked for.
struct SignallingSecurity: Equatable {
    var caFile: String?
    var pins: [String]
    var serverName: String?
    var plaintext: Bool

    /// The session's TLS settings; nil for plain signalling.
    var tlsSettings: TLSClientSettings? {
        plaintext ? nil : TLSClientSettings(caFile: caFile, pins: pins, serverName: serverName)
    }
}

/// Owns the three layers and the two files behind them. Lives on the event-loop thread.
final class SettingsStore {
    let options: Options
    /// nil: no configuration file (neither --config nor $ROOMD_CONFIG).
    let configPath: String?
    private(set) var file: ApplianceConfiguration
    private(set) var runtime: RuntimeSettings
    /// `<state dir>/settings.conf`, or nil when run-time settings are not kept.
    let statePath: String?
    /// The state directory (absolute), or nil when nothing is kept across restarts.
    let stateDirectory: String?

    /// Reads the configuration file (errors are fatal at start: `file:line: key: …`) and the
    /// run-time settings (a damaged file is set aside with a warning: the appliance must come
    /// up even if a person broke roomd's own file).
    init(options: Options) throws(ConfigError) {
        self.options = options
        // No implicit /etc/roomd/roomd.conf: the unit names it, and a developer's or a bench's
        // roomd on an installed board must not pick up the appliance's room and token.
        let chosen = options.config ?? Environment.get("ROOMD_CONFIG")
        configPath = chosen.flatMap { $0 == "none" || $0.isEmpty ? nil : Files.absolute($0) }
        file = ApplianceConfiguration()
        runtime = RuntimeSettings()
        if let configPath {
            file = try Self.read(configPath)
            try Self.checkSignalling(file, against: options, path: configPath)
        }
        let chosenState = options.stateDirectory ?? file.stateDirectory ?? Environment.get("STATE_DIRECTORY")
        if let dir = chosenState, dir != "none", !dir.isEmpty {
            // systemd may pass several directories separated by colons; the first is ours.
            let first = String(dir.split(separator: ":").first ?? "")
            do {
                try Files.makeDirectories(first)
            } catch {
                Log.warning("state directory: \(error); run-time settings will not survive a restart")
            }
            stateDirectory = Files.absolute(first)
        } else {
            stateDirectory = nil
        }
        statePath = stateDirectory.map { $0 + "/" + RuntimeSettings.fileName }
        if let statePath, Files.exists(statePath) {
            do {
                runtime = try RuntimeSettings.parse(text: try Files.readText(statePath), file: statePath)
                // Edited while roomd was stopped: the file's newer value wins, as at a reload.
                let edited = runtime.keysChanged(in: file)
                if !edited.isEmpty {
                    Log.notice("\(configPath ?? "configuration"): \(edited.joined(separator: ", ")) changed since set at run time; the file's value wins")
                    runtime.forget(changedConfigurationKeys: edited)
                    _ = save()
                }
            } catch {
                let aside = statePath + ".bad"
                Log.warning("\(error); run-time settings ignored (file kept as \(aside))")
                _ = try? Files.rename(statePath, to: aside)
            }
        }
    }

    static func read(_ path: String) throws(ConfigError) -> ApplianceConfiguration {
        let text: String
        do {
            text = try Files.readText(path)
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "\(error)")
        }
        return try ApplianceConfiguration.parse(text: text, file: path, directory: Files.directory(of: path))
    }

    /// The default name in a Janus room: the board's host name (installers name boards by room).
    static let hostName: String = {
        guard let name = HostName.current, !name.isEmpty else { return "roomd" }
        return String(name.prefix(64))
    }()

    var effective: EffectiveSettings { effective(file: file) }

    /// What the settings would be with `file` as the configuration file (a reload's preview).
    func effective(file: ApplianceConfiguration) -> EffectiveSettings {
        let o = options
        let servers = o.servers.isEmpty ? file.servers : o.servers
        // The command line's server comes with the command line's backend.
        let backend = o.servers.isEmpty ? (o.backend ?? file.backend ?? .roomserver) : (o.backend ?? .roomserver)
        // A token on the command line belongs with the command line's server, and the same for
        // the file: mixing one's server with the other's token would join the wrong room.
        let tokenFromOptions = !o.servers.isEmpty || o.token != nil || o.tokenFile != nil
        return EffectiveSettings(
            boardPath: o.board ?? file.boardPath ?? "board/sim",
            servers: servers,
            token: tokenFromOptions ? o.token : file.token,
            tokenFile: tokenFromOptions ? o.tokenFile : file.tokenFile,
            placementKey: file.placementKey,
            role: o.role ?? file.role ?? "streamer",
            backend: backend,
            janusRoom: o.servers.isEmpty ? (o.janusRoom ?? file.janusRoom) : o.janusRoom,
            janusPin: o.servers.isEmpty ? file.janusPin : nil,
            janusSecret: o.servers.isEmpty ? file.janusSecret : nil,
            stunServer: o.stunServer ?? (o.servers.isEmpty ? file.stunServer : nil),
            displayName: o.displayName ?? file.displayName ?? Self.hostName,
            signalling: SignallingSecurity(
                caFile: o.tlsCAFile ?? file.tlsCAFile, pins: o.tlsPins ?? file.tlsPins,
                serverName: o.tlsServerName ?? file.tlsServerName,
                plaintext: o.plaintextSignalling || (file.plaintextSignalling ?? false)),
            profile: o.profile ?? runtime.profile ?? file.profile ?? .speech,
            volumeDB: runtime.volumeDB ?? file.volumeDB ?? 0,
            aecSuppression: o.aecSuppression ?? file.aecSuppression,
            // A Janus AudioBridge takes one packet per participant every 20 ms (docs/janus.md).
            opusFrameMilliseconds: o.opusFrameMilliseconds ?? file.opusFrameMilliseconds ?? (backend == .janus ? 20 : 10),
            controlSocket: o.controlSocket ?? file.controlSocket,
            controlGroup: o.controlGroup ?? file.controlGroup,
            logLevel: o.logLevel ?? runtime.logLevel ?? file.logLevel ?? "info",
            muted: runtime.muted ?? false)
    }

    /// Records a run-time change and writes it through (temp file, fsync, rename), so a power
    /// cut right after a roomctl command loses nothing. Returns the write error, if any; the
    /// change is in effect either way.
    @discardableResult
    func update(_ change: (inout RuntimeSettings) -> Void) -> String? {
        var next = runtime
        change(&next)
        guard next != runtime else { return nil }
        runtime = next
        return save()
    }

    private func save() -> String? {
        runtime.rebase(on: file)
        guard let statePath else { return nil }
        do {
            try Files.writeAtomically(statePath, Array(runtime.serialized().utf8))
            return nil
        } catch {
            Log.warning("\(statePath): \(error); run-time settings will not survive a restart")
            return "\(error)"
        }
    }

    /// Reads and validates the configuration file again without changing anything: a reload
    /// first checks everything (this, then what needs the system: groups, the token file),
    /// and only then commits, so a bad edit leaves the running appliance as it was.
    func readAgain() throws(ConfigError) -> ApplianceConfiguration {
        guard let configPath else { return file }
        let next = try Self.read(configPath)
        try Self.checkSignalling(next, against: options, path: configPath)
        return next
    }

    /// The file turning TLS off while the command line sets how TLS is checked (or the other
    /// way round) is an error naming both: before, `plaintext_signalling = yes` in the file
    /// silently beat `--tls-ca-file` on the command line, and the appliance spoke plaintext to
    /// a server its installer meant to verify (issue 27).
    static func checkSignalling(_ file: ApplianceConfiguration, against o: Options, path: String) throws(ConfigError) {
        let commandLineTLS = [("--tls-ca-file", o.tlsCAFile != nil), ("--tls-pin", o.tlsPins != nil),
                              ("--tls-server-name", o.tlsServerName != nil)].first(where: \.1)?.0
        if file.plaintextSignalling == true, let flag = commandLineTLS {
            throw ConfigError(file: path, line: nil, key: "room.plaintext_signalling",
                              message: "yes turns TLS off, but \(flag) on the command line sets how TLS is checked: choose one")
        }
        let fileTLS = [("room.tls_ca_file", file.tlsCAFile != nil), ("room.tls_pin", !file.tlsPins.isEmpty),
                       ("room.tls_server_name", file.tlsServerName != nil)].first(where: \.1)?.0
        if o.plaintextSignalling, let key = fileTLS {
            throw ConfigError(file: path, line: nil, key: key,
                              message: "sets how TLS is checked, but --plaintext-signalling on the command line turns TLS off: choose one")
        }
    }

    /// Makes `next` the configuration file's content. Run-time values of keys the file changed
    /// are dropped (the installer's latest edit wins). Returns the changed file keys.
    func commit(_ next: ApplianceConfiguration) -> [String] {
        let changed = next.changedKeys(from: file)
        file = next
        var forgotten = runtime
        forgotten.forget(changedConfigurationKeys: changed)
        if forgotten != runtime {
            runtime = forgotten
            _ = save()
        }
        return changed
    }
}
