import BitchatWire
import BotCrypto
import BotStorage
public import BotSupport
import Geohash
public import IdentityCache
import Mesh
public import MeshRuntime
import ModerationLog
public import MeshSync
import Nostr
import SpamFilter
import Synchronization
import Identity
import Moderation
public import BridgeCore

/// Runs the bridge: feeds relay events, mesh actions and time into the pure ``BridgeRouter`` and performs
/// its actions (persist, publish, broadcast, mirror, record what was hidden). One actor hop per inbound
/// message; the router, the stranger cache and the stores are touched only here.
///
/// Mesh submissions leave through one ordered outbox drained by one task (never a fire-and-forget `Task`
/// per submission), so they reach the mesh node in the order the router decided them, and ``shutdown()``
/// awaits the last of them (the signed leave) before the mesh link is closed.
///
/// This file holds the coordinator's state, its start and stop, and the performing of the router's actions;
/// the intake of relay events and mesh actions is in `BridgeCoordinator+Inputs.swift`, the board and the
/// operator's notices in `+Board`, operator inputs, fleet moderation and the console's calls in `+Operator`,
/// the tick loop and the status snapshot in `+Time`, the store work and durable uplinks in `+Stores`.
public actor BridgeCoordinator {
    public struct Dependencies: Sendable {
        /// Wall-clock seconds since the Unix epoch.
        public var unixNow: @Sendable () -> Double
        /// Uniform [0, 1) for the downlink holds.
        public var unitRandom: @Sendable () -> Double
        /// Told every verdict and crossing (the console's live view); must not block (it runs on the actor).
        public var activity: (@Sendable (BridgeActivity) -> Void)?

        public init(
            unixNow: @escaping @Sendable () -> Double, unitRandom: @escaping @Sendable () -> Double,
            activity: (@Sendable (BridgeActivity) -> Void)? = nil
        ) {
            self.unixNow = unixNow
            self.unitRandom = unitRandom
            self.activity = activity
        }
    }

    /// The coordinator's own counters (the router keeps its own, ``BridgeCounters``).
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
        /// Mesh submissions dropped because the outbox was full.
        public var meshOutboxDrops = 0
    }

    /// A consistent picture of the coordinator for `/metrics` and the summary line.
    public struct Snapshot: Sendable, Equatable {
        public var router: BridgeCounters
        public var coordinator: Counters
        public var pendingDownlinks: Int
        public var queuedUplinks: Int
        public var storedUplinks: Int?
        public var uplinkStore: UplinkStore.Counters?
        public var meshPeers: Int
        public var connectedRelays: Int
        public var strangerCacheEntries: Int?
        public var identities: PeerIdentityCache.Counters
        public var moderationRecords: Int?
        public var blockedKeys: Int
        /// The sync responder's counters (requests answered and refused, replies, reply bytes).
        public var sync = SyncResponderCounters()
        /// Board packets by store outcome.
        public var boardPackets = Tally<SyncBoardOutcome>()
        /// Packets newly kept for sync (verified, and for messages passed by the judgement), by kind.
        public var syncStored = Tally<SyncStoreKind>()
        /// Failed writes of the durable sync store (it keeps serving from memory).
        public var syncWriteFailures = 0
        /// Fleet lists offered, by outcome (empty when no operator key is configured).
        public var fleetLists = Tally<FleetListOutcome>()
        /// Accepted board packets by what the Nostr side did (BOARD.md §11).
        public var boardNostr = Tally<BoardNostrOutcome>()
    }

    public enum Limits {
        /// Failed writes between two log lines: a full disk fails every write, and one line per forward
        /// would bury the log (and fill a journal on the same disk).
        public static let failureLogEvery = 100
        /// Mesh submissions waiting for the mesh node (relay verdicts, broadcasts); beyond this the newest
        /// is dropped and counted — the mesh node's own gate then withholds that message after its timeout.
        public static let meshOutbox = 4_096
        /// The longest wait between two router ticks while nothing is due (presence cadence).
        public static let maxTickWait: Double = 1
        /// Shortest wait between two ticks, so a burst of wake-ups costs at most this rate.
        public static let minTickWait: Double = 0.01
        /// Hidden channel events kept for a release from the console (the newest; older ones cannot be released,
        /// and the ±900 s window refuses them soon anyway). 1,000 events of ≤ 2 KB: a few MB at most.
        public static let maxHeldHidden = 1_000
        /// How often the priority authors are recomputed for the relay side (seconds): senders become
        /// established at most 30 a minute, so every 5 s is prompt and costs one pass over ≤ 4,096 senders.
        public static let priorityAuthorsRefresh: Double = 5
    }

    var router: BridgeRouter
    private let mesh: MeshNode
    let relays: any BridgeRelayClient
    let stores: BridgeStores
    let keys: BridgeKeys
    let channel: String?
    private let powBits: Int
    let logger: Logger
    let dependencies: Dependencies
    private let outbox: AsyncStream<MeshInput>.Continuation
    private let outboxStream: AsyncStream<MeshInput>
    /// Wakes the tick loop early (``rescheduleTick(now:)``).
    let wake = WakeSignal()
    private let operatorInputs: AsyncStream<OperatorInput>.Continuation
    private let operatorStream: AsyncStream<OperatorInput>
    /// Noise keys of verified peers, for fingerprints (the spam filter's mesh sender key).
    var peerNoiseKeys: [MeshPeerID: [UInt8]] = [:]
    /// The downlink mirror's per-author mesh identities.
    private var personas: PersonaBook
    /// Verified peers on this island announcing the gateway or the bridge capability: who shares the
    /// downlink with this bridge (``BridgeRouter/setIslandBridges(own:gateways:rendezvous:now:)``).
    var islandGateways: Set<MeshPeerID> = []
    var islandRendezvous: Set<MeshPeerID> = []
    let ownPeerID: MeshPeerID
    var connectedRelays = 0
    var counters = Counters()
    /// When the tick loop sleeps until now (Unix seconds); an input that makes work due earlier wakes it.
    var scheduledWake: Double = .infinity
    /// Set by ``shutdown()``: inbound relay events and mesh actions are ignored from then on, so no deposit
    /// can arrive after the flush and be lost with the process.
    var intakeStopped = false
    /// The operator lists last read successfully (at start or on SIGHUP), for the reload's change log.
    var lastReadablePolicy: OperatorLists?
    var lastChangeToken: Int64?
    /// The relay event being handled (so a hidden one can be held for release).
    var currentEvent: NostrEvent?
    /// Hidden channel events by id hex, for ``release(messageID:)``; bounded by ``Limits/maxHeldHidden``.
    var heldHidden: [String: NostrEvent] = [:]
    var heldOrder: [String] = []

    /// Why a release did not happen.
    public enum ReleaseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Not among the hidden channel messages this run still holds (a mesh message, an older one, or a restart).
        case notHeld(String)
        case refused(BridgeRouter.ReleaseRefusal)

        public var description: String {
            switch self {
            case .notHeld(let id): "message \(id) is not held for release (only this run's last \(Limits.maxHeldHidden) hidden channel messages are)"
            case .refused(let refusal): refusal.description
            }
        }
    }
    /// Answers the mesh's REQUEST_SYNCs from ``BridgeStores/sync`` (BOARD.md §9.4), paced by its airtime budget.
    var syncResponder: SyncResponder
    /// The relay verdict the router gave the last public message (the engine's ``MeshAction/syncStore(_:)``
    /// follows that message's ``MeshAction/publicMessage(_:)``): only a message the judgement passed is kept
    /// for sync, so the bridge never serves what it hid.
    private(set) var lastMeshVerdict: (stableID: String, relay: Bool)?
    /// What the sync side did, for the summary: board packets by outcome, stored packets, store failures.
    public internal(set) var syncBoardOutcomes = Tally<SyncBoardOutcome>()
    /// Packets newly kept for sync, by store kind.
    var syncStored = Tally<SyncStoreKind>()
    /// Accepted board packets by what the Nostr side did.
    var boardNostr = Tally<BoardNostrOutcome>()
    /// Kind-1 geohash notes the relays delivered, for §11's "author already bridged it" check.
    var boardNotes = RecentBoardNotes()
    /// Verified peers' signing keys, so a board post's author key can be traced to a mesh identity for the
    /// block list (iOS signs posts with the device's announce key, BOARD.md §4). Bounded like ``peerNoiseKeys``.
    var peerSigningKeys: [MeshPeerID: [UInt8]] = [:]
    /// The priority authors last given to the relay side, and when they were computed.
    var priorityAuthors: Set<String> = []
    var priorityAuthorsAt: Double = -.infinity
    /// Fleet moderation (issue 18): the newest fleet list of the configured operator keys, or nil when none
    /// are configured. The judge's lists are the local ones merged with it (``FleetList/mergedBlocks(local:fleet:)``).
    var fleet: FleetListState?
    let fleetSettings: FleetSettings?
    /// The bridge's own block list (identity store) and denylist (console), before the fleet's are merged in.
    var localBlocked: Set<IdentityKey>
    var localDenylist: Denylist
    /// Fleet words left out of the judge's denylist because it was full.
    var fleetWordsDropped = 0

    public init(
        router: BridgeRouter, mesh: MeshNode, relays: any BridgeRelayClient, stores: BridgeStores, keys: BridgeKeys,
        powBits: Int, logger: Logger, dependencies: Dependencies, fleet: FleetSettings? = nil,
        syncResponder: SyncResponder.Configuration = .init()
    ) {
        self.syncResponder = SyncResponder(configuration: syncResponder)
        self.fleetSettings = fleet
        self.fleet = fleet.map { FleetListState(site: $0.site, operators: $0.operators) }
        self.localBlocked = router.judge.blocked
        self.localDenylist = router.judge.denylist
        self.router = router
        self.mesh = mesh
        self.relays = relays
        self.stores = stores
        self.keys = keys
        self.personas = PersonaBook(seed: keys.nostrSeed)
        self.channel = router.settings.channel?.string
        self.ownPeerID = MeshPeerID(noisePublicKey: keys.noiseKey.publicKey)
        self.powBits = powBits
        self.logger = logger
        self.dependencies = dependencies
        self.lastReadablePolicy = stores.identities.operatorLists
        (outboxStream, outbox) = AsyncStream.makeStream(of: MeshInput.self, bufferingPolicy: .bufferingOldest(Limits.meshOutbox))
        (operatorStream, operatorInputs) = AsyncStream.makeStream(of: OperatorInput.self, bufferingPolicy: .bufferingOldest(64))
    }

    /// Queues an operator request (from a signal handler or any thread); handled in order by ``run(relayInputs:)``.
    public nonisolated func submit(_ input: OperatorInput) { operatorInputs.yield(input) }

    /// Runs until ``shutdown()`` (or cancellation): consumes `relayInputs` and the mesh node's actions, ticks
    /// the router when it has work due, keeps the moderation log trimmed. Returns once the mesh outbox is
    /// drained (after ``shutdown()``, its last entry is the signed leave).
    public func run(relayInputs: AsyncStream<BridgeRelayInput>) async {
        replayUplinks()
        loadKeptFleetList()
        refreshFromStore(force: true)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await input in relayInputs { await self.handle(input) }
            }
            group.addTask { [mesh] in
                for await action in mesh.actions { await self.handle(action) }
            }
            group.addTask { [operatorStream] in
                for await input in operatorStream { await self.handle(input) }
            }
            group.addTask { await self.tickLoop() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(60))
                    if !Task.isCancelled { await self.minutely() }
                }
            }
            // The outbox ends only at shutdown (or cancellation), after the leave: then the rest stops too.
            // Inputs ending earlier (the relay pool stopped, the mesh link gone) stop nothing.
            for await input in outboxStream { await mesh.submit(input) }
            group.cancelAll()
        }
        logSummary()
    }

    /// Graceful stop, first step: stops intake, writes the deposits the router still holds (no relay was
    /// connected) to the uplink store, queues the signed leave as the last mesh submission and closes the
    /// outbox; ``run(relayInputs:)`` returns when the mesh node has taken all of it. Returns how many uplinks
    /// are pending in the store now (logged).
    @discardableResult
    public func shutdown() -> Int {
        let pending = flushUplinks()
        submit(.sendLeave)
        outbox.finish()
        return pending
    }

    /// Wall-clock seconds as the mesh's ms.
    static func ms(_ seconds: Double) -> UInt64 { MeshPacket.timestampMs(fromSeconds: seconds) }

    // MARK: Actions

    /// Performs the router's actions in order.
    ///
    /// A `.remember` that cannot be written (SQLITE_FULL, I/O error) does **not** stop the forward that follows
    /// it. Decision (operations issue, disk full): an operator whose disk filled up wants the festival's chat
    /// to keep crossing; the in-memory loop guard still stops every repeat while this process runs, and the
    /// only cost is that a restart *during* the outage may forward the relay's replay of those few events once
    /// more (phones deduplicate by event id). Skipping would silence the bridge for as long as the disk is
    /// full — a worse failure for the people on the mesh. Each failure is counted and logged, the first and
    /// then every ``Limits/failureLogEvery``-th, so a full disk cannot flood the log.
    func perform(_ actions: [BridgeRouter.Action]) {
        if let activity = dependencies.activity { report(router.takeJudgements(), actions, to: activity) }
        // The router remembers a forwarded uplink as published right before publishing it; its own presence
        // comes without one and is not kept (re-sent on every connect anyway).
        var rememberedPublished: EventID?
        for action in actions {
            switch action {
            case .remember(let id, let role):
                if role == .published { rememberedPublished = id }
                remember(id, as: role)
            case .publish(let event):
                if rememberedPublished == event.id { keepUntilAcknowledged(event) }
                rememberedPublished = nil
                relays.publish(event)
                logger.info("published", [("event.id", .string(event.id.hex)), ("event.kind", .integer(Int64(event.kind)))])
            case .broadcast(let downlink, let id):
                broadcast(downlink, id: id)
            case .mirrorUplink(let message, let senderKey):
                mirrorUplink(message, senderKey: senderKey)
            case .meshRelay(let stableID, let relay):
                lastMeshVerdict = (stableID, relay)
                submit(.relayVerdict(stableID: stableID, relay: relay))
            case .recordHidden(let report):
                recordHidden(report)
            }
        }
    }

    /// The live view's feed: each verdict, then each crossing among `actions`.
    private func report(
        _ judgements: [BridgeRouter.Judgement], _ actions: [BridgeRouter.Action], to activity: @Sendable (BridgeActivity) -> Void
    ) {
        let now = dependencies.unixNow()
        let channel = channel ?? "mesh"
        let keepText = router.judge.settings.logText
        for j in judgements {
            let kind: BridgeActivity.Kind
            switch j.verdict {
            case .hide: kind = .hidden
            case .pass: kind = j.report?.shadow == true ? .wouldHide : .passed
            }
            let c = j.candidate
            activity(BridgeActivity(
                at: now, kind: kind, direction: c.direction, channel: channel, sender: c.senderKey, displayName: c.displayName,
                messageID: c.messageID, text: keepText ? c.text : nil, rule: j.report?.rule.label, figures: j.report?.record?.figures ?? .null))
        }
        var remembered: EventID?
        for action in actions {
            switch action {
            case .remember(let id, let role) where role == .published: remembered = id
            case .publish(let event) where event.id == remembered:
                activity(BridgeActivity(
                    at: now, kind: .published, direction: .meshToNostr, channel: channel, sender: event.pubkey.hex,
                    displayName: nil, messageID: event.id.hex, text: nil, rule: nil))
            case .broadcast(_, let id):
                activity(BridgeActivity(
                    at: now, kind: .downlinked, direction: .nostrToMesh, channel: channel, sender: "", displayName: nil,
                    messageID: id.hex, text: nil, rule: nil))
            default: break
            }
        }
    }

    func submit(_ input: MeshInput) {
        if case .dropped = outbox.yield(input) { counters.meshOutboxDrops += 1 }
    }

    func remember(_ id: EventID, as role: RecentEventStore.Role) {
        do {
            try stores.recent.record(id.bytes, as: role)
        } catch {
            failed(\.failedPersists, "cannot record a forwarded event; forwarding it anyway (a restart now could repeat it)",
                   error, id: id)
        }
    }

    /// The log line of every hidden message and, for spam verdicts, its moderation-log row. A row that cannot
    /// be written is reported and counted; the message stays hidden (hiding never depends on the log).
    private func recordHidden(_ report: HiddenReport) {
        let candidate = report.candidate
        if !report.shadow, candidate.direction == .nostrToMesh, let event = currentEvent, event.id.hex == candidate.messageID,
            heldHidden[candidate.messageID] == nil
        {
            heldHidden[candidate.messageID] = event
            heldOrder.append(candidate.messageID)
            if heldOrder.count > Limits.maxHeldHidden { heldHidden[heldOrder.removeFirst()] = nil }
        }
        var metadata: [(String, JSONValue)] = [
            ("hidden.rule", .string(report.rule.label)), ("hidden.direction", .string(candidate.direction.rawValue)),
            ("hidden.sender", .string(candidate.senderKey)), ("hidden.message", .string(candidate.messageID)),
            ("hidden.shadow", .bool(report.shadow)),
        ]
        if let name = candidate.displayName { metadata.append(("hidden.name", .string(name))) }
        if router.judge.settings.logText { metadata.append(("hidden.text", .string(String(candidate.text.prefix(120))))) }
        if let record = report.record, let log = stores.moderationLog {
            do {
                try log.append(record)
            } catch {
                failed(\.failedModerationWrites, "moderation log write failed; the message is still hidden", error, id: nil)
            }
        }
        logger.notice(report.shadow ? "would hide (shadow mode)" : "hidden", metadata)
    }

    private func broadcast(_ downlink: BridgeRouter.Downlink, id: EventID) {
        let now = UInt64(dependencies.unixNow() * 1000)
        switch downlink {
        case .carrier(let payload):
            guard let bytes = try? payload.encode() else {
                logger.warning("carrier could not be encoded", [("event.id", .string(id.hex))])
                return
            }
            // Packet-signed with the bridge's announced key (issue 16 part 4): phones that check carriers
            // (Android's open PR #770 requires a signature on every carrier, broadcasts included) accept it;
            // iOS ignores the signature of a broadcast carrier and relies on the Nostr one (MESH-WIRE §4.2).
            let packet = MeshPacket(type: .nostrCarrier, timestamp: now, sender: ownPeerID, payload: bytes)
            submit(.originate(packet, sign: true))
            logger.info("downlinked", [
                ("event.id", .string(id.hex)), ("carrier.direction", .string(payload.direction.name)),
                ("carrier.geohash", .string(payload.geohash)),
            ])
        case .text(let text, let author, let name):
            do {
                let seconds = Double(now) / 1000
                let (persona, announce) = try personas.persona(author: author, name: name, now: seconds)
                if announce {
                    submit(.originateSigned(try PersonaBook.announce(persona, at: now)))
                    personas.announced(persona, now: seconds)
                }
                submit(.originateSigned(try PersonaBook.message(persona, text: text, at: now)))
                logger.info("mirrored to mesh", [("event.id", .string(id.hex)), ("mesh.persona", .string(persona.peerID.hex))])
            } catch {
                logger.warning("mirror to mesh failed: persona keys", [("event.id", .string(id.hex)), ("error", .string("\(error)"))])
            }
        }
    }

    /// The opt-in uplink mirror: the public mesh message becomes a channel event signed by a key derived
    /// for its author (`mesh|<fingerprint>|<geohash>`), `n` = `<nickname>@mesh`, mined to the configured
    /// target. Mining 16 bits costs ~65,000 hashes (tens of ms) on this actor; higher targets are capped
    /// by the configuration (≤ 32).
    private func mirrorUplink(_ message: MeshPublicMessage, senderKey: String) {
        guard let channel else { return }
        do {
            let key = try NostrKeyDerivation.secretKey(
                seed: keys.nostrSeed, label: NostrKeyDerivation.mirrorAuthorLabel(fingerprint: senderKey, geohash: channel))
            let unsigned = UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(dependencies.unixNow()), kind: NostrKind.ephemeralChat,
                tags: [["g", channel], ["n", message.nickname + "@mesh"]], content: message.text)
            let mined = try NostrPoW.mine(unsigned, target: powBits)
            let event = try mined.event.signed(with: key)
            router.recordOwnPublication(event.id)
            remember(event.id, as: .published)
            keepUntilAcknowledged(event)
            relays.publish(event)
        } catch {
            logger.warning("mirror uplink failed", [("error", .string("\(error)"))])
        }
    }
}
