import BitchatWire
import BotCrypto
import BotStorage
public import BotSupport
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import MeshSync
import Nostr
public import SpamFilter
import Synchronization
public import Identity
public import BridgeCore

/// The coordinator's operator side: queued operator inputs, the SIGHUP policy reload, fleet moderation
/// (the fleet list kept, offered, merged into the judge, published from the console) and the console's calls
/// (release of a hidden message, store work on the bridge's connection, spam settings).
extension BridgeCoordinator {
    func handle(_ input: OperatorInput) {
        switch input {
        case .reloadPolicy(let result): reloadPolicy(result)
        case .setShadowMode(let on):
            guard router.judge.policy.isShadowMode != on else { return }
            router.setShadowMode(on)
            logger.notice(on ? "shadow mode on: the spam filter logs, hides nothing" : "shadow mode off: the spam filter hides",
                          [("shadow", .bool(on))])
        case .setDenylist(let list):
            localDenylist = list
            applyJudgeLists()
            logger.notice("denylist set", [("denylist.entries", .integer(Int64(list.entries.count)))])
        case .fleetChange(let change): publishFleetChange(change)
        case .setSpamLimits(let config):
            router.setSpamConfig(config)
            logger.notice("spam limits set", [("spam", config.jsonValue)])
        }
    }

    /// SIGHUP: installs the operator's lists read again from `policy.json` and logs what changed (keys added to
    /// and removed from each list; public keys only). A file that cannot be read or parsed fails closed:
    /// retention passes stop (``PeerIdentityCache/setOperatorLists(_:)`` with nil) and the last readable block
    /// list stays in force, so an editing mistake never unblocks anyone. Returns the change, for tests.
    @discardableResult
    public func reloadPolicy(_ result: Result<OperatorLists, OperatorLists.LoadError>) -> PolicyChange? {
        defer { refreshFromStore(force: true) }
        switch result {
        case .failure(let error):
            stores.identities.setOperatorLists(nil)
            logger.error("policy reload failed; retention passes held, the last readable block list stays in force", [
                ("error", .string(error.description)),
            ])
            return nil
        case .success(let lists):
            // Compared with the last readable lists (the ones whose block list stayed in force), not with
            // the nil of a failed reload in between.
            let change = PolicyChange(old: lastReadablePolicy ?? .empty, new: lists)
            lastReadablePolicy = lists
            stores.identities.setOperatorLists(lists)
            refreshPriorityAuthors(now: dependencies.unixNow(), force: true)
            var metadata: [(String, JSONValue)] = [
                ("policy.allow", .integer(Int64(lists.allowed.count))), ("policy.verify", .integer(Int64(lists.verified.count))),
                ("policy.block", .integer(Int64(lists.blocked.count))),
            ]
            for (name, keys) in change.listed {
                metadata.append((name, .array(keys.prefix(PolicyChange.Limits.keysLogged).map { .string($0.qualified) })))
            }
            logger.notice(change.isEmpty ? "policy reloaded; no change" : "policy reloaded", metadata)
            return change
        }
    }

    // MARK: Fleet moderation

    /// The fleet list kept in the data dir, offered as if a relay had sent it (verified, author and site checked).
    func loadKeptFleetList() {
        guard fleet != nil, let kept = stores.fleetList else { return }
        do {
            if let event = try kept.load() { offerFleetList(event, from: "kept file") }
        } catch {
            logger.warning("kept fleet list not loaded; waiting for the relays", [("error", .string(error.description))])
        }
    }

    /// Offers a verified event to the fleet state; a list now in force goes into the judge and the data dir.
    func offerFleetList(_ event: NostrEvent, from origin: String) {
        guard var state = fleet else { return }
        let outcome = state.offer(event)
        fleet = state
        guard outcome == .applied, let list = state.current else {
            logger.debug("fleet list not applied", [("outcome", .string(outcome.label)), ("event.id", .string(event.id.hex))])
            return
        }
        applyJudgeLists()
        if origin != "kept file", let kept = stores.fleetList {
            do {
                try kept.save(event)
            } catch {
                logger.warning("fleet list not kept; it applies until the bridge stops", [("error", .string(error.description))])
            }
        }
        logger.notice("fleet list applied", [
            ("fleet.from", .string(origin)), ("fleet.author", .string(String(event.pubkey.hex.prefix(16)))),
            ("fleet.created_at", .integer(event.createdAt)), ("fleet.blocked", .integer(Int64(list.blocked.count))),
            ("fleet.words", .integer(Int64(list.words.count))),
        ])
    }

    /// The judge's block list and denylist: local ∪ fleet.
    func applyJudgeLists() {
        let current = fleet?.current
        let blocked = FleetList.mergedBlocks(local: localBlocked, fleet: current)
        if blocked != router.judge.blocked { router.setBlocked(blocked) }
        let (denylist, dropped) = FleetList.mergedDenylist(local: localDenylist, fleet: current)
        fleetWordsDropped = dropped
        if denylist != router.judge.denylist { router.setDenylist(denylist) }
    }

    /// Publishes the console's block/unblock to the fleet list: the newest list with the change made, signed
    /// with the operator key, sent to the relays and applied here at once.
    private func publishFleetChange(_ change: FleetChange) {
        guard let settings = fleetSettings, let key = settings.publisher, let state = fleet else { return }
        let base = state.current ?? FleetList(site: settings.site)
        do {
            let next = try base.applying(change)
            let now = Int64(dependencies.unixNow())
            let event = try next.unsignedEvent(author: key.publicKey, now: now, replacing: state.currentEvent?.createdAt)
                .signed(with: key)
            offerFleetList(event, from: "console")
            relays.publish(event)
        } catch {
            logger.warning("fleet list not published", [("error", .string("\(error)"))])
        }
    }

    /// What became of the fleet lists offered, by outcome (for `/metrics`).
    public var fleetListOutcomes: Tally<FleetListOutcome> { fleet?.outcomes ?? Tally() }

    // MARK: Console

    /// Releases a hidden channel message (the console): through the router's normal path — channel rules with the
    /// ±900 s window, loop rules, downlink budget — the judge alone skipped. Logged; the console audits it.
    public func release(messageID: String) -> Result<Void, ReleaseError> {
        guard let event = heldHidden[messageID] else { return .failure(.notHeld(messageID)) }
        let now = dependencies.unixNow()
        switch router.release(event, now: now, random: dependencies.unitRandom()) {
        case .failure(let refusal):
            logger.notice("release refused", [("event.id", .string(messageID)), ("reason", .string(refusal.description))])
            return .failure(.refused(refusal))
        case .success:
            heldHidden[messageID] = nil
            heldOrder.removeAll { $0 == messageID }
            logger.notice("released by the operator", [("event.id", .string(messageID))])
            rescheduleTick(now: now)
            return .success(())
        }
    }

    /// Runs the operator console's store work here, on the one user of the bridge's SQLite connection (one
    /// connection per database file); nil, without running it, when the caller stopped waiting (cancelled).
    /// `reloadingBlocks`: the block list is read again right after (our own commits do not move `data_version`).
    public func operatorStoreWork<T: Sendable>(reloadingBlocks: Bool, _ body: @Sendable () -> T) -> T? {
        guard !Task.isCancelled else { return nil }
        let result = body()
        if reloadingBlocks { refreshFromStore(force: true) }
        return result
    }

    /// Whether the spam filter is in shadow mode now (the console's settings page).
    public var isShadowMode: Bool { router.judge.policy.isShadowMode }

    /// The spam filter's limits in force (the console's settings page).
    public var spamConfig: SpamFilterConfig { router.judge.policy.config }
}
