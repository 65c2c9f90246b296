import Glibc
import RoomBuildInfo
import RoomControl
import RoomSystem

// The control CLI: wiring only. Parsing, the subcommands and output live in RoomControl
// (`Roomctl`) so the tests run them in-process. roomctl links RoomBase, RoomModel, RoomSettings, RoomSystem
// and RoomControl only — no audio libraries.
var environment: [String: String] = [:]
if let socket = Environment.get(controlSocketEnvironmentVariable) { environment[controlSocketEnvironmentVariable] = socket }
exit(Roomctl.main(Array(CommandLine.arguments.dropFirst()), environment: environment,
                  versionLine: versionLine(program: "roomctl", details: ["control API \(controlAPIVersion)"])))
