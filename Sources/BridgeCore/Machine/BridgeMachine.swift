import BitchatWire
import BotCrypto
public import Courier
public import BotSupport
public import Identity
public import Mesh
public import MeshSync
import Moderation
public import Nostr
import SpamFilter
import Geohash

/// Every decision of a running bridge as one pure machine: inputs in, actions out, time passed in, randomness
/// from a seed. It holds the ``BridgeRouter`` (roles, loop rules, judgement, budgets, the downlink schedule and
/// the uplink queue) and the machines around it — the verified mesh peers and this island's other bridges, the
/// hidden messages held for a release, the personas of the text mirror, the gossip sync and board stores with
/// the sync responder, the board's Nostr copies, the fleet list, the operator's lists and the priority authors.
///
/// Storage reaches it as data: what the stores held at start (``Restored``), the block list read again
/// (``Input/localBlocks(_:)``); and leaves it as actions, each carrying the data it concerns (``Action``). It
/// reads no clock (``nextDeadline(now:)`` says when it next wants ``Input/deadline``) and does no I/O: the
/// executor (`BridgeCoordinator`) feeds it and performs what it returns, in order.
///
/// This file holds the types, the state, start and stop, and the performing of the router's actions; the mesh
/// side is in `+Mesh`, the board in `+Board`, operator inputs, fleet lists, release and priority authors in
/// `+Operator`.
public struct BridgeMachine {
    public struct Configuration: Sendable {
        public var keys: BridgeKeys
        /// NIP-13 difficulty of the uplink mirror's events.
        public var powBits: Int
        /// Fleet moderation (issue 18): whose lists, which site; nil = off.
        public var fleet: FleetSettings?
        /// Gossip sync and the board (issue 17): the responder's budget; nil = REQUEST_SYNC and rounds are not
        /// served and board packets are not kept.
        public var sync: SyncResponder.Configuration?
        /// BOARD.md §11: accepted geohash posts of the served channels are copied to Nostr (gateway role).
        public var boardCopies: Bool
        /// The console's live view: every verdict and crossing as ``Action/activity(_:)``.
        public var liveView: Bool
        /// Seeds the downlink holds (0.2–1.5 s).
        public var seed: UInt64
        /// The courier gateway (issue 24); nil = off.
        public var courier: CourierGateway.Configuration?
        /// The bridge's own nickname on the mesh (no persona takes it).
        public var nickname = "bridge"

        public init(
            keys: BridgeKeys, powBits: Int = 0, fleet: FleetSettings? = nil, sync: SyncResponder.Configuration? = nil,
            boardCopies: Bool = false, liveView: Bool = false, seed: UInt64 = 0
        ) {
            self.keys = keys
            self.powBits = powBits
            self.fleet = fleet
            self.sync = sync
            self.boardCopies = boardCopies
            self.liveView = liveView
            self.seed = seed
        }
    }

    /// What the stores held at start, read once by the executor.
    public struct Restored: Sendable {
        /// `policy.json`; nil when it could not be read (the block list below still holds its last blocks).
        public var operatorLists: OperatorLists?
        /// The identity store's block list and staff (the policy file's and the rows the CLI or console marked);
        /// nil keeps the judge's own (the read failed, or there is no store).
        public var marks: OperatorMarks?
        /// The sync stores as the database held them (``SyncStores``).
        public var sync: SyncStores
        /// The board's Nostr copies.
        public var ledger: [BoardLedger.Entry]
        /// The kept fleet list (verified again here, like one from a relay).
        public var keptFleetList: NostrEvent?
        /// Uplinks an earlier run left unacknowledged, oldest first (they stay in the store until acknowledged).
        public var pendingUplinks: [NostrEvent]
        /// Hidden messages an earlier run kept for a release, oldest first.
        public var held: [HeldMessages.Held] = []
        /// The courier gateway's held mail, pending drops and remembered event ids.
        public var courier = CourierGateway.Restored()
        /// The site's records as the store kept them (verified again here), each with whether a relay acknowledged it.
        public var siteRecords: [SiteRecordRow] = []

