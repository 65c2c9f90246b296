// Active-speaker selection and the forwarded set (docs/room-semantics.md, "Active speakers").

extension Room {
    /// Picks the active speakers among participants that may publish, at most `topN`:
    /// 1. a speaker silent for longer than the hold time leaves the set;
    /// 2. free places go to the loudest participants that are talking now;
    /// 3. a talking participant outside the set replaces the weakest member only when it is
    ///    louder by `speakerHysteresisDB` and that member has been in the set for at least
    ///    the hold time.
    /// 4. under contention, turns (`takeTurns`).
    /// The loudness used is the smoothed level while talking, and 0 after `voiceWindowMs`
    /// without a voiced report (a held, silent speaker is the first to go).
    mutating func selectSpeakers(now: RoomInstant) {
        let hold = config.speakerHoldMs
        active = active.filter { id in
            let m = members[id]!
            guard m.mayPublish, let voiced = m.lastVoicedAt else { return false }
            return now - voiced <= hold || now - (m.activeSince ?? now) < hold
        }
        // Left the set: forget when it entered.
        for id in order where !active.contains(id) && members[id]!.activeSince != nil {
            members[id]!.activeSince = nil
        }

        // A pause ends what a turn took: the publisher competes by its level again.
        for id in order where members[id]!.turnTaken && !isTalking(members[id]!, now: now) {
            members[id]!.turnTaken = false
        }

        // Talking publishers outside the set, loudest first (ties: join order).
        let candidates = order.enumerated()
            .filter { let m = members[$0.element]!; return m.mayPublish && !active.contains(m.id) && isTalking(m, now: now) }
            .map { (id: $0.element, rank: $0.offset, score: score(members[$0.element]!, now: now)) }
            .sorted { $0.score != $1.score ? $0.score > $1.score : $0.rank < $1.rank }
            .map(\.id)

        var next = 0
        while active.count < config.topN && next < candidates.count {
            let id = candidates[next]
            active.append(id)
            members[id]!.activeSince = now
            members[id]!.turnTaken = false
            next += 1
        }
        // Outside the set, those that lost their place to a turn wait for their own.
        let byLevel = candidates.filter { !active.contains($0) && !members[$0]!.turnTaken }
        var nextByLevel = 0
        while nextByLevel < byLevel.count {
            let challenger = byLevel[nextByLevel]
            // The weakest member that has had its minimum time (ties: the one that entered last).
            var weakest: Int?
            for (i, id) in active.enumerated() {
                let m = members[id]!
                guard now - (m.activeSince ?? now) >= hold else { continue }
                if let w = weakest {
                    let wm = members[active[w]]!
                    let s = score(m, now: now), ws = score(wm, now: now)
                    if s < ws || (s == ws && (m.activeSince ?? 0) > (wm.activeSince ?? 0)) { weakest = i }
                } else {
                    weakest = i
                }
            }
            guard let w = weakest,
                  score(members[challenger]!, now: now) >= score(members[active[w]]!, now: now) + config.speakerHysteresisDB
            else { break }
            members[active[w]]!.activeSince = nil
            active[w] = challenger
            members[challenger]!.activeSince = now
            nextByLevel += 1
        }
        takeTurns(now: now)
        // Loudest first (stable, so ties keep their current order).
        let scores = active.map { score(members[$0]!, now: now) }
        active = zip(active, scores).enumerated()
            .sorted { $0.element.1 > $1.element.1 || ($0.element.1 == $1.element.1 && $0.offset < $1.offset) }
            .map { $0.element.0 }
    }

    /// Turns under contention (`RoomConfig.speakerTurnMs`): the publisher that has waited
    /// longest, once it has waited a turn, replaces the speaker that has held its place longest,
    /// once that one has held it a turn. Levels decide who is heard first, turns bound how long
    /// a level — a claim the server cannot check — keeps anyone else out. Whoever loses its
    /// place this way while still talking waits for its own turn (or a free place, or a pause)
    /// rather than coming straight back by its claimed level.
    mutating func takeTurns(now: RoomInstant) {
        let turn = config.speakerTurnMs
        let full = active.count >= config.topN
        for id in order {
            let m = members[id]!
            let waits = full && m.mayPublish && !active.contains(id) && isTalking(m, now: now)
            if !waits { members[id]!.waitingSince = nil } else if m.waitingSince == nil { members[id]!.waitingSince = now }
        }
        guard turn > 0 else { return }
        let due = order.filter { id in members[id]!.waitingSince.map { now - $0 >= turn } ?? false }
            .sorted { members[$0]!.waitingSince! < members[$1]!.waitingSince! }
        for challenger in due {
            guard let w = active.indices
                .filter({ now - (members[active[$0]]!.activeSince ?? now) >= turn })
                .min(by: { members[active[$0]]!.activeSince! < members[active[$1]]!.activeSince! })
            else { return }
            let holder = active[w]
            members[holder]!.activeSince = nil
            members[holder]!.turnTaken = isTalking(members[holder]!, now: now)
            members[holder]!.waitingSince = members[holder]!.turnTaken ? now : nil
            active[w] = challenger
            members[challenger]!.activeSince = now
            members[challenger]!.waitingSince = nil
            members[challenger]!.turnTaken = false
        }
    }

    func isTalking(_ m: Member, now: RoomInstant) -> Bool {
        guard let voiced = m.lastVoicedAt else { return false }
        return now - voiced <= config.voiceWindowMs
    }

    func score(_ m: Member, now: RoomInstant) -> Double { isTalking(m, now: now) ? m.level : 0 }

    /// Brings `forwarded` in line: only participants that may publish, every active speaker,
    /// and free places (up to `topN`) filled with the other publishers — most recently
    /// voiced first, then join order — so that with `topN` or fewer publishers everyone on
    /// stage is heard from its first word. Fillers make room for active speakers; nothing
    /// else changes between selections, so the set does not flap.
    mutating func updateForwarding(out: inout Effects) {
        let old = forwarded
        var f = forwarded.filter { members[$0]?.mayPublish ?? false }
        for a in active where !f.contains(a) {
            if f.count >= config.topN {
                // Evict the filler heard least recently (never voiced first; ties: joined last).
                let fillers = f.filter { !active.contains($0) }
                let victim = fillers.min { lhs, rhs in
                    let l = members[lhs]!.lastVoicedAt ?? .min, r = members[rhs]!.lastVoicedAt ?? .min
                    if l != r { return l < r }
                    return order.firstIndex(of: lhs)! > order.firstIndex(of: rhs)!
                }!
                f.removeAll { $0 == victim }
            }
            f.append(a)
        }
        if f.count < config.topN {
            let others = order.enumerated()
                .filter { members[$0.element]!.mayPublish && !f.contains($0.element) }
                .sorted { lhs, rhs in
                    let l = members[lhs.element]!.lastVoicedAt ?? .min, r = members[rhs.element]!.lastVoicedAt ?? .min
                    return l != r ? l > r : lhs.offset < rhs.offset
                }
                .map(\.element)
            f.append(contentsOf: others.prefix(config.topN - f.count))
        }
        forwarded = f
        for id in old where !f.contains(id) { out.list.append(.forwardMedia(id, false)) }
        for id in f where !old.contains(id) { out.list.append(.forwardMedia(id, true)) }
    }
}
