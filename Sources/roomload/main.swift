import Glibc
import RoomSystem

// Being written (issue 3).
printError("roomload: not implemented yet")
exit(69)
