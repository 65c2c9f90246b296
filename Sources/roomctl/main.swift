import Glibc
import RoomSystem
import RoomCore

// The control CLI. The control socket arrives with issue 4; until then roomctl answers
// --version and --help, and says plainly that it has nothing to talk to yet.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--version" {
    print("roomctl \(roomdVersion)")
    exit(0)
}
if arguments.isEmpty || arguments.first == "--help" || arguments.first == "-h" {
    print("""
    usage: roomctl [--help | --version] COMMAND ...

    Controls a running roomd over its Unix socket. The control socket is not implemented yet
    (issue 4): every command exits with status 69 (service unavailable) until it is.
    """)
    exit(0)
}
printError("roomctl: \(arguments[0]): the control socket is not implemented yet (issue 4)\n")
exit(69)
