import RoomServerKit
import RoomSettings

/// The configuration files: parsing is all-or-nothing and errors name the file and line, so
/// the only thing to catch here is a trap (or a line number outside the file).
func fuzzRoomdConf(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let parsed = try ApplianceConfiguration.parse(text: text, file: "roomd.conf", directory: "/etc/roomd")
        note("\(parsed)")
    } catch {
        checkLine(error, text)
    }
}

func fuzzServerConf(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let parsed = try RoomServerConfiguration.parse(text: text, file: "roomserver.conf")
        note("\(parsed)")
    } catch {
        checkLine(error, text)
    }
}

func fuzzBoard(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let parsed = try BoardProfile.parse(text: text, file: "board.conf")
        note("\(parsed)")
    } catch {
        checkLine(error, text)
    }
}

/// An error's line is one of the file's lines (the user is sent there).
private func checkLine(_ error: ConfigError, _ text: String) {
    note("\(error)")
    guard let line = error.line else { return }
    let lines = text.utf8.count { $0 == 0x0A } + 1
    fuzzCheck(line >= 1 && line <= lines, "error at line \(line) of a \(lines)-line file: \(error)")
}
