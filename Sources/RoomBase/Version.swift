/// One version for roomd, roomctl and (later) the protocols, printed by --version.
public let roomdVersion = "0.1.0"
