public import BitchatWire
public import BotSupport
public import BridgeCore
import Courier
public import Identity
public import IdentityCache
import Mesh
public import MeshRuntime
public import MeshSync
import Nostr
public import SpamFilter
import Synchronization

/// Runs the bridge: the executor around the pure ``BridgeMachine``. It feeds the machine relay events, mesh
/// reports, operator inputs and its deadlines, and performs the actions it returns, in order — store writes,
/// publishes, mesh inputs, log lines, the live view. It decides nothing and holds only its I/O handles.
///
/// One timer: a single task sleeps until the machine's next deadline (or the store service's next batch or
/// upkeep), woken early through its ``DeadlineInbox`` when an input brings a deadline forward or another thread
/// submits a request. Mesh inputs go to the node's own bounded, ordered queue (``MeshNode/enqueue(_:)``);
/// ``shutdown()`` queues the signed leave last. Every store read and write goes through ``BridgeStoreService``.
public actor BridgeCoordinator {
    /// The coordinator's own counters (the machine keeps its own): failed store operations by kind.
    public typealias Counters = BridgeStoreService.Counters

    /// A consistent picture of the bridge for `/metrics` and the summary line.
    public struct Snapshot: Sendable, Equatable {
        public var router: BridgeCounters
        /// What went on the air (``AirtimeMachine/Counters``).
        public var airtime: AirtimeMachine.Counters
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
        public var boardPackets = Tally<SyncBoardOutcome>()
        public var syncStored = Tally<SyncStoreKind>()
        /// Failed writes of the durable sync store (the core keeps serving from memory).
        public var syncWriteFailures = 0
        /// Fleet lists offered, by outcome (empty when no operator key is configured).
        public var fleetLists = Tally<FleetListOutcome>()
        public var boardNostr = Tally<BoardNostrOutcome>()
        /// The site's records (nil: this stage holds no operator key).
        public var site: SiteFigures?
        /// The courier gateway's counters and sizes (nil with it off).
        public var courier: BridgeMetrics.CourierFigures?
    }

    /// What the judge does about one key now, and where it comes from when it is the site's (issue 35).
    public struct MarksInForce: Sendable, Equatable {
        public var blocked: Bool
        public var staff: Bool
        /// The site's records in force about the key (set or cleared), nil when none.
        public var siteBlock: SiteRecord?
        public var siteStaff: SiteRecord?

        public init(blocked: Bool, staff: Bool, siteBlock: SiteRecord? = nil, siteStaff: SiteRecord? = nil) {
            self.blocked = blocked
            self.staff = staff
            self.siteBlock = siteBlock
            self.siteStaff = siteStaff
        }
    }

    /// The site's records as `/metrics` shows them.
    public struct SiteFigures: Sendable, Equatable {
        public var outcomes: Tally<SiteRecordOutcome>
        /// Blocks, staff marks, words and releases (not the stages' heartbeats).
        public var targets: Int
        public var unacknowledged: Int
        /// Every stage's newest heartbeat (this one's included).
        public var stages: [SiteRecord] = []
        /// Stages heard within three heartbeats.
        public var stagesHeard = 0
    }

    public enum Limits {
        /// Operator requests and store notifications waiting (signals, the console, the control socket).
        public static let inbox = 256
    }

    /// What reaches the coordinator from other threads between two inputs.
    enum Request: Sendable {
        case operatorInput(OperatorInput)
        /// Another process changed the stores (the CLI, through the control socket).
        case storesChanged
    }

    var machine: BridgeMachine
    let mesh: MeshNode
    let relays: any BridgeRelayClient
    /// The courier relays (nil with the courier gateway off).
    let courierRelays: (any CourierRelayClient)?
    let store: BridgeStoreService
    let logger: Logger
    let time: any TimeSource
    let inbox = DeadlineInbox<Request>(capacity: Limits.inbox)
    let activity: (@Sendable (BridgeActivity) -> Void)?

    /// - Parameters:
    ///   - activity: told every verdict and crossing (the console's live view); must not block.
    public init(
        machine: BridgeMachine, mesh: MeshNode, relays: any BridgeRelayClient, courierRelays: (any CourierRelayClient)? = nil,
        stores: BridgeStores, logger: Logger, time: any TimeSource, activity: (@Sendable (BridgeActivity) -> Void)? = nil
    ) {
        self.machine = machine
        self.mesh = mesh
        self.relays = relays
        self.courierRelays = courierRelays
        self.store = BridgeStoreService(stores: stores, mesh: mesh, logger: logger, time: time)
        self.logger = logger
        self.time = time
        self.activity = activity
    }

    /// Queues an operator request (from a signal handler, the console, any thread); handled in order.
    public nonisolated func submit(_ input: OperatorInput) {
        if !inbox.post(.operatorInput(input)) { logger.warning("operator request dropped: too many at once, or stopping") }
    }

    /// Another process changed the data directory's stores (`identities block` from the CLI, through the control
    /// socket): the block list and the pins are read again.
    public nonisolated func storesChanged() { inbox.post(.storesChanged) }

    /// Runs until ``shutdown()`` (or cancellation): reads what the stores hold, then consumes `relayInputs` and
    /// the mesh node's actions and fires the machine's deadlines. Inputs ending earlier (the relay pool stopped,
    /// the mesh link gone) stop nothing.
    public func run<Inputs: AsyncSequence & Sendable>(
        relayInputs: Inputs, courierInputs: (any AsyncSequence<CourierRelayInput, Never> & Sendable)? = nil
    ) async where Inputs.Element == BridgeRelayInput {
        let restored = store.restore(fleet: machine.configuration.fleet != nil, courier: machine.configuration.courier)
        perform(machine.start(restored, now: seconds(time.nowMs())))
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var inputs = relayInputs.makeAsyncIterator()
                while let input = try? await inputs.next() { await self.handle(input) }
                return false
            }
            if let courierInputs {
                group.addTask {
                    for await input in courierInputs { await self.feed(.courierRelay(input)) }
                    return false
                }
            }
            group.addTask { [mesh] in
                for await action in mesh.actions { await self.handle(action) }
                return false
            }
            group.addTask {
                await self.timerLoop()
                return true
            }
            while let timerEnded = await group.next(), !timerEnded {}
            group.cancelAll()
        }
        store.flushSightings()
        logSummary()
    }

    /// Graceful stop: intake stops, the deposits the machine still holds (no relay was connected) go to the uplink
    /// store, the signed leave is queued as the last mesh input, and ``run(relayInputs:)`` returns. Returns how
    /// many uplinks are pending in the store now (logged).
    @discardableResult
    public func shutdown() -> Int {
        let actions = machine.stop(now: seconds(time.nowMs()))
        perform(actions)
        inbox.close()
        let held = actions.filter { if case .keepUplink = $0 { true } else { false } }.count
        guard store.stores.uplinks != nil else {
            if held > 0 { logger.warning("no uplink store; held deposits are lost", [("uplinks", .integer(Int64(held)))]) }
            return 0
        }
        let pending = (try? store.stores.uplinks?.count()) ?? -1
        logger.notice("pending uplinks flushed to the queue store", [
            ("uplinks.held", .integer(Int64(held))), ("uplinks.pending", .integer(Int64(pending))),
        ])
        return pending
    }

    // MARK: Inputs

    private func handle(_ input: BridgeRelayInput) {
        switch input {
        case .event(let event): feed(.relayEvent(event))
        case .connectedRelays(let count): feed(.relaysConnected(count))
        case .accepted(let id):
            store.uplinkAcknowledged(id)
            feed(.relayAccepted(id))
        case .refused(let id, let message): feed(.relayRefused(id, message: message))
        }
    }

    private func handle(_ action: MeshAction) {
        if case .pinRefused(let announced) = action { return store.recordPinRefusal(announced) }
        feed(.mesh(action))
    }

    /// One input through the machine; the timer is woken when the machine's next deadline moved earlier.
    func feed(_ input: BridgeMachine.Input) {
        let now = time.nowMs()
        perform(machine.handle(input, now: seconds(now)))
        inbox.bringForward(nextDeadlineMs(now: now))
    }

    /// The one timer: sleeps until the next deadline, then fires what is due.
    private func timerLoop() async {
        while !Task.isCancelled, !inbox.isClosed {
            await inbox.wait(until: nextDeadlineMs(now: time.nowMs()), on: time)
            guard !inbox.isClosed else { return }
            fire()
        }
    }

    private func fire() {
        for request in inbox.take().items {
            switch request {
            case .operatorInput(let input): operatorInput(input)
            case .storesChanged: reread()
            }
        }
        let now = time.nowMs()
        if machine.nextDeadline(now: seconds(now)) <= seconds(now) { perform(machine.handle(.deadline, now: seconds(now))) }
        if let due = store.sightingsDueMs, due <= now { store.flushSightings() }
        if store.upkeepDueMs <= now {
            if store.upkeep(now: now) { reread() }
            logSummary()
        }
    }

    func nextDeadlineMs(now: UInt64) -> UInt64 {
        let deadline = machine.nextDeadline(now: seconds(now))
        return min(deadline.isFinite ? MeshPacket.timestampMs(fromSeconds: max(0, deadline)) : .max, store.nextDeadlineMs)
    }

    private func operatorInput(_ input: OperatorInput) {
        if case .reloadPolicy(let result) = input {
            // Retention passes follow the readable policy only; a failed read holds them (fail closed).
            store.stores.identities.setOperatorLists(try? result.get())
        }
        feed(.operatorInput(input))
        if case .reloadPolicy = input { reread() }
    }

    /// The block list and the pins read again; a failed read keeps what is in force.
    private func reread() {
        if let marks = store.reread() { feed(.localMarks(marks)) }
    }

    func seconds(_ ms: UInt64) -> Double { Double(ms) / 1000 }

    // MARK: Actions

    /// Performs the machine's actions in order.
    ///
    /// A `.remember` that cannot be written (SQLITE_FULL, I/O error) does **not** stop the forward that follows it.
    /// Decision (operations issue, disk full): an operator whose disk filled up wants the festival's chat to keep
    /// crossing; the in-memory loop guard still stops every repeat while this process runs, and the only cost is
    /// that a restart *during* the outage may forward the relay's replay of those few events once more (phones
    /// deduplicate by event id). Each failure is counted and logged, the first and then every
    /// ``Limits/failureLogEvery``-th, so a full disk cannot flood the log.
    func perform(_ actions: [BridgeMachine.Action]) {
        for action in actions {
            switch action {
            case .remember(let id, let role): store.remember(id, as: role)
            case .rememberIsland(let learned, let radioCopies):
                store.remember(learned.map(\.bytes), as: .learned)
                store.remember(radioCopies.compactMap { try? Hex.decode($0, expectedCount: 16) }, as: .radioCopy)
            case .keepUplink(let event): store.keepUntilAcknowledged(event)
            case .publish(let event): relays.publish(event)
            case .mesh(let input): store.enqueue(input)
            case .hidden(let report): store.recordHidden(report)
            case .sighting(let sighting): store.queueSighting(sighting)
            case .syncChanges(let changes): store.writeSync(changes)
            case .ledger(let change): store.writeLedger(change)
            case .keepFleetList(let event): store.keepFleetList(event)
            case .keepSiteRecord(let event, let acknowledged): store.keepSiteRecord(event, acknowledged: acknowledged)
            case .siteRecordAcknowledged(let id): store.siteRecordAcknowledged(id)
            case .auditSiteRecord(let record): store.auditSiteRecord(record)
            case .priorityAuthors(let authors): relays.setPriorityAuthors(authors)
            case .released(let id, let by, let at): store.markReleased(messageID: id, by: by, at: at)
            case .keepHeld(let item, let at): store.keepHeld(item, at: at)
            case .courier(let action): courier(action)
            case .log(let line): logger.log(line.level, line.message, line.metadata)
            case .activity(let item): activity?(item)
            }
        }
    }

    private func courier(_ action: CourierGateway.Action) {
        switch action {
        case .publish(let event): courierRelays?.publish(event)
        case .subscribe(let id, let filter): courierRelays?.subscribe(id: id, filter: filter)
        case .unsubscribe(let id): courierRelays?.unsubscribe(id: id)
        case .deliver: break  // the machine sends deliveries to the mesh node
        case .storeHeld, .removeHeld, .storePending, .removePending, .rememberSeen:
            if let configuration = machine.configuration.courier { store.writeCourier(action, configuration: configuration) }
        }
    }

    // MARK: The console and the control socket

    /// Releases a hidden channel message (the console); logged, and audited by the console.
    /// Releases a hidden message (`by`: `console`, `cli`), either way; see ``BridgeMachine/release(messageID:by:now:)``.
    public func release(messageID: String, by: String) -> Result<Void, BridgeMachine.ReleaseError> {
        let now = time.nowMs()
        let (result, actions) = machine.release(messageID: messageID, by: by, now: seconds(now))
        perform(actions)
        inbox.bringForward(nextDeadlineMs(now: now))
        return result
    }

    public func postNotice(
        _ text: String, urgent: Bool, lifetimeMs: UInt64 = OperatorNotice.Defaults.lifetimeMs, geohash: String? = nil,
        nickname: String = OperatorNotice.Defaults.nickname
    ) -> Result<BoardPost, NoticeError> {
        let (result, actions) = machine.postNotice(
            text, urgent: urgent, lifetimeMs: lifetimeMs, geohash: geohash, nickname: nickname, now: seconds(time.nowMs()))
        perform(actions)
        return result
    }

    public func withdrawNotice(postID: [UInt8]) -> Result<Void, NoticeError> {
        let (result, actions) = machine.withdrawNotice(postID: postID, now: seconds(time.nowMs()))
        perform(actions)
        return result
    }

    /// This bridge's live notices, newest first.
    public func notices() -> [BoardPost] { machine.notices(now: seconds(time.nowMs())) }

    /// Runs the operator console's store work here, on the one user of the bridge's SQLite connection (one
    /// connection per database file); nil, without running it, when the caller stopped waiting (cancelled).
    /// `reloadingBlocks`: the block list is read again right after (our own commits do not move `data_version`).
    public func operatorStoreWork<T: Sendable>(reloadingBlocks: Bool, _ body: @Sendable () -> T) -> T? {
        guard !Task.isCancelled else { return nil }
        let result = body()
        if reloadingBlocks { reread() }
        return result
    }

    /// Every stage of the site as this one last heard it (`/healthz`'s `site`, the console's health strip, `status
    /// --site`): name, seconds since its heartbeat, whether it is heard (within three), its figures; nil without site records.
    public func siteStages() -> JSONValue? {
        guard let site = machine.site else { return nil }
        let now = Double(time.nowMs()) / 1000
        return .array(site.stages.map { record in
            let age = max(0, now - Double(record.createdAt))
            return .object([
                ("stage", .string(record.bridge)), ("this", .bool(record.bridge == machine.configuration.nickname)),
                ("seen_s_ago", .integer(Int64(age))), ("heard", .bool(BridgeMachine.isHeard(record, now: now))),
                ("status", record.status ?? .null),
            ])
        })
    }

    /// What the judge does about `key` now and the site's records about it (the console's sender page).
    public func marksInForce(_ key: IdentityKey) -> MarksInForce {
        let judge = machine.router.judge
        return MarksInForce(
            blocked: judge.blocked.contains(key), staff: judge.isStaff(key),
            siteBlock: machine.site?.record(.block(key)), siteStaff: machine.site?.record(.staff(key)))
    }

    /// Whether the spam filter is in shadow mode now (the console's settings page).
    public var isShadowMode: Bool { machine.router.judge.policy.isShadowMode }

    /// The spam filter's limits in force (the console's settings page).
    public var spamConfig: SpamFilterConfig { machine.router.judge.policy.config }

    // MARK: Observability

    /// Answers at once: the coordinator's heartbeat for `/healthz` (an actor that does not get to it in time is hung
    /// or starved).
    public func heartbeat() {}

    public func snapshot() -> Snapshot {
        let router = machine.router
        let stores = store.stores
        return Snapshot(
            router: router.counters, airtime: machine.airtime.counters, coordinator: store.counters,
            pendingDownlinks: machine.airtime.pendingCount,
            queuedUplinks: router.queuedUplinks, storedUplinks: try? stores.uplinks?.count(),
            uplinkStore: stores.uplinks?.counters, meshPeers: machine.peers.count, connectedRelays: machine.connectedRelays,
            strangerCacheEntries: stores.identities.strangerCount, identities: stores.identities.counters,
            moderationRecords: try? stores.moderationLog?.count(), blockedKeys: router.judge.blocked.count,
            sync: machine.responder?.counters ?? SyncResponderCounters(), boardPackets: machine.counters.boardPackets,
            syncStored: machine.counters.syncStored, syncWriteFailures: stores.syncJournal?.failedWrites ?? 0,
            fleetLists: machine.fleet?.outcomes ?? Tally(), boardNostr: machine.counters.boardNostr,
            site: machine.site.map { site in
                let stages = site.stages
                let now = Double(time.nowMs()) / 1000
                return SiteFigures(
                    outcomes: site.outcomes, targets: site.records.count - stages.count, unacknowledged: site.unacknowledgedCount,
                    stages: stages, stagesHeard: stages.filter { BridgeMachine.isHeard($0, now: now) }.count)
            },
            courier: machine.courierGateway.map { gateway in
                var figures = BridgeMetrics.CourierFigures()
                figures.counters = gateway.counters
                figures.held = gateway.heldCount
                figures.pending = gateway.pendingCount
                figures.watchedPeers = gateway.watchedCount
                figures.subscriptions = gateway.subscriptionCount
                figures.tagsPerFilter = gateway.tagsPerFilter
                return figures
            })
    }

    func logSummary() {
        let c = machine.router.counters
        logger.notice("summary", [
            ("forwarded.nostr_to_mesh", .integer(Int64(machine.airtime.counters.messages))),
            ("forwarded.mesh_to_nostr", .integer(Int64(c.uplinked))),
            ("hidden.nostr_to_mesh", .integer(Int64(c.hidden(.nostrToMesh)))),
            ("hidden.mesh_to_nostr", .integer(Int64(c.hidden(.meshToNostr)))),
            ("relays.connected", .integer(Int64(machine.connectedRelays))),
            ("mesh.peers", .integer(Int64(machine.peers.count))),
            ("downlinks.pending", .integer(Int64(machine.airtime.pendingCount))),
        ])
    }
}