        public struct SiteRecordRow: Sendable {
            public var event: NostrEvent
            public var acknowledged: Bool

            public init(event: NostrEvent, acknowledged: Bool) {
                self.event = event
                self.acknowledged = acknowledged
            }
        }

        public init(
            operatorLists: OperatorLists? = .empty, marks: OperatorMarks? = nil, sync: SyncStores = SyncStores(),
            ledger: [BoardLedger.Entry] = [], keptFleetList: NostrEvent? = nil, pendingUplinks: [NostrEvent] = []
        ) {
            self.operatorLists = operatorLists
            self.marks = marks
            self.sync = sync
            self.ledger = ledger
            self.keptFleetList = keptFleetList
            self.pendingUplinks = pendingUplinks
        }
    }

    public enum Input: Sendable {
        /// A verified event from the relay pool.
        case relayEvent(NostrEvent)
        /// How many relays are connected now.
        case relaysConnected(Int)
        /// What the mesh engine reported.
        case mesh(MeshAction)
        case operatorInput(OperatorInput)
        /// What the courier relays reported.
        case courierRelay(CourierRelayInput)
        /// The identity store's block list and staff, read again (another process or the console changed them).
        case localMarks(OperatorMarks)
        /// A relay acknowledged this event (`OK true`).
        case relayAccepted(EventID)
        /// A relay's `OK false` for an event (its message, as the relay wrote it).
        case relayRefused(EventID, message: String)
        /// ``nextDeadline(now:)`` was reached.
        case deadline
    }

    /// What the executor must do, in order.
    public enum Action: Sendable {
        /// Persist `id` before the next action, so a restart never forwards it twice.
        case remember(EventID, RememberedRole)
        /// Persist what the island has at a graceful stop (each list in one transaction): the events it had or gets
        /// without this bridge, and the stable IDs of the mesh messages it heard.
        case rememberIsland(learned: [EventID], radioCopies: [String])
        /// Keep `event` in the uplink store until a relay acknowledges it (written before it is published).
        case keepUplink(NostrEvent)
        /// Send to the relays.
        case publish(NostrEvent)
        /// Hand to the mesh node, in order.
        case mesh(MeshInput)
        /// A hidden message (or, in shadow mode, one that would have been): its moderation-log row.
        case hidden(HiddenReport)
        /// A verified key the bridge met, for the stranger cache.
        case sighting(IdentitySighting)
        /// The sync stores changed: persist.
        case syncChanges([SyncStoreChange])
        /// The board ledger changed: persist.
        case ledger(BoardLedger.Change)
        /// A fleet list now in force: keep its event in the data directory.
        case keepFleetList(NostrEvent)
        /// A site record now in force: keep it (replacing its target's), acknowledged by a relay or still to publish.
        case keepSiteRecord(NostrEvent, acknowledged: Bool)
        /// A relay acknowledged one of this stage's site records.
        case siteRecordAcknowledged(EventID)
        /// Another stage's moderator acted: a row of this stage's audit (the site's audit is visible on every stage).
        case auditSiteRecord(SiteRecord)
        /// The authors whose events the relay side verifies first once a relay's budget is spent.
        case priorityAuthors(Set<String>)
        /// The operator released a hidden message: its moderation-log rows are marked (who, when), and it is no
        /// longer kept for a release.
        case released(messageID: String, by: String, at: Double)
        /// Keep a hidden message on disk for a release after a restart (bounded by the store).
        case keepHeld(HeldMessages.Held, at: Double)
        /// The courier gateway's publishes, subscriptions and store writes (its deliveries are ``mesh(_:)`` sends).
        case courier(CourierGateway.Action)
        case log(LogLine)
        /// The console's live view.
        case activity(BridgeActivity)
    }

    /// One line for the operator's log.
    public struct LogLine: Sendable {
        public var level: LogLevel
        public var message: String
        public var metadata: [(String, JSONValue)]

