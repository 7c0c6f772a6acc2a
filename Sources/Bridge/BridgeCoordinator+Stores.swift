import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import BridgeCore
import Identity
import IdentityCache
import Mesh
import MeshRuntime
import MeshSync
import Nostr

/// The coordinator's store work: what the stores hold at start, the writes the machine's actions ask for
/// (event ids, durable uplinks, moderation rows, sightings in batches, the ledger, the kept fleet list), the
/// block list and the mesh pins read again when another process changed them, the minutely upkeep, and the
/// counting and rate-limited logging of failed store operations.
extension BridgeCoordinator {
    /// The coordinator's bookkeeping of its store I/O.
    struct StoreWork {
        var counters = Counters()
        /// Sightings waiting for their batch's transaction, and when it is due.
        var sightings: [IdentitySighting] = []
        var sightingsDueMs: UInt64?
        var upkeepDueMs: UInt64 = 0
        /// The database's `data_version` at the last upkeep (the external-change backstop).
        var changeToken: Int64?
    }

    // MARK: Start

    /// What the stores hold, for the machine's start; the mesh pins go to the node.
    func restore() -> BridgeMachine.Restored {
        let now = time.nowMs()
        storeWork.upkeepDueMs = now + Limits.upkeepMs
        storeWork.changeToken = try? stores.externalChanges?.changeToken()
        var restored = BridgeMachine.Restored(operatorLists: stores.identities.operatorLists)
        restored.blocked = readBlockList()
        loadPins()
        if let journal = stores.syncJournal {
            do { restored.sync = try journal.restore(now: now) } catch {
                logger.error("cannot read the sync store; gossip sync starts empty", [("error", .string(error.description))])
            }
        }
        if let ledger = stores.boardLedger {
            do { restored.ledger = try ledger.entries(now: now) } catch {
                logger.error("cannot read the board ledger; earlier copies are not deleted by later tombstones", [("error", .string(error.description))])
            }
        }
        if machine.configuration.fleet != nil, let kept = stores.fleetList {
            do { restored.keptFleetList = try kept.load() } catch {
                logger.warning("kept fleet list not loaded; waiting for the relays", [("error", .string(error.description))])
            }
        }
        restored.pendingUplinks = pendingUplinks(now: now)
        return restored
    }

    /// The uplinks an earlier run left unacknowledged, oldest first, skipping the expired
    /// (``UplinkStore/Limits/maxAgeSeconds``); the machine publishes them again (each stays until acknowledged).
    private func pendingUplinks(now: UInt64) -> [NostrEvent] {
        guard let uplinks = stores.uplinks else { return [] }
        let before = uplinks.counters
        let events: [NostrEvent]
        do {
            events = try uplinks.pending(now: Int64(now / 1000))
        } catch {
            logger.error("cannot read the uplink store; pending uplinks of the last run are not replayed", [
                ("error", .string(error.description)),
            ])
            return []
        }
        let after = uplinks.counters
        storeWork.counters.replayedUplinks += events.count
        if !events.isEmpty || after != before {
            logger.notice("replaying pending uplinks", [
                ("uplinks.replayed", .integer(Int64(events.count))),
                ("uplinks.expired", .integer(Int64(after.expired - before.expired))),
                ("uplinks.unreadable", .integer(Int64(after.unreadable - before.unreadable))),
                ("event.ids", .array(events.prefix(PolicyChange.Limits.keysLogged).map { .string($0.id.hex) })),
            ])
        }
        return events
    }

    // MARK: Writes

    func remember(_ id: EventID, as role: RememberedRole) {
        do {
            try stores.recent.record(id.bytes, as: role)
        } catch {
            failed(\.failedPersists, "cannot record a forwarded event; forwarding it anyway (a restart now could repeat it)", error, id: id)
        }
    }

    /// Writes `event` to the uplink store before it goes to the pool; deleted again at the first `OK true`.
    func keepUntilAcknowledged(_ event: NostrEvent) {
        guard let uplinks = stores.uplinks else { return }
        do {
            let dropped = try uplinks.save(event)
            if dropped > 0 {
                logger.warning("uplink store full; oldest pending uplinks dropped", [
                    ("dropped", .integer(Int64(dropped))), ("limit", .integer(Int64(UplinkStore.Limits.maxRows))),
                ])
            }
        } catch {
            failed(\.failedUplinkWrites, "uplink store write failed; the uplink is published but would not survive a stop", error, id: event.id)
        }
    }

    /// A relay answered `OK true`: the uplink is no longer pending.
    func uplinkAcknowledged(_ id: EventID) {
        guard let uplinks = stores.uplinks else { return }
        do {
            if try uplinks.remove(id) { logger.debug("uplink acknowledged", [("event.id", .string(id.hex))]) }
        } catch {
            failed(\.failedUplinkWrites, "uplink store write failed; the uplink is published but would not survive a stop", error, id: id)
        }
    }

    /// A hidden message's moderation-log row. A row that cannot be written is reported and counted; the message
    /// stays hidden (hiding never depends on the log).
    func recordHidden(_ report: HiddenReport) {
        guard let record = report.record, let log = stores.moderationLog else { return }
        do {
            try log.append(record)
        } catch {
            failed(\.failedModerationWrites, "moderation log write failed; the message is still hidden", error, id: nil)
        }
    }

    func writeLedger(_ change: BoardLedger.Change) {
        guard let ledger = stores.boardLedger else { return }
        do {
            switch change {
            case .record(let entry, let now): try ledger.record(entry, now: now)
            case .forget(let postID): try ledger.forget(postID: postID)
            }
        } catch {
            logger.warning("board ledger write failed; a tombstone after a restart may not delete the copy", [("error", .string(error.description))])
        }
    }

