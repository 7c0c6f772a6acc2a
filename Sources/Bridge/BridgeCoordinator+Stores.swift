import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import MeshSync
import Nostr
import SpamFilter
import Synchronization
import Identity
import BridgeCore

/// The coordinator's store work: the block list and mesh pins read from the identity store, sightings and
/// pin refusals written to it, the durable uplinks (kept until acknowledged, replayed at start, flushed at
/// stop), and the counting and rate-limited logging of failed store operations.
extension BridgeCoordinator {
    // MARK: Judgement data

    /// Reloads the block list into the router, and the mesh pins into the engine, when the database may have
    /// changed under us (another process wrote it: `identities block` or `forget` from the CLI), or when
    /// `force`d (start, SIGHUP). A read that fails keeps the list in force (fail closed) and is counted and logged.
    func refreshFromStore(force: Bool) {
        if !force, let probe = stores.externalChanges {
            guard let token = try? probe.changeToken(), token != lastChangeToken else { return }
            lastChangeToken = token
        } else if let probe = stores.externalChanges {
            lastChangeToken = try? probe.changeToken()
        }
        do {
            let blocked = try stores.identities.blockedKeys()
            let changed = blocked != localBlocked
            localBlocked = blocked
            applyJudgeLists()
            if changed {
                logger.info("block list loaded", [("block.keys", .integer(Int64(blocked.count)))])
            }
        } catch {
            failed(\.failedBlockListReads, "block list read failed; the last list read stays in force", error, id: nil)
        }
        // The pins are read again only when the file changed under us (or on start and SIGHUP): a store no
        // other process can write reaches the engine through this bridge's own sightings, and re-reading every
        // pinned record on each tick would cost thousands of rows a second for nothing.
        if force || stores.externalChanges != nil { loadPins() }
    }

    /// Records a verified sighting; the mesh identities a retention pass removed lose their pins in the
    /// engine too, so each one's next announce is first contact again (STRANGER-CACHE §4).
    func recordSighting(_ sighting: PeerIdentityCache.Sighting?) {
        guard let sighting else { return }
        do {
            let outcome = try stores.identities.recordSighting(sighting, now: utcNow())
            let forgotten = (outcome.pass?.removed ?? []).filter { $0.kind == .mesh }.map { MeshPeerID(bytes: $0.bytes) }
            if !forgotten.isEmpty { submit(.forgetPins(forgotten)) }
        } catch {
            failed(\.failedSightingWrites, "stranger cache write failed", error, id: nil)
        }
    }

    /// An announce the engine refused against a pin (a copied Noise key with another signing key): counted,
    /// kept on the identity's record for `identities`, and logged at the identity's first refusal only, so
    /// an impostor repeating its announce cannot flood the log (the count is durable: once across restarts).
    func recordPinRefusal(_ announced: MeshPin) {
        let fingerprint = Hex.encode(SHA256.hash(announced.noisePublicKey))
        do {
            // nil: no stored pin (the sighting of the live peer was not written) — counted, not logged.
            guard try stores.identities.recordPinRefusal(noiseKey: announced.noisePublicKey, now: utcNow()) == 1 else { return }
        } catch {
            failed(\.failedSightingWrites, "stranger cache write failed (pin refusal)", error, id: nil)
        }
        logger.warning(
            "announce refused: another signing key for a pinned Noise key (an impostor, or a reinstalled phone)",
            [("mesh.peer", .string(announced.peerID.hex)), ("identity.fingerprint", .string(fingerprint)),
             ("announce.nickname", .string(announced.nickname))])
    }

    /// The mesh pins of the stranger cache replace the engine's loaded pins (at start, and after another
    /// process changed the cache: `identities forget`, a wipe). A failed read leaves the engine's pins as
    /// they were (fail closed: a pin is only ever dropped on purpose).
    private func loadPins() {
        do {
            let pins = try stores.identities.pinnedMeshRecords().compactMap { record -> MeshPin? in
                guard let pins = record.pins, let signing = try? Ed25519PublicKey(rawRepresentation: pins.signingKey) else {
                    return nil
                }
                return MeshPin(noisePublicKey: pins.noiseKey, signingPublicKey: signing, nickname: record.nickname ?? "")
            }
            submit(.replacePins(pins))
        } catch {
            failed(\.failedBlockListReads, "stranger cache read failed (mesh pins); the pins held stay", error, id: nil)
        }
    }

    private func utcNow() -> UTCTime { UTCTime(millisecondsSince1970: Int64(dependencies.unixNow() * 1000)) }

    // MARK: Durable uplinks

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
            failed(\.failedUplinkWrites, "uplink store write failed; the uplink is published but would not survive a stop",
                   error, id: event.id)
        }
    }

    /// Counts a failed store operation and logs it, the first time and every ``Limits/failureLogEvery``-th.
    func failed(_ counter: WritableKeyPath<Counters, Int>, _ message: String, _ error: any Error, id: EventID?) {
        counters[keyPath: counter] += 1
        let failures = counters[keyPath: counter]
        guard failures % Limits.failureLogEvery == 1 || Limits.failureLogEvery == 1 else { return }
        var metadata: [(String, JSONValue)] = [
            ("error", .string("\(error)")), ("disk_full", .bool((error as? any StoreFailure)?.isDiskFull ?? false)),
            ("failures", .integer(Int64(failures))),
        ]
        if let id { metadata.insert(("event.id", .string(id.hex)), at: 0) }
        logger.error(message, metadata)
    }

    /// Start: publishes the uplinks an earlier run left unacknowledged, oldest first, skipping the expired
    /// (``UplinkStore/Limits/maxAgeSeconds``). The pool sends them as relays connect (or queues them, within
    /// its per-relay bound); each stays in the store until a relay acknowledges it.
    func replayUplinks() {
        guard let uplinks = stores.uplinks else { return }
        let before = uplinks.counters
        let events: [NostrEvent]
        do {
            events = try uplinks.pending(now: Int64(dependencies.unixNow()))
        } catch {
            logger.error("cannot read the uplink store; pending uplinks of the last run are not replayed", [
                ("error", .string(error.description)),
            ])
            return
        }
        let after = uplinks.counters
        for event in events {
            router.recordOwnPublication(event.id)
            remember(event.id, as: .published)
            relays.publish(event)
        }
        counters.replayedUplinks += events.count
        if !events.isEmpty || after != before {
            logger.notice("replaying pending uplinks", [
                ("uplinks.replayed", .integer(Int64(events.count))),
                ("uplinks.expired", .integer(Int64(after.expired - before.expired))),
                ("uplinks.unreadable", .integer(Int64(after.unreadable - before.unreadable))),
                ("event.ids", .array(events.prefix(PolicyChange.Limits.keysLogged).map { .string($0.id.hex) })),
            ])
        }
    }

    /// Stops intake, then writes the deposits the router still holds (no relay was connected) to the store;
    /// the uplinks already handed to the pool are there since then. Returns how many uplinks are pending in
    /// the store now (logged).
    func flushUplinks() -> Int {
        intakeStopped = true
        let held = router.drainQueuedUplinks()
        guard let uplinks = stores.uplinks else {
            if !held.isEmpty { logger.warning("no uplink store; held deposits are lost", [("uplinks", .integer(Int64(held.count)))]) }
            return 0
        }
        for event in held {
            remember(event.id, as: .published)
            keepUntilAcknowledged(event)
        }
        let pending = (try? uplinks.count()) ?? -1
        logger.notice("pending uplinks flushed to the queue store", [
            ("uplinks.held", .integer(Int64(held.count))), ("uplinks.pending", .integer(Int64(pending))),
        ])
        return pending
    }
}