        public init(_ level: LogLevel, _ message: String, _ metadata: [(String, JSONValue)] = []) {
            self.level = level
            self.message = message
            self.metadata = metadata
        }
    }

    /// What the machine counts beside the router's ``BridgeCounters``.
    public struct Counters: Sendable, Equatable {
        /// Board packets by store outcome.
        public var boardPackets = Tally<SyncBoardOutcome>()
        /// Packets newly kept for sync (verified, and for messages passed by the judgement), by kind.
        public var syncStored = Tally<SyncStoreKind>()
        /// Accepted board packets by what the Nostr side did (BOARD.md §11).
        public var boardNostr = Tally<BoardNostrOutcome>()
        /// Fleet words left out of the judge's denylist because it was full.
        public var fleetWordsDropped = 0
    }

    public enum Limits {
        /// Priority authors are recomputed at most this often (seconds): senders become established at most 30 a
        /// minute, so every 5 s is prompt and costs one pass over ≤ 4,096 senders.
        public static let priorityAuthorsRefresh: Double = 5
        /// A stage's heartbeat to the site (issue 35), seconds: the other stages see it within a minute, and call a
        /// stage unheard after three missed.
        public static let heartbeatInterval: Double = 60
        /// A stage is heard while its newest heartbeat is at most this many intervals old.
        public static let heartbeatsMissed: Double = 3
    }

    public let configuration: Configuration
    public internal(set) var router: BridgeRouter
    /// When the router's downlinks and the courier's handovers go on the air (one budget, the island's bridges).
    public internal(set) var airtime: AirtimeMachine
    public internal(set) var counters = Counters()
    public internal(set) var peers = MeshPeers()
    public internal(set) var connectedRelays = 0
    /// The operator's lists last read successfully (a failed reload keeps them: fail closed).
    public internal(set) var operatorLists: OperatorLists?
    public internal(set) var fleet: FleetListState?
    /// The site's moderation records (issue 35): nil unless this stage holds the operator key.
    public internal(set) var site: SiteLedger?
    /// The sync responder (nil with sync off) and the stores it answers from.
    public internal(set) var responder: SyncResponder?
    public internal(set) var sync: SyncStores
    let ownPeerID: MeshPeerID
    var random: SeededRandom
    var personas: PersonaBook
    var held = HeldMessages()
    var ledger = BoardLedger()
    var boardNotes = RecentBoardNotes()
    /// The relay verdict of the last public message (the engine's ``MeshAction/syncStore(_:)`` follows that
    /// message's ``MeshAction/publicMessage(_:)``): only a message the judgement passed is kept for sync, so the
    /// bridge never serves what it hid.
    var lastMeshVerdict: (stableID: String, relay: Bool)?
    /// The bridge's own block list and denylist, before the fleet's are merged in.
    /// The identity store's block list and staff (the fleet's blocks are merged in by ``applyJudgeLists()``).
    var localMarks: OperatorMarks
    /// The courier gateway (nil when off).
    public internal(set) var courierGateway: CourierGateway?
    var localDenylist: Denylist
    var priorityAuthors: Set<String> = []
    var priorityComputedAt = -Double.infinity
    /// The priority authors must be computed again (a delivery or a list changed them); otherwise only when a
    /// sender becomes established (``AirtimeMachine/nextEstablishment(now:)``).
    var priorityDirty = true
    /// Set by ``stop(now:)``: inputs are ignored from then on, so nothing arrives after the flush.
    var stopped = false
    /// When this stage's next heartbeat is due (the first as soon as a relay is connected).
    var nextHeartbeat = -Double.infinity

    public init(router: BridgeRouter, configuration: Configuration) {
        self.router = router
        self.airtime = AirtimeMachine(limits: router.settings.limits)
        self.configuration = configuration
        self.ownPeerID = MeshPeerID(noisePublicKey: configuration.keys.noiseKey.publicKey)
        self.random = SeededRandom(seed: configuration.seed)
        self.personas = PersonaBook(seed: configuration.keys.nostrSeed)
        self.fleet = configuration.fleet.map { FleetListState(site: $0.site, operators: $0.operators) }
        self.site = configuration.fleet.flatMap { fleet in
            fleet.siteKey.map { SiteLedger(key: $0, operators: fleet.operators, ownBridge: configuration.nickname) }
        }
        self.responder = configuration.sync.map { SyncResponder(configuration: $0) }
        self.sync = SyncStores()
        self.localMarks = OperatorMarks(blocked: router.judge.blocked, staff: router.judge.staff)
        self.localDenylist = router.judge.denylist
    }

