import Foundation

/// The repository's root (this file is Tests/RoomTestSupport/PackageRoot.swift): where the test
/// helpers find scripts/make-dev-certs and scripts/janus-dev.
public let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()
