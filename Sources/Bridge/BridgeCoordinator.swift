import BitchatWire
import BotCrypto
import BotStorage
public import BotSupport
import Geohash
public import IdentityCache
public import Mesh
public import Nostr

/// What the bridge needs from the relay side (the executable adapts the live relay pool to it), so this
/// module never touches sockets.
public protocol BridgeRelayClient: Sendable {
    func publish(_ event: NostrEvent)
}

/// Inbound relay traffic, already verified by the pool (structure, verification budget, signature).
public enum BridgeRelayInput: Sendable {
    case event(NostrEvent)
    /// How many relays are connected now.
    case connectedRelays(Int)
    /// A relay answered `OK true` for this event (stored, or `duplicate:`): it is no longer a pending uplink.
    case accepted(EventID)
}

/// Decides whether a message may cross: block list, spam filter, moderation log. Owned by the coordinator
/// and called only from it (so implementations need not be thread-safe).
public protocol BridgeJudgement: AnyObject {
    func judge(_ candidate: BridgeRouter.Candidate, now: Double) -> BridgeRouter.Verdict
    /// Periodic upkeep (moderation-log retention); called about once a minute.
    func maintain(now: Double)
}

/// Runs the bridge: feeds relay events, mesh actions and time into the pure ``BridgeRouter`` and performs
/// its actions (persist, publish, broadcast, mirror). One actor hop per inbound message; the router, the
/// stranger cache and the judgement are plain properties, touched only here.
public actor BridgeCoordinator {
    public struct Dependencies: Sendable {
        /// Wall-clock seconds since the Unix epoch.
        public var unixNow: @Sendable () -> Double
        /// Uniform [0, 1) for the downlink holds.
        public var unitRandom: @Sendable () -> Double

        public init(unixNow: @escaping @Sendable () -> Double, unitRandom: @escaping @Sendable () -> Double) {
            self.unixNow = unixNow
            self.unitRandom = unitRandom
        }
    }

    private var router: BridgeRouter
    private let mesh: MeshNode
    private let relays: any BridgeRelayClient
    private nonisolated(unsafe) let recent: RecentEventStore
    private nonisolated(unsafe) let identities: PeerIdentityCache
    private nonisolated(unsafe) let judgement: any BridgeJudgement
    private nonisolated(unsafe) let uplinkStore: UplinkStore?
    private let keys: BridgeKeys
    private let channel: String?
    private let powBits: Int
    private let logger: Logger
    private let dependencies: Dependencies
    /// Noise keys of verified peers, for fingerprints (the spam filter's mesh sender key).
    private var peerNoiseKeys: [MeshPeerID: [UInt8]] = [:]
    /// Bridge/gateway peers in direct range (for the downlink yield order).
    private var nearbyBridges: Set<MeshPeerID> = []
    private let ownPeerID: MeshPeerID
    private var connectedRelays = 0
    public private(set) var failedPersists = 0
    /// Failed writes to the ``UplinkStore`` (the uplink is still published; only its durability is lost).
    public private(set) var failedUplinkWrites = 0
    /// Uplinks replayed from the store at start.
    public private(set) var replayedUplinks = 0
    /// Set by ``flushUplinks()``: inbound relay events and mesh actions are ignored from then on, so no
    /// deposit can arrive after the flush and be lost with the process.
    private var intakeStopped = false
    /// The operator lists last read successfully (at start or on SIGHUP), for the reload's change log.
    private var lastReadablePolicy: OperatorLists?

    public enum Limits {
        /// Failed event-id writes between two log lines: a full disk fails every write, and one line per
        /// forward would bury the log (and fill a journal on the same disk).
        public static let persistFailureLogEvery = 100
    }

    public init(
        router: BridgeRouter, mesh: MeshNode, relays: any BridgeRelayClient, recent: RecentEventStore,
        identities: PeerIdentityCache, judgement: any BridgeJudgement, keys: BridgeKeys, powBits: Int,
        logger: Logger, dependencies: Dependencies, uplinkStore: UplinkStore? = nil
    ) {
        self.uplinkStore = uplinkStore
        self.router = router
        self.mesh = mesh
        self.relays = relays
        self.recent = recent
        self.identities = identities
        self.judgement = judgement
        self.keys = keys
        self.channel = router.settings.channel?.string
        self.ownPeerID = MeshPeerID(noisePublicKey: keys.noiseKey.publicKey)
        self.powBits = powBits
        self.logger = logger
        self.dependencies = dependencies
        self.lastReadablePolicy = identities.operatorLists
    }

    /// Runs until `relayInputs` ends, the mesh node stops, or the task is cancelled.
    public func run(relayInputs: AsyncStream<BridgeRelayInput>) async {
        replayUplinks()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await input in relayInputs { await self.handle(input) }
            }
            group.addTask { [mesh] in
                for await action in mesh.actions { await self.handle(action) }
            }
            group.addTask {
                while !Task.isCancelled {
                    let wait = await self.tick()
                    try? await Task.sleep(for: .milliseconds(Int64(max(20, min(1000, wait * 1000)))))
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(60))
                    if !Task.isCancelled { await self.minutely() }
                }
            }
            await group.next()
            group.cancelAll()
        }
        logSummary()
    }

    // MARK: Inputs

    private func handle(_ input: BridgeRelayInput) {
        let now = dependencies.unixNow()
        switch input {
        case .event(let event):
            guard !intakeStopped else { return }
            // Debug level: the soak scripts count what the relays delivered from this line.
            logger.debug("relay event", [("event.id", .string(event.id.hex))])
            recordSighting(try? .nostr(pubkey: event.pubkey.bytes, nickname: event.firstTag("n").flatMap { $0.count > 1 ? $0[1] : nil }))
            let actions = router.relayEvent(event, now: now, random: dependencies.unitRandom(), judge: judge)
            perform(actions)
        case .connectedRelays(let count):
            connectedRelays = count
            perform(router.relaysConnected(count > 0, now: now))
        case .accepted(let id):
            guard let uplinkStore else { return }
            do {
                if try uplinkStore.remove(id) { logger.debug("uplink acknowledged", [("event.id", .string(id.hex))]) }
            } catch {
                uplinkWriteFailed(error, id: id)
            }
        }
    }

    private func handle(_ action: MeshAction) {
        guard !intakeStopped else { return }
        let now = dependencies.unixNow()
        switch action {
        case .peerVerified(let peer):
            peerNoiseKeys[peer.id] = peer.noisePublicKey
            let isBridge = peer.capabilities.map { !$0.intersection([.bridge, .gateway]).isEmpty } ?? false
            if isBridge && peer.isDirect { nearbyBridges.insert(peer.id) } else { nearbyBridges.remove(peer.id) }
            router.setBridgesAhead(nearbyBridges.filter { $0 < ownPeerID }.count)
            recordSighting(
                try? .mesh(
                    noiseKey: peer.noisePublicKey, signingKey: peer.signingPublicKey.rawRepresentation,
                    peerID: peer.id.rawValue, nickname: peer.nickname))
        case .peerLost(let id, _):
            peerNoiseKeys[id] = nil
            nearbyBridges.remove(id)
            router.setBridgesAhead(nearbyBridges.filter { $0 < ownPeerID }.count)
        case .publicMessage(let message):
            let noise = peerNoiseKeys[message.sender]
            let fingerprint = noise.map { Hex.encode(SHA256.hash($0)) }
            let identity = noise.flatMap { try? IdentityKey.mesh(noiseKey: $0) }
            perform(router.meshMessage(message, senderKey: fingerprint ?? message.sender.hex, identity: identity, judge: judge))
        case .carrier(let carrier):
            perform(router.meshCarrier(carrier, now: now, judge: judge))
        case .transmit:
            break
        }
    }

    /// Periodic work; returns seconds until the router wants the next tick.
    private func tick() -> Double {
        let now = dependencies.unixNow()
        perform(router.tick(now: now))
        return router.nextWake(now: now) - now
    }

    private func judge(_ candidate: BridgeRouter.Candidate) -> BridgeRouter.Verdict {
        judgement.judge(candidate, now: dependencies.unixNow())
    }

    private func recordSighting(_ sighting: PeerIdentityCache.Sighting?) {
        guard let sighting else { return }
        let now = UTCTime(millisecondsSince1970: Int64(dependencies.unixNow() * 1000))
        do {
            _ = try identities.recordSighting(sighting, now: now)
        } catch {
            logger.warning("stranger cache write failed", [("error", .string("\(error)"))])
        }
    }

    // MARK: Actions

    /// Performs the router's actions in order.
    ///
    /// A `.remember` that cannot be written (SQLITE_FULL, I/O error) does **not** stop the forward that follows
    /// it. Decision (operations issue, disk full): an operator whose disk filled up wants the festival's chat
    /// to keep crossing; the in-memory loop guard still stops every repeat while this process runs, and the
    /// only cost is that a restart *during* the outage may forward the relay's replay of those few events once
    /// more (phones deduplicate by event id). Skipping would silence the bridge for as long as the disk is
    /// full — a worse failure for the people on the mesh. Each failure is counted (`failedPersists`, metrics)
    /// and logged, the first and then every ``Limits/persistFailureLogEvery``-th, so a full disk cannot flood
    /// the log.
    private func perform(_ actions: [BridgeRouter.Action]) {
        // The router remembers a forwarded uplink as published right before publishing it; its own presence
        // comes without one and is not kept (re-sent on every connect anyway).
        var rememberedPublished: EventID?
        for action in actions {
            switch action {
            case .remember(let id, let role):
                if role == .published { rememberedPublished = id }
                do {
                    try recent.record(id.bytes, as: role)
                } catch {
                    failedPersists += 1
                    if failedPersists % Limits.persistFailureLogEvery == 1 || Limits.persistFailureLogEvery == 1 {
                        logger.error("cannot record a forwarded event; forwarding it anyway (a restart now could repeat it)", [
                            ("event.id", .string(id.hex)), ("error", .string(error.description)),
                            ("disk_full", .bool(error.isDiskFull)), ("failures", .integer(Int64(failedPersists))),
                        ])
                    }
                }
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
                let node = mesh
                Task { await node.submit(.relayVerdict(stableID: stableID, relay: relay)) }
            }
        }
    }

    private func broadcast(_ downlink: BridgeRouter.Downlink, id: EventID) {
        let now = UInt64(dependencies.unixNow() * 1000)
        switch downlink {
        case .carrier(let payload):
            guard let bytes = try? payload.encode() else {
                logger.warning("carrier could not be encoded", [("event.id", .string(id.hex))])
                return
            }
            let packet = MeshPacket(
                type: .nostrCarrier, timestamp: now, sender: MeshPeerID(noisePublicKey: keys.noiseKey.publicKey), payload: bytes)
            let node = mesh
            Task { await node.submit(.originate(packet, sign: false)) }
            logger.info("downlinked", [
                ("event.id", .string(id.hex)), ("carrier.direction", .string(payload.direction.name)),
                ("carrier.geohash", .string(payload.geohash)),
            ])
        case .text(let text):
            let node = mesh
            Task { await node.submit(.sendPublicMessage(text)) }
            logger.info("mirrored to mesh", [("event.id", .string(id.hex))])
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
            try recent.record(event.id.bytes, as: .published)
            keepUntilAcknowledged(event)
            relays.publish(event)
        } catch {
            logger.warning("mirror uplink failed", [("error", .string("\(error)"))])
        }
    }

    // MARK: Durable uplinks

    /// Writes `event` to the ``UplinkStore`` before it goes to the pool; deleted again at the first `OK true`.
    private func keepUntilAcknowledged(_ event: NostrEvent) {
        guard let uplinkStore else { return }
        do {
            let dropped = try uplinkStore.save(event)
            if dropped > 0 {
                logger.warning("uplink store full; oldest pending uplinks dropped", [
                    ("dropped", .integer(Int64(dropped))), ("limit", .integer(Int64(UplinkStore.Limits.maxRows))),
                ])
            }
        } catch {
            uplinkWriteFailed(error, id: event.id)
        }
    }

    private func uplinkWriteFailed(_ error: SQLiteError, id: EventID) {
        failedUplinkWrites += 1
        if failedUplinkWrites % Limits.persistFailureLogEvery == 1 || Limits.persistFailureLogEvery == 1 {
            logger.error("uplink store write failed; the uplink is published but would not survive a stop", [
                ("event.id", .string(id.hex)), ("error", .string(error.description)),
                ("disk_full", .bool(error.isDiskFull)), ("failures", .integer(Int64(failedUplinkWrites))),
            ])
        }
    }

    /// Start: publishes the uplinks an earlier run left unacknowledged, oldest first, skipping the expired
    /// (``UplinkStore/Limits/maxAgeSeconds``). The pool sends them as relays connect (or queues them, within
    /// its per-relay bound); each stays in the store until a relay acknowledges it.
    private func replayUplinks() {
        guard let uplinkStore else { return }
        let before = uplinkStore.counters
        let events: [NostrEvent]
        do {
            events = try uplinkStore.pending(now: Int64(dependencies.unixNow()))
        } catch {
            logger.error("cannot read the uplink store; pending uplinks of the last run are not replayed", [
                ("error", .string(error.description)),
            ])
            return
        }
        let after = uplinkStore.counters
        for event in events {
            router.recordOwnPublication(event.id)
            try? recent.record(event.id.bytes, as: .published)
            relays.publish(event)
        }
        replayedUplinks += events.count
        if !events.isEmpty || after != before {
            logger.notice("replaying pending uplinks", [
                ("uplinks.replayed", .integer(Int64(events.count))),
                ("uplinks.expired", .integer(Int64(after.expired - before.expired))),
                ("uplinks.unreadable", .integer(Int64(after.unreadable - before.unreadable))),
                ("event.ids", .array(events.prefix(PolicyChange.Limits.keysLogged).map { .string($0.id.hex) })),
            ])
        }
    }

    /// Graceful stop: stops intake, then writes the deposits the router still holds (no relay was connected) to the store; the
    /// uplinks already handed to the pool are there since then. Returns how many uplinks are pending in the
    /// store now (logged).
    @discardableResult
    public func flushUplinks() -> Int {
        intakeStopped = true
        let held = router.drainQueuedUplinks()
        guard let uplinkStore else {
            if !held.isEmpty { logger.warning("no uplink store; held deposits are lost", [("uplinks", .integer(Int64(held.count)))]) }
            return 0
        }
        for event in held {
            try? recent.record(event.id.bytes, as: .published)
            keepUntilAcknowledged(event)
        }
        let pending = (try? uplinkStore.count()) ?? -1
        logger.notice("pending uplinks flushed to the queue store", [
            ("uplinks.held", .integer(Int64(held.count))), ("uplinks.pending", .integer(Int64(pending))),
        ])
        return pending
    }

    // MARK: Operator

    /// SIGHUP: installs the operator's lists read again from `policy.json` and logs what changed (keys added to
    /// and removed from each list; public keys only). A file that cannot be read or parsed fails closed:
    /// retention passes stop (``PeerIdentityCache/setOperatorLists(_:)`` with nil) and the last readable block
    /// list stays in force, so an editing mistake never unblocks anyone. Returns the change, for tests.
    @discardableResult
    public func reloadPolicy(_ result: Result<OperatorLists, OperatorLists.LoadError>) -> PolicyChange? {
        switch result {
        case .failure(let error):
            identities.setOperatorLists(nil)
            logger.error("policy reload failed; retention passes held, the last readable block list stays in force", [
                ("error", .string(error.description)),
            ])
            return nil
        case .success(let lists):
            // Compared with the last readable lists (the ones whose block list stayed in force), not with
            // the nil of a failed reload in between.
            let change = PolicyChange(old: lastReadablePolicy ?? .empty, new: lists)
            lastReadablePolicy = lists
            identities.setOperatorLists(lists)
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

    // MARK: Observability

    /// Counters for metrics and tests.
    public var counters: [String: Int] { router.counters }

    /// The bridge-side part of the metrics (the executable adds the relay and mesh transport figures).
    public func metrics() -> BridgeMetrics {
        var m = BridgeMetrics()
        let c = router.counters
        m.forwarded = [
            "nostr-to-mesh": c["nostr_to_mesh.broadcast"] ?? 0,
            "mesh-to-nostr": (c["mesh_to_nostr.published"] ?? 0) + (c["mesh_to_nostr.mirrored"] ?? 0),
        ]
        for (name, count) in c {
            let parts = name.split(separator: ".")
            guard parts.count == 3, parts[1] == "hidden" else { continue }
            let direction = parts[0] == "mesh_to_nostr" ? "mesh-to-nostr" : "nostr-to-mesh"
            m.hidden[.init(direction: direction, rule: String(parts[2])), default: 0] += count
        }
        m.deposits = c["deposit.accepted"] ?? 0
        m.queueDepths = ["downlink": router.pendingDownlinks, "uplink": router.queuedUplinks]
        if let stored = try? uplinkStore?.count() { m.queueDepths["uplink_store"] = stored }
        if let uplinkStore { m.queueDrops["uplink_store"] = uplinkStore.counters.dropped + uplinkStore.counters.expired }
        m.queueDrops = ["downlink": c["downlink.drop.queue_full"] ?? 0, "uplink": c["deposit.drop.queue_full"] ?? 0]
        m.meshPeers = peerNoiseKeys.count
        m.strangerCacheEntries = identities.strangerCount ?? 0
        m.strangerCacheEvictions = identities.counters.evictedByCap + identities.counters.forgottenByAge
        return m
    }
    public var pendingDownlinks: Int { router.pendingDownlinks }

    private func minutely() {
        judgement.maintain(now: dependencies.unixNow())
        logSummary()
    }

    private func logSummary() {
        let c = router.counters
        func total(_ prefix: String) -> Int { c.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +) }
        logger.notice("summary", [
            ("forwarded.nostr_to_mesh", .integer(Int64(c["nostr_to_mesh.broadcast"] ?? 0))),
            ("forwarded.mesh_to_nostr", .integer(Int64((c["mesh_to_nostr.published"] ?? 0) + (c["mesh_to_nostr.mirrored"] ?? 0)))),
            ("hidden.nostr_to_mesh", .integer(Int64(total("nostr_to_mesh.hidden.")))),
            ("hidden.mesh_to_nostr", .integer(Int64(total("mesh_to_nostr.hidden.")))),
            ("relays.connected", .integer(Int64(connectedRelays))),
            ("mesh.peers", .integer(Int64(peerNoiseKeys.count))),
            ("downlinks.pending", .integer(Int64(router.pendingDownlinks))),
        ])
    }
}

