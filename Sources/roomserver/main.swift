import Glibc
import RoomCore
import RoomSystem

// Wiring only. The service itself is being built (issue 3).
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--version" { printLine("roomserver \(roomdVersion)"); exit(0) }
printError("roomserver: not implemented yet (issue 3)")
exit(69)
