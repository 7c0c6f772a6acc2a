import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Geohash
import IdentityCache
import Mesh
import ModerationLog
public import MeshSync
import Nostr
import SpamFilter
import Synchronization
import Identity
public import BridgeCore

/// The coordinator's time and status: the tick loop and its wake-ups, the priority authors refreshed on
/// ticks, the minutely retention pass, and the counters, snapshot and summary line for `/metrics` and the log.
extension BridgeCoordinator {
    // MARK: Time

    /// Sleeps until the router has work due (a downlink hold ends, the budget frees up, presence), woken
    /// early when an input brings that moment forward; never longer than ``Limits/maxTickWait``.
    func tickLoop() async {
        while !Task.isCancelled {
            let wait = tick()
            guard wait > 0 else { continue }
            await sleepOrWake(seconds: wait)
        }
    }

    private nonisolated func sleepOrWake(seconds: Double) async {
        await wake.wait(atMost: .milliseconds(Int64(seconds * 1000)))
    }

    /// Periodic work; returns seconds until the router wants the next tick.
    private func tick() -> Double {
        let now = dependencies.unixNow()
        refreshFromStore(force: false)
        perform(router.tick(now: now))
        refreshPriorityAuthors(now: now, force: false)
        let next = min(router.nextWake(now: now), now + Limits.maxTickWait)
        scheduledWake = max(next, now + Limits.minTickWait)
        return scheduledWake - now
    }

    /// Wakes the tick loop when the router now wants a tick earlier than the loop planned.
    func rescheduleTick(now: Double) {
        if router.nextWake(now: now) < scheduledWake - Limits.minTickWait { wake.signal() }
    }

    /// Established senders and the operator's allowed and verified Nostr keys go to the relay side, which
    /// verifies their events first once a relay's budget is spent (``BridgeRelayClient/setPriorityAuthors(_:)``).
    func refreshPriorityAuthors(now: Double, force: Bool) {
        guard force || now - priorityAuthorsAt >= Limits.priorityAuthorsRefresh else { return }
        priorityAuthorsAt = now
        var authors = router.establishedAuthors(now: now)
        if let lists = lastReadablePolicy {
            for key in lists.allowed.union(lists.verified) where key.kind == .nostr { authors.insert(key.hex) }
        }
        guard authors != priorityAuthors else { return }
        priorityAuthors = authors
        relays.setPriorityAuthors(authors)
    }

    func minutely() {
        let now = dependencies.unixNow()
        do {
            _ = try stores.moderationLog?.prune(now: now)
        } catch {
            failed(\.failedModerationWrites, "moderation log retention failed", error, id: nil)
        }
        logSummary()
    }

    // MARK: Observability

    /// The router's counters, for tests.
    public var routerCounters: BridgeCounters { router.counters }

    public var pendingDownlinks: Int { router.pendingDownlinks }

    /// The sync responder's counters (refusals by reason, replies, reply bytes).
    public var syncResponderCounters: SyncResponderCounters { syncResponder.counters }

    public func snapshot() -> Snapshot {
        Snapshot(
            router: router.counters, coordinator: counters, pendingDownlinks: router.pendingDownlinks,
            queuedUplinks: router.queuedUplinks, storedUplinks: try? stores.uplinks?.count(),
            uplinkStore: stores.uplinks?.counters, meshPeers: peerNoiseKeys.count, connectedRelays: connectedRelays,
            strangerCacheEntries: stores.identities.strangerCount, identities: stores.identities.counters,
            moderationRecords: try? stores.moderationLog?.count(), blockedKeys: router.judge.blocked.count,
            sync: syncResponder.counters, boardPackets: syncBoardOutcomes, syncStored: syncStored,
            syncWriteFailures: (stores.sync as? any SyncStoreWriteFailures)?.failedWrites ?? 0,
            fleetLists: fleet?.outcomes ?? Tally(), boardNostr: boardNostr)
    }

    func logSummary() {
        let c = router.counters
        logger.notice("summary", [
            ("forwarded.nostr_to_mesh", .integer(Int64(c.forwarded(.nostrToMesh)))),
            ("forwarded.mesh_to_nostr", .integer(Int64(c.forwarded(.meshToNostr)))),
            ("hidden.nostr_to_mesh", .integer(Int64(c.hidden(.nostrToMesh)))),
            ("hidden.mesh_to_nostr", .integer(Int64(c.hidden(.meshToNostr)))),
            ("relays.connected", .integer(Int64(connectedRelays))),
            ("mesh.peers", .integer(Int64(peerNoiseKeys.count))),
            ("downlinks.pending", .integer(Int64(router.pendingDownlinks))),
        ])
    }
}