    /// The channel this bridge serves as gateway, or nil.
    var channel: String? { router.settings.channel?.string }

    static func ms(_ seconds: Double) -> UInt64 { MeshPacket.timestampMs(fromSeconds: seconds) }

    // MARK: Start and stop

    /// Start: what the stores held goes in — the operator's lists and the block list, the sync stores, the
    /// ledger, the kept fleet list (offered as if a relay had sent it) — and the uplinks an earlier run left
    /// unacknowledged are published again, oldest first (they stay in the store until a relay acknowledges).
    public mutating func start(_ restored: Restored, now: Double) -> [Action] {
        operatorLists = restored.operatorLists
        sync = restored.sync
        ledger = BoardLedger(restored.ledger)
        for item in restored.held { held.hold(item) }
        courierGateway = configuration.courier.map { CourierGateway(configuration: $0, restored: restored.courier) }
        var actions = setLocalMarks(restored.marks ?? localMarks, log: false, now: now)
        if let kept = restored.keptFleetList, fleet != nil { actions += offerFleetList(kept, from: "kept file", now: now) }
        actions += restoreSite(restored.siteRecords, now: now)
        for event in restored.pendingUplinks {
            router.recordOwnPublication(event.id)
            actions += [.remember(event.id, .published), .publish(event)]
        }
        return actions + refreshPriorityAuthors(now: now)
    }

    /// Graceful stop: inputs stop, the deposits held while no relay was connected go to the uplink store
    /// (remembered as published, as a flush on reconnect would), the events the island already had — and those
    /// still waiting here that the island's other bridges take over on the leave — are remembered, and the signed
    /// leave is the last mesh input.
    public mutating func stop(now: Double) -> [Action] {
        stopped = true
        var actions: [Action] = []
        for event in router.drainQueuedUplinks() { actions += [.remember(event.id, .published), .keepUplink(event)] }
        let island = Action.rememberIsland(learned: router.learnedEventIDs + airtime.leftToIsland(heard: router.heardRadioCopy), radioCopies: router.radioCopies)
        return actions + [island, .mesh(.sendLeave)]
    }

    // MARK: Inputs

    public mutating func handle(_ input: Input, now: Double) -> [Action] {
        guard !stopped else { return [] }
        switch input {
        case .relayEvent(let event): return relayEvent(event, now: now)
        case .relaysConnected(let count):
            if connectedRelays == 0, count > 0 {
                site?.relaysReturned()
                nextHeartbeat = now
            }
            connectedRelays = count
            return perform(router.relaysConnected(count > 0, now: now), now: now)
        case .mesh(let action):
            let courierActions = Self.courierInput(action).map { courier($0, now: now) } ?? []
            return mesh(action, now: now) + courierActions
        case .courierRelay(let input): return courierRelay(input, now: now)
        case .operatorInput(let input): return operatorInput(input, now: now)
        case .localMarks(let marks): return setLocalMarks(marks, log: true, now: now)
        case .relayAccepted(let id): return siteAcknowledged(id)
        case .relayRefused(let id, let message): return siteRefused(id, message: message)
        case .deadline:
            let actions = perform(airtime.tick(router: &router, now: now) + router.tick(now: now), now: now)
            if actions.contains(where: { if case .mesh = $0 { true } else { false } }) { priorityDirty = true }
            let courierActions = (courierDeadline(now: now).map { $0 <= now } ?? false) ? courier(.deadline, now: now) : []
            return actions + refreshPriorityAuthors(now: now) + courierActions + dueSyncAnswers(now: now) + dueHeartbeat(now: now)
                + dueSiteRecords(now: now)
        }
    }

