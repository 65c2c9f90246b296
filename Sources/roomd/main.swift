import Glibc
import RoomAppliance
import RoomSystem

// Every library's symbols bound before start-up's page release, not on first call
// (EagerBinding explains why): re-executes once, before anything else runs.
EagerBinding.reexecUnlessBound()

// Wiring only: parse, run, exit with the daemon's status.
switch Options.parse(Array(CommandLine.arguments.dropFirst())) {
case .exit(let text, let code):
    if code == 0 { print(text) } else { printError(text) }
    exit(code)
case .run(let options):
    exit(Daemon(options: options).run())
}
