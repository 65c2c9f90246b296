import RoomModel

/// The requests a session sent on its connection and the server has not answered yet, by id,
/// with what to call when the answer (`ok` or `error`) comes; and the id counter, which runs
/// for the whole session (also across reconnects, and for requests that could not be sent:
/// their id is in the `requestFailed` event). A plain value; the session fails what is left
/// when the connection goes (`teardownConnection`).
struct PendingRequests {
    typealias Request = (type: String, completion: RoomRequestCompletion?)

    private var nextRequestID = 1
    private var waiting: [Int: Request] = [:]

    /// The id of the next request.
    mutating func makeID() -> Int {
        let id = nextRequestID
        nextRequestID += 1
        return id
    }

    /// A request written to the connection, waiting for its answer.
    mutating func add(id: Int, type: String, completion: RoomRequestCompletion?) {
        waiting[id] = (type, completion)
    }

    /// The request an answer is for (nil: not ours, or answered already).
    mutating func remove(id: Int) -> Request? {
        waiting.removeValue(forKey: id)
    }

    /// Empties the table and returns what was waiting, in the order sent.
    @discardableResult
    mutating func removeAll() -> [(key: Int, value: Request)] {
        let all = waiting
        waiting = [:]
        return all.sorted(by: { $0.key < $1.key })
    }
}