    func keepFleetList(_ event: NostrEvent) {
        do {
            try stores.fleetList?.save(event)
        } catch {
            logger.warning("fleet list not kept; it applies until the bridge stops", [("error", .string(error.description))])
        }
    }

    // MARK: Sightings, in batches

    /// Queues a verified sighting; written with the others of its batch, off the routing path.
    func queueSighting(_ sighting: IdentitySighting) {
        storeWork.sightings.append(sighting)
        if storeWork.sightings.count >= Limits.sightingBatchSize { return flushSightings() }
        if storeWork.sightingsDueMs == nil { storeWork.sightingsDueMs = time.nowMs() + Limits.sightingBatchMs }
    }

    /// Writes the waiting sightings in one transaction; the mesh identities a retention pass removed lose their
    /// pins in the engine too, so each one's next announce is first contact again (STRANGER-CACHE §4).
    func flushSightings() {
        let batch = storeWork.sightings
        storeWork.sightings = []
        storeWork.sightingsDueMs = nil
        guard !batch.isEmpty else { return }
        do {
            let outcomes = try stores.identities.recordSightings(batch, now: UTCTime(millisecondsSince1970: Int64(time.nowMs())))
            let removed = outcomes.flatMap { $0.pass?.removed ?? [] }
            let forgotten = removed.filter { $0.kind == .mesh }.map { MeshPeerID(bytes: $0.bytes) }
            if !forgotten.isEmpty, !mesh.enqueue(.forgetPins(forgotten)) { storeWork.counters.meshOutboxDrops += 1 }
        } catch {
            failed(\.failedSightingWrites, "stranger cache write failed", error, id: nil)
        }
    }

    /// An announce the engine refused against a pin (a copied Noise key with another signing key): counted, kept
    /// on the identity's record for `identities`, and logged at the identity's first refusal only, so an impostor
    /// repeating its announce cannot flood the log (the count is durable: once across restarts).
    func recordPinRefusal(_ announced: MeshPin) {
        let fingerprint = Hex.encode(SHA256.hash(announced.noisePublicKey))
        do {
            // nil: no stored pin (the sighting of the live peer was not written) — counted, not logged.
            guard try stores.identities.recordPinRefusal(noiseKey: announced.noisePublicKey, now: UTCTime(millisecondsSince1970: Int64(time.nowMs()))) == 1
            else { return }
        } catch {
            failed(\.failedSightingWrites, "stranger cache write failed (pin refusal)", error, id: nil)
        }
        logger.warning(
            "announce refused: another signing key for a pinned Noise key (an impostor, or a reinstalled phone)",
            [("mesh.peer", .string(announced.peerID.hex)), ("identity.fingerprint", .string(fingerprint)),
             ("announce.nickname", .string(announced.nickname))])
    }

    // MARK: Reads after another process wrote

    /// The block list and the mesh pins read again (start, SIGHUP, the console's edits, a notification from the
    /// CLI on the control socket, the upkeep's backstop). A read that fails keeps what is in force (fail closed).
    func refreshFromStore() {
        flushSightings()
        if let blocked = readBlockList() { feed(.localBlocks(blocked)) }
        loadPins()
    }

    private func readBlockList() -> Set<IdentityKey>? {
        do {
            return try stores.identities.blockedKeys()
        } catch {
            failed(\.failedBlockListReads, "block list read failed; the last list read stays in force", error, id: nil)
            return nil
        }
    }

    /// The stranger cache's mesh pins replace the engine's loaded pins. A failed read leaves the engine's pins as
    /// they were (a pin is only ever dropped on purpose).
    private func loadPins() {
        do {
            let pins = try stores.identities.pinnedMeshRecords().compactMap { record -> MeshPin? in
                guard let pins = record.pins, let signing = try? Ed25519PublicKey(rawRepresentation: pins.signingKey) else { return nil }
                return MeshPin(noisePublicKey: pins.noiseKey, signingPublicKey: signing, nickname: record.nickname ?? "")
            }
            if !mesh.enqueue(.replacePins(pins)) { storeWork.counters.meshOutboxDrops += 1 }
        } catch {
            failed(\.failedBlockListReads, "stranger cache read failed (mesh pins); the pins held stay", error, id: nil)
        }
    }

    // MARK: Upkeep

    /// Every ``Limits/upkeepMs``: the moderation log's retention, the summary line, and the backstop for a change
    /// another process made without notifying (`data_version` moved): the block list and pins read again.
    func upkeep(now: UInt64) {
        storeWork.upkeepDueMs = now + Limits.upkeepMs
        do {
            _ = try stores.moderationLog?.prune(now: seconds(now))
        } catch {
            failed(\.failedModerationWrites, "moderation log retention failed", error, id: nil)
        }
        if let probe = stores.externalChanges, let token = try? probe.changeToken(), token != storeWork.changeToken {
            storeWork.changeToken = token
            refreshFromStore()
        }
        logSummary()
    }

    /// Counts a failed store operation and logs it, the first time and every ``Limits/failureLogEvery``-th.
    func failed(_ counter: WritableKeyPath<Counters, Int>, _ message: String, _ error: any Error, id: EventID?) {
        storeWork.counters[keyPath: counter] += 1
        let failures = storeWork.counters[keyPath: counter]
        guard failures % Limits.failureLogEvery == 1 || Limits.failureLogEvery == 1 else { return }
        var metadata: [(String, JSONValue)] = [
            ("error", .string("\(error)")), ("disk_full", .bool((error as? any StoreFailure)?.isDiskFull ?? false)),
            ("failures", .integer(Int64(failures))),
        ]
        if let id { metadata.insert(("event.id", .string(id.hex)), at: 0) }
        logger.error(message, metadata)
    }
}
