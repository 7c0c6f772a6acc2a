import BitchatWire
import BotCrypto
import BotStorage
public import BotSupport
import BridgeCore
import Courier
import Identity
import IdentityCache
import Mesh
public import MeshRuntime
import MeshSync
import Nostr

/// The bridge's store service: the one place its stores are read and written, used only on the coordinator's
/// actor (the stores are not thread-safe; one SQLite connection serves them all). It reads what the stores hold
/// at start, performs the writes the machine's actions ask for (event ids, durable uplinks, moderation rows,
/// the sync table, the ledger, the kept fleet list), writes sightings in batches off the routing path, reads the
/// block list and the mesh pins again when another process changed them, runs the minutely upkeep, and counts
/// and logs (rate-limited) every failed store operation.
///
/// `@unchecked Sendable`: owned by one ``BridgeCoordinator``, whose actor serialises every call.
public final class BridgeStoreService: @unchecked Sendable {
    public enum Limits {
        /// Failed writes between two log lines: a full disk fails every write, and one line per forward would bury
        /// the log (and fill a journal on the same disk).
        public static let failureLogEvery = 100
        /// Sightings are written in one transaction at most this long after the first of a batch (ms)…
        public static let sightingBatchMs: UInt64 = 1_000
        /// …or as soon as this many wait.
        public static let sightingBatchSize = 256
        /// The moderation log's retention, the summary line and the external-change backstop (ms).
        public static let upkeepMs: UInt64 = 60_000
    }

    /// Failed store operations by kind.
    public struct Counters: Sendable, Equatable {
        /// Event-id writes that failed (the forward went ahead).
        public var failedPersists = 0
        /// Failed writes to the pending-uplink store (the uplink is still published; only its durability is lost).
        public var failedUplinkWrites = 0
        /// Moderation-log writes that failed (the message is hidden all the same).
        public var failedModerationWrites = 0
        /// Stranger-cache writes that failed.
        public var failedSightingWrites = 0
        /// Block-list reads that failed (the last list read stays in force).
        public var failedBlockListReads = 0
        /// Uplinks replayed from the store at start.
        public var replayedUplinks = 0
        /// Mesh inputs dropped because the mesh node's queue was full.
        public var meshOutboxDrops = 0
        /// Courier store writes that failed (the mail stays in memory while this run lasts).
        public var failedCourierWrites = 0
        /// Site record writes that failed (the record applies while this run lasts; one made here is published now).
        public var failedSiteWrites = 0
    }

    public let stores: BridgeStores
    let mesh: MeshNode
    let logger: Logger
    let time: any TimeSource
    public private(set) var counters = Counters()
    /// Sightings waiting for their batch's transaction, and when it is due.
    private var sightings: [IdentitySighting] = []
    private(set) var sightingsDueMs: UInt64?
    private(set) var upkeepDueMs: UInt64 = 0
    /// The database's `data_version` at the last upkeep (the external-change backstop).
    private var changeToken: Int64?

    public init(stores: BridgeStores, mesh: MeshNode, logger: Logger, time: any TimeSource) {
        self.stores = stores
        self.mesh = mesh
        self.logger = logger
        self.time = time
    }

    /// The next store deadline: a sighting batch or the upkeep.
    var nextDeadlineMs: UInt64 { min(upkeepDueMs, sightingsDueMs ?? .max) }

    /// Hands `input` to the mesh node's queue; a full queue drops it (counted).
    func enqueue(_ input: MeshInput) {
        if !mesh.enqueue(input) { counters.meshOutboxDrops += 1 }
    }

    // MARK: Start

