import RoomModel
import RoomServerKit
import XCTest

/// A far-away token expiry for tests that do not care about tokens.
let farFuture: RoomInstant = 1_000_000_000

func makeRoom(_ policy: RoomStagePolicy = .open, limit: Int = 3, topN: Int = 3,
              attributes: [String: String] = [:], speakerTurnMs: Int64 = RoomConfig().speakerTurnMs,
              file: StaticString = #filePath, line: UInt = #line) -> Room {
    do throws(RoomError) {
        return try Room(config: RoomConfig(policy: policy, speakerLimit: limit, topN: topN, attributes: attributes,
                                           speakerTurnMs: speakerTurnMs))
    } catch {
        XCTFail("config refused: \(error)", file: file, line: line)
        fatalError()
    }
}

func request(_ id: RoomParticipantID, user: String? = nil, grants: RoomGrants = .publisher,
             role: RoomRole = .audience, expires: RoomInstant = farFuture,
             previous: RoomParticipantID? = nil) -> RoomJoinRequest {
    RoomJoinRequest(participantID: id, userID: user ?? "user\(id)", name: "Name \(id)", grants: grants,
                    desiredRole: role, tokenExpiresAt: expires, previousParticipantID: previous)
}

extension Room {
    /// Runs a command that must succeed.
    @discardableResult
    mutating func must(_ command: RoomCommand, now: RoomInstant = 0,
                       file: StaticString = #filePath, line: UInt = #line) -> [RoomEffect] {
        do {
            return try handle(command, now: now)
        } catch {
            XCTFail("\(command) refused: \(error)", file: file, line: line)
            return []
        }
    }

    /// Joins a participant that must be accepted.
    @discardableResult
    mutating func add(_ id: RoomParticipantID, user: String? = nil, grants: RoomGrants = .publisher,
                      role: RoomRole = .audience, expires: RoomInstant = farFuture,
                      previous: RoomParticipantID? = nil, now: RoomInstant = 0,
                      file: StaticString = #filePath, line: UInt = #line) -> [RoomEffect] {
        must(.join(request(id, user: user, grants: grants, role: role, expires: expires, previous: previous)),
             now: now, file: file, line: line)
    }

    /// Runs a command that must be refused with `code`, and checks nothing changed.
    mutating func refuse(_ command: RoomCommand, _ code: RoomErrorCode, now: RoomInstant = 0,
                         contains fragment: String? = nil,
                         file: StaticString = #filePath, line: UInt = #line) {
        let before = self
        do throws(RoomError) {
            let effects = try handle(command, now: now)
            XCTFail("\(command) accepted, expected \(code.rawValue); effects \(effects)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            if let fragment {
                XCTAssertTrue(error.message.contains(fragment), "'\(error.message)' lacks '\(fragment)'",
                              file: file, line: line)
            }
        }
        XCTAssertEqual(self, before, "a refused command changed the room", file: file, line: line)
    }

    func stage(_ id: RoomParticipantID) -> RoomStageState? { participant(id)?.stage }
}

/// The events `id` receives among `effects`, in order.
func events(_ effects: [RoomEffect], for id: RoomParticipantID) -> [RoomEvent] {
    effects.compactMap {
        if case .send(let event, let to) = $0, to.contains(id) { return event }
        return nil
    }
}

/// Every send of an event whose case is `name` (`participantLeft`), with its recipients.
func sends(_ effects: [RoomEffect], named name: String) -> [(RoomEvent, [RoomParticipantID])] {
    effects.compactMap {
        if case .send(let event, let to) = $0, caseName(event) == name { return (event, to) }
        return nil
    }
}

/// An event's case, as tests and their messages name it: `participantLeft` for
/// `.participantLeft(2, reason: .timeout)`. (The wire names are the server's business:
/// RoomServerEffects maps events onto messages.)
func caseName(_ event: RoomEvent) -> String {
    String("\(event)".prefix { $0 != "(" })
}

func forwarding(_ effects: [RoomEffect]) -> [(RoomParticipantID, Bool)] {
    effects.compactMap {
        if case .forwardMedia(let id, let on) = $0 { return (id, on) }
        return nil
    }
}

func closes(_ effects: [RoomEffect]) -> [(RoomParticipantID, RoomLeaveReason)] {
    effects.compactMap {
        if case .close(let id, let reason) = $0 { return (id, reason) }
        return nil
    }
}

/// Stage states of the participants updated by `effects`, in order.
func updates(_ effects: [RoomEffect]) -> [(RoomParticipantID, RoomStageState)] {
    effects.compactMap {
        if case .send(.participantUpdated(let info), _) = $0 { return (info.id, info.stage) }
        return nil
    }
}

