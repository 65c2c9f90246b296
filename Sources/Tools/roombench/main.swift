import Glibc
import RoomAudio
import RoomSystem

// Wiring only: run the micro-benchmark named on the command line, print JSON lines.
exit(MicroBench.main(Array(CommandLine.arguments.dropFirst())))