    /// When the machine next wants ``Input/deadline``: a downlink hold ends, the budget frees up, a presence is
    /// due, a sender becomes established (priority authors). `.infinity` when nothing is due.
    public func nextDeadline(now: Double) -> Double {
        var next = min(router.nextWake(now: now), airtime.nextWake(now: now) ?? .infinity)
        let refresh = max(now, priorityComputedAt + Limits.priorityAuthorsRefresh)
        if priorityDirty { next = min(next, refresh) }
        if let established = airtime.nextEstablishment(now: priorityComputedAt) { next = min(next, max(established, refresh)) }
        if let courier = courierDeadline(now: now) { next = min(next, courier) }
        if let answers = responder?.nextDue { next = min(next, Double(answers) / 1_000) }
        if let records = site?.nextDeadline { next = min(next, max(records, now)) }
        if site != nil, connectedRelays > 0 { next = min(next, max(nextHeartbeat, now)) }
        return next
    }

    private mutating func relayEvent(_ event: NostrEvent, now: Double) -> [Action] {
        if fleet != nil, FleetListState.isCandidate(event) { return offerFleetList(event, from: "relay", now: now) }
        if site != nil, event.kind == SiteRecord.kind { return offerSiteRecord(event, now: now) }
        if let carried = carryReleased(event, now: now) { return carried }
        // Kind-1 notes and kind 5 (the `board-<geohash>` subscription) tell which board posts are on Nostr
        // already, and may carry another island's board packet; nothing is minted from them (BOARD.md §11).
        if event.kind == BoardNostrCopy.textNoteKind || event.kind == BoardNostrCopy.deletionKind {
            if event.kind == BoardNostrCopy.textNoteKind { boardNotes.record(event) }
            return carryFromNostr(event, now: now)
        }
        var actions: [Action] = [
            // Debug level: the soak scripts count what the relays delivered from this line.
            .log(LogLine(.debug, "relay event", [("event.id", .string(event.id.hex))])),
        ]
        let nickname = event.firstTag("n").flatMap { $0.count > 1 ? $0[1] : nil }
        if let sighting = try? IdentitySighting.nostr(pubkey: event.pubkey.bytes, nickname: nickname) {
            actions.append(.sighting(sighting))
        }
        // Queue priority, never a skipped check: the pool verified this event's signature already, so `protected`
        // is the operator's word about a key that really signed it.
        let key = try? IdentityKey.nostr(pubkey: event.pubkey.bytes)
        let protected = key.map { key in router.judge.isStaff(key) || operatorLists?.verified.contains(key) == true } ?? false
        let unit = random.unit()
        return actions + perform(router.relayEvent(event, now: now, random: unit, protected: protected), now: now, judged: .channelEvent(event))
    }

    // MARK: The router's actions

    /// The router's actions as the executor's: downlinks become mesh packets, the uplink mirror a signed event,
    /// a hidden message (`judged`: a channel event or a mesh line) is held for a release, and the live view gets every verdict and
    /// crossing.
    mutating func perform(_ routed: [BridgeRouter.Action], now: Double, judged: HeldMessages.Held? = nil) -> [Action] {
        var actions: [Action] = []
        if configuration.liveView { actions += report(router.takeJudgements(), routed, now: now) } else { _ = router.takeJudgements() }
        // The router remembers a forwarded uplink as published right before publishing it: it is kept until a
        // relay acknowledges it. Its own presence comes without one and is not kept (re-sent on every connect).
        var rememberedPublished: EventID?
        for action in routed {
            switch action {
            case .remember(let id, let role):
                if role == .published { rememberedPublished = id }
                actions.append(.remember(id, role))
            case .publish(let event):
                if rememberedPublished == event.id { actions.append(.keepUplink(event)) }
                rememberedPublished = nil
                actions += [
                    .publish(event),
                    .log(LogLine(.info, "published", [("event.id", .string(event.id.hex)), ("event.kind", .integer(Int64(event.kind)))])),
                ]
            case .downlink(let offer):
                airtime.offer(offer, now: now)
            case .broadcast(let downlink, let id):
                actions += broadcast(downlink, id: id, now: now)
            case .mirrorUplink(let message, let senderKey):
                actions += mirrorUplink(message, senderKey: senderKey, now: now)
            case .meshRelay(let stableID, let relay):
                lastMeshVerdict = (stableID, relay)
                actions.append(.mesh(.relayVerdict(stableID: stableID, relay: relay)))
            case .recordHidden(let report):
                // What was judged is held for a release (a hide, not a shadow would-hide: that one went on).
                if let judged, !report.shadow, judged.id == report.candidate.messageID {
                    held.hold(judged)
                    actions.append(.keepHeld(judged, at: now))
                }
                actions += [.log(hiddenLine(report)), .hidden(report)]
            }
        }
        return actions
    }

