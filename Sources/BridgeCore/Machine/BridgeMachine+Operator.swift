import BotCrypto
import BotSupport
public import Identity
import Nostr
import SpamFilter

/// The machine's operator side: the console's and the signals' inputs (shadow mode, denylist, spam limits, the
/// policy file read again), the block list read again, fleet moderation (lists offered, merged into the judge,
/// the console's changes published), the release of a hidden message, and the priority authors.
extension BridgeMachine {
    mutating func operatorInput(_ input: OperatorInput, now: Double) -> [Action] {
        switch input {
        case .reloadPolicy(let result): return reloadPolicy(result, now: now).actions
        case .setShadowMode(let on):
            guard router.judge.policy.isShadowMode != on else { return [] }
            router.setShadowMode(on)
            return [.log(LogLine(.notice, on ? "shadow mode on: the spam filter logs, hides nothing" : "shadow mode off: the spam filter hides",
                                 [("shadow", .bool(on))]))]
        case .setDenylist(let list, let by):
            // The keywords added and removed become the site's word records (regular expressions stay this stage's).
            let before = Set(localDenylist.keywords), after = Set(list.keywords)
            localDenylist = list
            applyJudgeLists()
            var actions: [Action] = [.log(LogLine(.notice, "denylist set", [("denylist.entries", .integer(Int64(list.entries.count)))]))]
            for term in after.subtracting(before).sorted() { actions += siteWord(term, on: true, by: by, now: now) }
            for term in before.subtracting(after).sorted() { actions += siteWord(term, on: false, by: by, now: now) }
            return actions
        case .fleetChange(let change): return publishFleetChange(change, now: now)
        case .site(let target, let on, let by): return siteAction(target, on: on, by: by, now: now)
        case .setSpamLimits(let config):
            router.setSpamConfig(config)
            return [.log(LogLine(.notice, "spam limits set", [("spam", config.jsonValue)]))]
        }
    }

    /// The policy file read again (SIGHUP). A file that cannot be read or parsed fails closed: the last readable
    /// lists stay in force (the executor holds retention passes and keeps the block list), so an editing mistake
    /// never unblocks anyone. The change is against the last readable lists, not the failed read in between.
    public mutating func reloadPolicy(
        _ result: Result<OperatorLists, OperatorLists.LoadError>, now: Double
    ) -> (change: PolicyChange?, actions: [Action]) {
        switch result {
        case .failure(let error):
            return (nil, [.log(LogLine(.error, "policy reload failed; retention passes held, the last readable block list stays in force", [
                ("error", .string(error.description)),
            ]))])
        case .success(let lists):
            let change = PolicyChange(old: operatorLists ?? .empty, new: lists)
            operatorLists = lists
            priorityDirty = true
            var metadata: [(String, JSONValue)] = [
                ("policy.allow", .integer(Int64(lists.allowed.count))), ("policy.verify", .integer(Int64(lists.verified.count))),
                ("policy.block", .integer(Int64(lists.blocked.count))),
            ]
            for (name, keys) in change.listed {
                metadata.append((name, .array(keys.prefix(PolicyChange.Limits.keysLogged).map { .string($0.qualified) })))
            }
            let line = LogLine(.notice, change.isEmpty ? "policy reloaded; no change" : "policy reloaded", metadata)
            return (change, [.log(line)] + refreshPriorityAuthors(now: now))
        }
    }

    /// The identity store's block list and staff (the policy file's and the annotated rows), read again. Staff
    /// change who is a priority author (their Nostr keys are verified first under a flood).
    mutating func setLocalMarks(_ marks: OperatorMarks, log: Bool, now: Double) -> [Action] {
        let changed = marks != localMarks
        let staffChanged = marks.staff != localMarks.staff
        localMarks = marks
        applyJudgeLists()
        guard changed, log else { return [] }
        let line = LogLine(.info, "block list loaded", [
            ("block.keys", .integer(Int64(marks.blocked.count))), ("staff.keys", .integer(Int64(marks.staff.count))),
        ])
        return [.log(line)] + (staffChanged ? refreshPriorityAuthors(now: now, operatorChange: true) : [])
    }

    private mutating func siteWord(_ term: String, on: Bool, by: String, now: Double) -> [Action] {
        guard let target = try? SiteTarget.word(term: term) else { return [] }
        return siteAction(target, on: on, by: by, now: now)
    }

    /// The judge's block list and denylist (local ∪ fleet) and its staff (local only: a fleet list blocks, it
    /// does not vouch), each with the site's records in force laid over (a target's newest record sets or clears it,
    /// whatever this stage's own list says).
    mutating func applyJudgeLists() {
        let current = fleet?.current
        var blocked = FleetList.mergedBlocks(local: localMarks.blocked, fleet: current)
        var staff = localMarks.staff
        var local = localDenylist
        var siteWordsDropped = 0
        if let site {
            blocked = site.blocks.applied(to: blocked)
            staff = site.staff.applied(to: staff)
            (local, siteWordsDropped) = local.overlaying(site.words)
        }
        if blocked != router.judge.blocked { router.setBlocked(blocked) }
        if staff != router.judge.staff { router.setStaff(staff) }
        let (denylist, dropped) = FleetList.mergedDenylist(local: local, fleet: current)
        counters.fleetWordsDropped = dropped + siteWordsDropped
        if denylist != router.judge.denylist { router.setDenylist(denylist) }
    }

    // MARK: Fleet moderation

