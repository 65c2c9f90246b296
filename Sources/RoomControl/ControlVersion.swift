/// The control API version, sent in every hello/response (docs/control-api.md).
public let controlAPIVersion = 1