    /// The log line of every hidden (or would-hide) message.
    func hiddenLine(_ report: HiddenReport) -> LogLine {
        let candidate = report.candidate
        var metadata: [(String, JSONValue)] = [
            ("hidden.rule", .string(report.rule.label)), ("hidden.direction", .string(candidate.direction.rawValue)),
            ("hidden.sender", .string(candidate.senderKey)), ("hidden.message", .string(candidate.messageID)),
            ("hidden.shadow", .bool(report.shadow)),
        ]
        if let name = candidate.displayName { metadata.append(("hidden.name", .string(name))) }
        if router.judge.settings.logText { metadata.append(("hidden.text", .string(String(candidate.text.prefix(120))))) }
        return LogLine(.notice, report.shadow ? "would hide (shadow mode)" : "hidden", metadata)
    }

    /// The live view's feed: each verdict, then each crossing among `routed`.
    private func report(_ judgements: [BridgeRouter.Judgement], _ routed: [BridgeRouter.Action], now: Double) -> [Action] {
        let channel = channel ?? "mesh"
        let keepText = router.judge.settings.logText
        var out: [Action] = judgements.map { j in
            let kind: BridgeActivity.Kind =
                switch j.verdict {
                case .hide: .hidden
                case .pass: j.report?.shadow == true ? .wouldHide : .passed
                }
            let c = j.candidate
            return .activity(BridgeActivity(
                at: now, kind: kind, direction: c.direction, channel: channel, sender: c.senderKey, displayName: c.displayName,
                messageID: c.messageID, text: keepText ? c.text : nil, rule: j.report?.rule.label, figures: j.report?.record?.figures ?? .null))
        }
        var remembered: EventID?
        for action in routed {
            switch action {
            case .remember(let id, let role) where role == .published: remembered = id
            case .publish(let event) where event.id == remembered:
                out.append(.activity(BridgeActivity(
                    at: now, kind: .published, direction: .meshToNostr, channel: channel, sender: event.pubkey.hex,
                    displayName: nil, messageID: event.id.hex, text: nil, rule: nil)))
            case .broadcast(let downlink, let id):
                out.append(.activity(Self.downlinked(downlink, id: id, channel: channel, keepText: keepText, now: now)))
            default: break
            }
        }
        return out
    }

    /// A crossing onto the mesh as the live view shows it: who said what (the text only when the operator keeps
    /// texts, `modlog.log_text`), and in which form. A carrier's event is read back from its payload (at most the
    /// budget's 30 a minute).
    static func downlinked(_ downlink: BridgeRouter.Downlink, id: EventID, channel: String, keepText: Bool, now: Double) -> BridgeActivity {
        switch downlink {
        case .carrier(let payload):
            let event = try? UnverifiedEvent(json: String(decoding: payload.eventJSON, as: UTF8.self))
            let name = event?.tags.first { $0.first == "n" && $0.count > 1 }?[1]
            return BridgeActivity(
                at: now, kind: .downlinked, direction: .nostrToMesh, channel: payload.geohash, sender: event?.pubkeyHex ?? "",
                displayName: name, messageID: id.hex, text: keepText ? event?.content : nil, rule: nil, form: "carrier")
        case .text(let text, let author, let name):
            return BridgeActivity(
                at: now, kind: .downlinked, direction: .nostrToMesh, channel: channel, sender: Hex.encode(author), displayName: name,
                messageID: id.hex, text: keepText ? text : nil, rule: nil, form: "mirror")
        }
    }

