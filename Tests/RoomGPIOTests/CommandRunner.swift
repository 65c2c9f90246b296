import Foundation

/// Runs a command to completion with stdout and stderr going through files in `scratch` (no
/// pipe can fill up and stall it) and no standard input. `environment` replaces the inherited
/// one when given. Shared by the board-setup and package tests, which drive shell tools.
func runCommand(_ exe: String, _ args: [String], scratch dir: String,
                environment: [String: String]? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
    _ = FileManager.default.createFile(atPath: dir + "/out", contents: nil)
    _ = FileManager.default.createFile(atPath: dir + "/err", contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/out"))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/err"))
    let p = Process()
    p.executableURL = URL(fileURLWithPath: exe)
    p.arguments = args
    if let environment { p.environment = environment }
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    try out.close()
    try err.close()
    return (p.terminationStatus,
            (try? String(contentsOfFile: dir + "/out", encoding: .utf8)) ?? "",
            (try? String(contentsOfFile: dir + "/err", encoding: .utf8)) ?? "")
}