    /// Offers a verified event to the fleet state; a list now in force goes into the judge and (unless it came
    /// from the kept file) into the data directory.
    mutating func offerFleetList(_ event: NostrEvent, from origin: String, now: Double) -> [Action] {
        guard var state = fleet else { return [] }
        let outcome = state.offer(event)
        fleet = state
        guard outcome == .applied, let list = state.current else {
            return [.log(LogLine(.debug, "fleet list not applied", [("outcome", .string(outcome.label)), ("event.id", .string(event.id.hex))]))]
        }
        applyJudgeLists()
        var actions: [Action] = origin == "kept file" ? [] : [.keepFleetList(event)]
        actions.append(.log(LogLine(.notice, "fleet list applied", [
            ("fleet.from", .string(origin)), ("fleet.author", .string(String(event.pubkey.hex.prefix(16)))),
            ("fleet.created_at", .integer(event.createdAt)), ("fleet.blocked", .integer(Int64(list.blocked.count))),
            ("fleet.words", .integer(Int64(list.words.count))),
        ])))
        return actions
    }

    /// Publishes the console's block/unblock to the fleet list: the newest list with the change made, signed with
    /// the operator key, applied here at once and sent to the relays. A bridge without the key ignores it.
    private mutating func publishFleetChange(_ change: FleetChange, now: Double) -> [Action] {
        guard let settings = configuration.fleet, let key = settings.publisher, let state = fleet else { return [] }
        let base = state.current ?? FleetList(site: settings.site)
        do {
            let next = try base.applying(change)
            let event = try next.unsignedEvent(author: key.publicKey, now: Int64(now), replacing: state.currentEvent?.createdAt)
                .signed(with: key)
            return offerFleetList(event, from: "console", now: now) + [.publish(event)]
        } catch {
            return [.log(LogLine(.warning, "fleet list not published", [("error", .string("\(error)"))]))]
        }
    }

    // MARK: Release

    /// Why a release did not happen.
    public enum ReleaseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Not among the hidden messages this run still holds (an older one, a would-hide of shadow mode, a restart).
        case notHeld(String)
        case refused(BridgeRouter.ReleaseRefusal)
        /// A hidden mesh line reaches Nostr only as the bridge's mirror line, and the uplink mirror is off.
        case mirrorOff(String)

        public var description: String {
            switch self {
            case .notHeld(let id):
                "message \(id) is not held for release (only this run's last \(HeldMessages.Limits.maxHeld) hidden messages are)"
            case .refused(let refusal): refusal.description
            case .mirrorOff(let id):
                "mesh message \(id) reaches Nostr only as the bridge's mirror line, and the uplink mirror is off (text_mirror up or both)"
            }
        }
    }

    /// Releases a hidden message, either way, through the normal path with the judge alone skipped: a channel event
    /// onto the mesh (channel rules with the ±900 s window, loop rules, downlink budget), a mesh line onto Nostr as
    /// the bridge's mirror line. `by` says who released it (`console`, `cli`); the moderation log marks its rows.
    public mutating func release(messageID: String, by: String, now: Double) -> (result: Result<Void, ReleaseError>, actions: [Action]) {
        guard let item = held.item(messageID) else { return (.failure(.notHeld(messageID)), []) }
        var actions: [Action] = []
        var refused: BridgeRouter.ReleaseRefusal?
        switch item {
        case .channelEvent(let event):
            switch router.release(event, now: now, random: random.unit()) {
            case .failure(let refusal): refused = refusal
            case .success(let routed): actions += perform(routed, now: now)
            }
        case .deposit(let event, let depositor):
            switch router.releaseDeposit(event, from: depositor, now: now) {
            case .failure(let refusal): refused = refusal
            case .success(let routed): actions += perform(routed, now: now)
            }
        case .meshMessage(let message, let senderKey):
            guard router.settings.mirrorUplink, router.settings.channel != nil else { return (.failure(.mirrorOff(messageID)), []) }
            actions += mirrorUplink(message, senderKey: senderKey, now: now)
        }
        if let refused {
            return (.failure(.refused(refused)), [.log(LogLine(.notice, "release refused", [
                ("message.id", .string(messageID)), ("reason", .string(refused.description)),
            ]))])
        }
        held.forget(messageID)
        // A channel event released here is released on every stage (a site record; not for one the site released).
        if case .channelEvent = item, !by.hasPrefix("site:"), site?.released.contains(messageID) == false {
            actions += siteAction(.release(messageID), on: true, by: by, now: now)
        }
        return (.success(()), actions + [
            .released(messageID: messageID, by: by, at: now),
            .log(LogLine(.notice, "released by the operator", [("message.id", .string(messageID)), ("released.by", .string(by))])),
        ])
    }

    // MARK: Priority authors

    /// Established senders and the operator's allowed and verified Nostr keys go to the relay side, which verifies
    /// their events first once a relay's budget is spent. Computed when due (a delivery, a list change, a sender
    /// becoming established), at most every ``Limits/priorityAuthorsRefresh`` seconds; sent when changed. An operator's
    /// change (`operatorChange`: the staff marks read again) is computed at once: staff marked just before a flood
    /// must be verified first from its first second.
    mutating func refreshPriorityAuthors(now: Double, operatorChange: Bool = false) -> [Action] {
        // A sender became established since the last computation (without a delivery).
        let establishing = airtime.nextEstablishment(now: priorityComputedAt).map { $0 <= now } ?? false
        guard operatorChange || priorityDirty || establishing, operatorChange || now >= priorityComputedAt + Limits.priorityAuthorsRefresh
        else { return [] }
        priorityDirty = false
        priorityComputedAt = now
        var authors = airtime.establishedAuthors(now: now)
        let vouched = router.judge.staff.union(operatorLists?.verified ?? [])
        for key in vouched where key.kind == .nostr { authors.insert(key.hex) }
        guard authors != priorityAuthors else { return [] }
        priorityAuthors = authors
        return [.priorityAuthors(authors)]
    }
}