    private mutating func broadcast(_ downlink: BridgeRouter.Downlink, id: EventID, now: Double) -> [Action] {
        let nowMs = Self.ms(now)
        switch downlink {
        case .carrier(let payload):
            guard let bytes = try? payload.encode() else {
                return [.log(LogLine(.warning, "carrier could not be encoded", [("event.id", .string(id.hex))]))]
            }
            // Packet-signed with the bridge's announced key (issue 16 part 4): phones that check carriers (Android's
            // open PR #770 requires a signature on every carrier, broadcasts included) accept it; iOS ignores the
            // signature of a broadcast carrier and relies on the Nostr one (MESH-WIRE §4.2).
            let packet = MeshPacket(type: .nostrCarrier, timestamp: nowMs, sender: ownPeerID, payload: bytes)
            return [
                .mesh(.originate(packet, sign: true)),
                .log(LogLine(.info, "downlinked", [
                    ("event.id", .string(id.hex)), ("carrier.direction", .string(payload.direction.name)),
                    ("carrier.geohash", .string(payload.geohash)),
                ])),
            ]
        case .text(let text, let author, let name):
            do {
                var actions: [Action] = []
                let own = configuration.nickname
                let turn = try personas.turn(author: author, name: name, now: now) { [peers] in $0 == own || peers.uses(nickname: $0) }
                let persona = turn.persona
                if turn.announce {
                    let announce = try PersonaBook.announce(persona, at: nowMs)
                    actions += keepOwn(announce, now: nowMs) + [.mesh(.originateSigned(announce, ttl: PersonaBook.Limits.ttl))]
                    personas.announced(persona, now: now)
                }
                let line = try PersonaBook.message(persona, text: text, at: nowMs)
                actions += keepOwn(line, now: nowMs) + [.mesh(.originateSigned(line, ttl: PersonaBook.Limits.ttl, delayMs: turn.lineDelayMs))]
                actions.append(.log(LogLine(.info, "mirrored to mesh", [
                    ("event.id", .string(id.hex)), ("mesh.persona", .string(persona.peerID.hex)), ("mesh.nickname", .string(persona.nickname)),
                ])))
                return actions
            } catch {
                return [.log(LogLine(.warning, "mirror to mesh failed: persona keys", [("event.id", .string(id.hex)), ("error", .string("\(error)"))]))]
            }
        }
    }

    /// The opt-in uplink mirror: the public mesh message becomes a channel event signed by a key derived for its
    /// author (`mesh|<fingerprint>|<geohash>`), `n` = `<nickname>@mesh`, mined to the configured target. Mining
    /// 16 bits costs ~65,000 hashes (tens of ms); higher targets are capped by the configuration (≤ 32).
    mutating func mirrorUplink(_ message: MeshPublicMessage, senderKey: String, now: Double) -> [Action] {
        guard let channel else { return [] }
        do {
            let key = try NostrKeyDerivation.secretKey(
                seed: configuration.keys.nostrSeed, label: NostrKeyDerivation.mirrorAuthorLabel(fingerprint: senderKey, geohash: channel))
            let unsigned = UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(now), kind: NostrKind.ephemeralChat,
                tags: [["g", channel], ["n", message.nickname + "@mesh"]], content: message.text)
            let mined = try NostrPoW.mine(unsigned, target: configuration.powBits)
            let event = try mined.event.signed(with: key)
            router.recordOwnPublication(event.id)
            return [.remember(event.id, .published), .keepUplink(event), .publish(event)]
        } catch {
            return [.log(LogLine(.warning, "mirror uplink failed", [("error", .string("\(error)"))]))]
        }
    }
}

extension SeededRandom {
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
