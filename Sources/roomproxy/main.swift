import Glibc
import RoomSystem

// Being written (issue 3).
printError("roomproxy: not implemented yet")
exit(69)
