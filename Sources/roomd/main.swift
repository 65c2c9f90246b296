import Glibc
import RoomSystem

// Wiring only: parse, run, exit with the daemon's status.
switch Options.parse(Array(CommandLine.arguments.dropFirst())) {
case .exit(let text, let code):
    if code == 0 { print(text) } else { printError(text) }
    exit(code)
case .run(let options):
    exit(Daemon(options: options).run())
}
