import RoomControl
import RoomJSON

/// One control line, as roomd's control server gets it (without the newline) and as roomctl
/// gets roomd's answers and events.
func fuzzControl(_ bytes: UnsafeRawBufferPointer) {
    // roomd: the whole request path a client's line takes before a command runs.
    do {
        let request = try ControlRequest.parse(line: bytes)
        note("request \(request.name) \(request.arguments)")
        fuzzCheck(ControlCommands.spec(named: request.name) != nil, "a request for an unknown command \(request.name) was accepted")
    } catch {
        note("refused: \(error.error)")
        // The answer roomd writes for a refused line must itself be a line roomctl can read.
        let answer = ControlResponse.failure(id: error.id, error: error.error)
        fuzzCheck(answer.last == 0x0A && (try? JSONValue.parse(answer.dropLast())) != nil,
                  "roomd's refusal is not one JSON line: \(String(decoding: answer, as: UTF8.self))")
    }

    // The reader on its own, and what roomd writes back: every value the reader returns must be
    // writable and read back (roomd echoes request ids and arguments in its answers).
    guard let value = try? JSONValue.parse(bytes) else { return }
    let text = value.jsonBytes
    do {
        _ = try JSONValue.parse(text)
    } catch {
        fuzzCheck(false, "roomd's own JSON \(value.jsonText) does not parse: \(error)")
    }
    // roomctl: a response's error object and an event line.
    _ = ControlError(json: value)
    if let error = value["error"] { _ = ControlError(json: error) }
    _ = ControlEvent(json: value)
}