/// What a policy reload changed, list by list.
public struct PolicyChange: Equatable, Sendable {
    public enum Limits {
        /// Keys named per list in the reload's log line (the counts are always complete): a 10,000-key file
        /// must not become one enormous line.
        public static let keysLogged = 50
    }

    public var blockAdded: [IdentityKey]
    public var blockRemoved: [IdentityKey]
    public var allowAdded: [IdentityKey]
    public var allowRemoved: [IdentityKey]
    public var verifyAdded: [IdentityKey]
    public var verifyRemoved: [IdentityKey]

    public init(old: OperatorLists, new: OperatorLists) {
        func sorted(_ keys: Set<IdentityKey>) -> [IdentityKey] { keys.sorted { $0.qualified < $1.qualified } }
        blockAdded = sorted(new.blocked.subtracting(old.blocked))
        blockRemoved = sorted(old.blocked.subtracting(new.blocked))
        allowAdded = sorted(new.allowed.subtracting(old.allowed))
        allowRemoved = sorted(old.allowed.subtracting(new.allowed))
        verifyAdded = sorted(new.verified.subtracting(old.verified))
        verifyRemoved = sorted(old.verified.subtracting(new.verified))
    }

    public var isEmpty: Bool { listed.isEmpty }

    /// Non-empty changes as (log key, keys).
    var listed: [(String, [IdentityKey])] {
        [
            ("policy.block.added", blockAdded), ("policy.block.removed", blockRemoved),
            ("policy.allow.added", allowAdded), ("policy.allow.removed", allowRemoved),
            ("policy.verify.added", verifyAdded), ("policy.verify.removed", verifyRemoved),
        ].filter { !$0.1.isEmpty }
    }
}
