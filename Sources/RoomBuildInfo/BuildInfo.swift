import RoomBase


/// What `--version` prints: the release version and the git commit the program was built from
/// (`roomdCommit` is generated at build time by Sources/BuildInfoPlugin), so a report from a board
/// names the exact source it runs.
/// `details` follow the commit inside the parentheses (e.g. the protocol version).
public func versionLine(program: String, details: [String] = []) -> String {
    "\(program) \(roomdVersion) (" + (["commit \(roomdCommit)"] + details).joined(separator: ", ") + ")"
}