    /// What the stores hold, for the machine's start; the mesh pins go to the node.
    func restore(fleet: Bool, courier: CourierGateway.Configuration? = nil) -> BridgeMachine.Restored {
        let now = time.nowMs()
        upkeepDueMs = now + Limits.upkeepMs
        changeToken = try? stores.externalChanges?.changeToken()
        var restored = BridgeMachine.Restored(operatorLists: stores.identities.operatorLists)
        restored.marks = readMarks()
        if let store = stores.held {
            do { restored.held = try store.held(now: Double(now) / 1000) } catch {
                logger.error("cannot read the hidden messages kept for release; earlier hides cannot be released", [
                    ("error", .string(error.description)),
                ])
            }
        }
        if let store = stores.siteRecords {
            do { restored.siteRecords = try store.records() } catch {
                logger.error("cannot read the site records; this stage waits for the relays' copies", [("error", .string(error.description))])
            }
        }
        if let configuration = courier, let store = stores.courier {
            do { restored.courier = try store.restore(nowMs: now, seenLifetimeMs: configuration.seenLifetimeMs) } catch {
                logger.error("cannot read the courier store; held mail and taken drops of the last run are not restored", [
                    ("error", .string(error.description)),
                ])
            }
        }
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
        if fleet, let kept = stores.fleetList {
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
        counters.replayedUplinks += events.count
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

    func remember(_ ids: [[UInt8]], as role: RememberedRole) {
        do {
            try stores.recent.record(ids, as: role)
        } catch {
            failed(\.failedPersists, "cannot record what the island already has; a relay's replay after a restart may be carried again", error, id: nil)
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

    /// The release marks on a released message's moderation-log rows; a failed write is reported and counted (the
    /// message went out either way).
    func markReleased(messageID: String, by: String, at: Double) {
        do {
            try stores.moderationLog?.markReleased(messageID: messageID, at: at, by: by)
            try stores.held?.remove(messageID)
        } catch {
            failed(\.failedModerationWrites, "moderation log release mark failed; the message was released", error, id: nil)
        }
    }

    /// A site record in force, kept (replacing its target's); a failed write is counted.
    func keepSiteRecord(_ event: NostrEvent, acknowledged: Bool) {
        do {
            try stores.siteRecords?.keep(event, acknowledged: acknowledged)
        } catch {
            failed(\.failedSiteWrites, "site record not kept; it applies until the bridge stops", error, id: event.id)
        }
    }

    /// Another stage's action, a row of this stage's audit; a failed write is counted (the record applies either way).
    func auditSiteRecord(_ record: SiteRecord) {
        do {
            try stores.siteAudit?.record(record)
        } catch {
            failed(\.failedSiteWrites, "another stage's action not written to the audit; it applies all the same", error, id: record.eventID)
        }
    }

    func siteRecordAcknowledged(_ id: EventID) {
        do {
            try stores.siteRecords?.acknowledged(id)
        } catch {
            failed(\.failedSiteWrites, "site record acknowledgement not kept; a restart publishes it again", error, id: id)
        }
    }

    /// A hidden message kept for a release after a restart; a failed write is counted (it stays releasable while
    /// this run lasts).
    func keepHeld(_ item: HeldMessages.Held, at: Double) {
        do {
            try stores.held?.keep(item, at: at)
        } catch {
            failed(\.failedModerationWrites, "hidden message not kept on disk; it is releasable until the bridge stops", error, id: nil)
        }
    }

    func writeSync(_ changes: [SyncStoreChange]) { stores.syncJournal?.write(changes) }

    /// One of the courier gateway's store actions; a failure is counted and logged without the mail's identities.
    func writeCourier(_ action: CourierGateway.Action, configuration: CourierGateway.Configuration) {
        do {
            try stores.courier?.apply(action, seenLifetimeMs: configuration.seenLifetimeMs, seenCapacity: configuration.seenCapacity)
        } catch {
            failed(\.failedCourierWrites, "courier store write failed; the mail is kept in memory until the bridge stops", error, id: nil)
        }
    }

    func keepFleetList(_ event: NostrEvent) {
        do {
            try stores.fleetList?.save(event)
        } catch {
            logger.warning("fleet list not kept; it applies until the bridge stops", [("error", .string(error.description))])
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

    // MARK: Sightings, in batches

    /// Queues a verified sighting; written with the others of its batch, off the routing path.
    func queueSighting(_ sighting: IdentitySighting) {
        sightings.append(sighting)
        if sightings.count >= Limits.sightingBatchSize { return flushSightings() }
        if sightingsDueMs == nil { sightingsDueMs = time.nowMs() + Limits.sightingBatchMs }
    }

    /// Writes the waiting sightings in one transaction; the mesh identities a retention pass removed lose their
    /// pins in the engine too, so each one's next announce is first contact again (STRANGER-CACHE §4).
    func flushSightings() {
        let batch = sightings
        sightings = []
        sightingsDueMs = nil
        guard !batch.isEmpty else { return }
        do {
            let outcomes = try stores.identities.recordSightings(batch, now: UTCTime(millisecondsSince1970: Int64(time.nowMs())))
            let removed = outcomes.flatMap { $0.pass?.removed ?? [] }
            let forgotten = removed.filter { $0.kind == .mesh }.map { MeshPeerID(bytes: $0.bytes) }
            if !forgotten.isEmpty { enqueue(.forgetPins(forgotten)) }
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

    /// The block list and the mesh pins read again (SIGHUP, the console's edits, a notification from the CLI on
    /// the control socket, the upkeep's backstop): the pins go to the node, the block list (nil when the read
    /// failed: what is in force stays, fail closed) to the machine.
    func reread() -> OperatorMarks? {
        flushSightings()
        loadPins()
        return readMarks()
    }

    private func readMarks() -> OperatorMarks? {
        do {
            let marks = try stores.identities.operatorMarks()
            return OperatorMarks(blocked: marks.blocked, staff: marks.allowed)
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
            enqueue(.replacePins(pins))
        } catch {
            failed(\.failedBlockListReads, "stranger cache read failed (mesh pins); the pins held stay", error, id: nil)
        }
    }

    // MARK: Upkeep

    /// Every ``Limits/upkeepMs``: the moderation log's retention, and the backstop for a change another process
    /// made without notifying. True when `data_version` moved (the caller reads the block list and pins again).
    func upkeep(now: UInt64) -> Bool {
        upkeepDueMs = now + Limits.upkeepMs
        do {
            _ = try stores.moderationLog?.prune(now: Double(now) / 1000)
        } catch {
            failed(\.failedModerationWrites, "moderation log retention failed", error, id: nil)
        }
        guard let probe = stores.externalChanges, let token = try? probe.changeToken(), token != changeToken else { return false }
        changeToken = token
        return true
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
}
