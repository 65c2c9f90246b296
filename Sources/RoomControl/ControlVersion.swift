/// The control API version (docs/control-api.md, "control API 1"). Reported by the `version`
/// command; a client that needs a newer API compares it there.
public let controlAPIVersion = 1

/// Where roomd listens by default and roomctl connects by default.
public let defaultControlSocketPath = "/run/roomd/control.sock"

/// The environment variable roomctl reads when `--socket` is not given.
public let controlSocketEnvironmentVariable = "ROOMD_CONTROL_SOCKET"
