import RoomModel
import RoomProtocol
import RoomSystem

/// Requests: sending one and tracking it until its answer (`PendingRequests`), failures
/// reported through the completion or a `requestFailed` event, and the public calls.
extension RoomSession {
    @discardableResult
    func sendRequest(_ body: SignalMessage.Body, completion: RoomRequestCompletion?) -> Int? {
        let id = pending.makeID()
        guard phase == .joined, connection != nil else {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.notConnected, message: "not joined to a room (\(connectionState))"))
            return nil
        }
        let message = SignalMessage(id: id, body)
        let bytes: [UInt8]
        do {
            bytes = try encoder.frame(try message.encode())
        } catch let error as SignalMessageError {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: error.code, message: error.description))
            return nil
        } catch {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: .invalidField, message: "\(error)"))
            return nil
        }
        switch connection!.write(bytes) {
        case .accepted:
            pending.add(id: id, type: body.typeName, completion: completion)
            return id
        case .backpressure:
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.backpressure, message: "the server is not reading"))
            return nil
        case .closed:
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.connectionLost, message: "the connection is closed"))
            return nil
        }
    }

    /// Never calls back re-entrantly from inside the request call.
    private func failLater(id: Int, type: String, completion: RoomRequestCompletion?, _ error: RoomRequestError) {
        loop.schedule(after: .zero) { [weak self] in
            self?.fail(id: id, type: type, completion: completion, error)
        }
    }

    func fail(id: Int, type: String, completion: RoomRequestCompletion?, _ error: RoomRequestError) {
        if let completion {
            completion(.failure(error))
        } else {
            emit(.requestFailed(RoomRequestFailure(requestID: id, request: type, error: error)))
        }
    }

    // Each request returns its id (nil when it could not be sent; the failure still arrives,
    // asynchronously, through `completion` or a `requestFailed` event).

    @discardableResult public func raiseHand(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.raiseHand, completion: completion)
    }
    @discardableResult public func lowerHand(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.lowerHand, completion: completion)
    }
    @discardableResult public func stepDown(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.stepDown, completion: completion)
    }
    @discardableResult public func acceptInvite(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.acceptInvite, completion: completion)
    }
    @discardableResult public func declineInvite(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.declineInvite, completion: completion)
    }
    /// Tells the server how many packets of each sender were lost since the previous report
    /// (`lostPermille[i]` for `ssrcs[i]`), so the senders protect their streams only when
    /// someone loses packets. A fire-and-forget event: false when not joined, or when the
    /// server takes no reports (its `welcome` had no `loss_report_interval_ms`).
    @discardableResult public func reportLoss(ssrcs: [UInt32], lostPermille: [UInt16]) -> Bool {
        guard phase == .joined, joinInfo?.lossReportIntervalMs != nil, !ssrcs.isEmpty else { return false }
        return send(SignalMessage(.lossReport(.init(ssrcs: ssrcs, lostPermille: lostPermille))))
    }

    /// Self mute. Takes effect locally at once (no packet leaves after this call when
    /// muting); the server's `participant_updated` confirms it to everyone. Remembered across
    /// reconnects.
    @discardableResult public func setMute(_ muted: Bool, completion: RoomRequestCompletion? = nil) -> Int? {
        isSelfMuted = muted
        return sendRequest(.setMute(muted: muted), completion: completion)
    }
    @discardableResult public func approve(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.approve(participantID: id), completion: completion)
    }
    @discardableResult public func deny(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.deny(participantID: id), completion: completion)
    }
    @discardableResult public func invite(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.invite(participantID: id), completion: completion)
    }
    @discardableResult public func demote(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.demote(participantID: id), completion: completion)
    }
    @discardableResult public func muteParticipant(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.muteParticipant(participantID: id), completion: completion)
    }
    @discardableResult public func kick(
        _ id: RoomParticipantID, reason: String? = nil, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.kick(participantID: id, reason: reason), completion: completion)
    }
    /// `to` nil: everyone else in the room.
    @discardableResult public func sendMessage(
        to: RoomParticipantID? = nil, data: String, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.appMessage(SignalMessage.AppMessage(to: to, data: data)), completion: completion)
    }
    /// `value` nil deletes the attribute.
    @discardableResult public func setAttribute(
        key: String, value: String?, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.setAttribute(key: key, value: value), completion: completion)
    }

    /// Replaces the token used for every later `hello`. While joined it is also sent to the
    /// server (`refresh_token`). After `disconnected(.tokenExpired)` it reconnects.
    @discardableResult public func refreshToken(_ token: String, completion: RoomRequestCompletion? = nil) -> Int? {
        configuration.token = token
        if case .disconnected(.tokenExpired) = connectionState {
            start()
            loop.schedule(after: .zero) { completion?(.success(())) }
            return nil
        }
        if phase != .joined {
            // Not joined: the new token goes into the next hello.
            loop.schedule(after: .zero) { completion?(.success(())) }
            return nil
        }
        return sendRequest(.refreshToken(token: token), completion: completion)
    }
}
