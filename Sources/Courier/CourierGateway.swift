public import BitchatWire
import BotCrypto
public import BotSupport
public import Nostr

/// The courier gateway (issue 24, COURIER.md §4.2 "Ours") as one pure machine: private mail between phones that
/// never see the internet and the relays, never opened, judged or logged.
///
/// - **Deposits** (phone → bridge → relays): a 0x04 addressed to the bridge that the engine verified (signed by its
///   sender, the sender a direct peer of the link) is held, within the quotas, and published at once as a kind-1401
///   drop signed by a key used once; a publish counts after a relay's `OK true` within 10 s, and is repeated at most
///   every 30 min until the envelope expires or is handed over.
/// - **Watching** (relays → bridge): the tags (day − 1, day, day + 1) of every verified peer in the mesh table and of
///   those lost within ``Configuration/watchTTLMs``, in subscriptions of at most ``Configuration/tagsPerFilter`` tags;
///   a peer keeps its subscription slot, so only the chunk that changed is sent again; all at the UTC day change.
/// - **Delivery** (bridge → phone): a valid drop for a watched peer is queued for it and its event id remembered (24 h),
///   and held mail for a peer is handed over, as a directed signed 0x04 when the peer is a direct peer of a link —
///   removed only when the engine reports that a link took it; every phone's smallest first, within the airtime caps
///   and the slots the mesh's one downlink schedule gives courier mail (``handle(_:nowMs:slots:)``).
///
/// Time comes in with each input (`nowMs`, wall clock), randomness as a secret seed (the drop keys); storage leaves as
/// actions and comes back at start as ``Restored``. ``nextDeadline()`` says when it next wants ``Input/deadline``.
public struct CourierGateway {
    public struct Configuration: Sendable {
        /// Envelopes held from deposits, in all (COURIER.md suggests 2,000 for a festival: 40 for a phone).
        public var storeMax = 2_000
        /// Envelopes held per depositor at once.
        public var perDepositor = 5
        /// Deposits a depositor may make per minute (the rest are refused, counted).
        public var depositsPerMinute = 10
        /// How long a peer's tags stay watched after it left the mesh table (phones sleep).
        public var watchTTLMs: UInt64 = 15 * 60_000
        /// Tags per subscription filter (3 per peer; COURIER.md §4.3's conservative chunk), halved for the rest of the
        /// run each time a relay refuses a filter (``Input/refused(subscription:message:)``), down to ``minTagsPerFilter``.
        public var tagsPerFilter = Self.defaultTagsPerFilter
        public static let defaultTagsPerFilter = 300
        /// The smallest chunk: iOS's own filter (16 peers × 3 tags), which every relay the apps use accepts; a relay that
        /// closes even that closes for another reason.
        public var minTagsPerFilter = 48
        /// Subscriptions per relay (`courier-0` … `courier-7`): about 800 peers.
        public var maxSubscriptions = 8
        /// `limit` of each filter.
        public var filterLimit = 500
        /// A change of the watch set waits this long for more before the changed chunks are sent again.
        public var subscribeDebounceMs: UInt64 = 5_000
        public var pendingPerPeer = 20
        public var pendingTotal = 5_000
        /// A held envelope is published again at most this often (from its last confirmed publish).
        public var republishMs: UInt64 = 30 * 60_000
        /// A publish counts only when a relay answers `OK true` within this.
        public var publishAckMs: UInt64 = 10_000
        /// After a refused or unanswered publish, the next try waits this long.
        public var publishRetryMs: UInt64 = 60_000
        /// Event ids of drops already taken (and of our own), and envelopes handed over, kept this long and at most this many.
        public var seenLifetimeMs: UInt64 = 86_400_000
        public var seenCapacity = 20_000
        /// Airtime (COURIER.md §4.4): deliveries per peer per minute, and envelope bytes per minute over all links.
        public var deliveriesPerPeerPerMinute = 6
        public var bytesPerMinute = 256 << 10
        /// The bridge's own Noise static public key: drops and deposits tagged for it are for no one here.
        public var ownNoiseKey: [UInt8]
        /// Secret bytes the drop keys are derived from (one fresh key per publish; random at every start).
        public var dropKeySeed: [UInt8]

        public init(ownNoiseKey: [UInt8], dropKeySeed: [UInt8]) {
            self.ownNoiseKey = ownNoiseKey
            self.dropKeySeed = dropKeySeed
        }

        var peersPerSubscription: Int { max(1, tagsPerFilter / 3) }
    }

    /// An envelope a phone deposited with the bridge.
    public struct Held: Sendable, Equatable {
        /// Hex of the first 16 bytes of SHA-256(ciphertext): the same ciphertext is the same envelope.
        public let id: String
        public let envelope: CourierEnvelope
        public let depositor: MeshPeerID
        public let depositedMs: UInt64
        /// The last publish a relay confirmed.
        public var publishedMs: UInt64?
        /// The recipient tag in hex (the drop's `x`), kept to match it against the watched peers.
        public let tagHex: String
        /// The envelope as it is handed over and stored, encoded once (a held envelope decoded and passed the
        /// gateway's checks, so it encodes; an empty blob would be dropped at load).
        public let bytes: [UInt8]

        public init(id: String, envelope: CourierEnvelope, depositor: MeshPeerID, depositedMs: UInt64, publishedMs: UInt64? = nil) {
            self.id = id
            self.envelope = envelope
            self.depositor = depositor
            self.depositedMs = depositedMs
            self.publishedMs = publishedMs
            tagHex = Hex.encode(envelope.recipientTag)
            bytes = (try? envelope.encode()) ?? []
        }
    }

    /// A drop fetched for a watched peer, waiting for it to be a direct peer.
    public struct Pending: Sendable, Equatable {
        public let eventID: String
        public let peer: MeshPeerID
        /// The envelope bytes as the drop carried them (handed over unchanged).
        public let envelope: [UInt8]
        public let expiryMs: UInt64

        public init(eventID: String, peer: MeshPeerID, envelope: [UInt8], expiryMs: UInt64) {
            self.eventID = eventID
            self.peer = peer
            self.envelope = envelope
            self.expiryMs = expiryMs
        }
    }

    /// What a delivery was, for its answer.
    public enum DeliveryRef: Sendable, Hashable {
        case held(String)
        case pending(eventID: String)

        /// A string the mesh engine carries to its answer (`h:ID`, `p:EVENT`).
        public var token: String {
            switch self {
            case .held(let id): "h:" + id
            case .pending(let eventID): "p:" + eventID
            }
        }

        public init?(token: String) {
            let value = String(token.dropFirst(2))
            switch token.prefix(2) {
            case "h:": self = .held(value)
            case "p:": self = .pending(eventID: value)
            default: return nil
            }
        }
    }

    public struct Restored: Sendable {
        public var held: [Held] = []
        public var pending: [Pending] = []
        /// Event ids of drops already taken and envelopes handed over, with when.
        public var seen: [(id: String, atMs: UInt64)] = []

        public init(held: [Held] = [], pending: [Pending] = [], seen: [(id: String, atMs: UInt64)] = []) {
            self.held = held
            self.pending = pending
            self.seen = seen
        }
    }

    public enum Input: Sendable {
        /// A 0x04 addressed to the bridge, its signature verified against its sender's key and its sender a direct
        /// peer of the link it came on (the engine's checks, COURIER.md §2.5).
        case deposit(from: MeshPeerID, envelope: [UInt8])
        /// A verified announce (the engine reports a peer when it is new or changed, `direct` included).
        case peerVerified(MeshPeerID, noiseKey: [UInt8], direct: Bool)
        case peerLost(MeshPeerID)
        /// The engine's whole peer table, after it dropped peer reports (``peerVerified(_:noiseKey:direct:)``,
        /// ``peerLost(_:)``) while the caller fell behind.
        case peersResync([PeerReport])
        /// A verified event from the courier subscriptions (`subscription`: which one brought it, when known).
        case drop(NostrEvent, subscription: String? = nil)
        /// The relays sent everything stored for `subscription` (or 10 s passed).
        case endOfStored(subscription: String)
        /// A relay's `OK` for a drop this machine published.
        case published(EventID, accepted: Bool)
        /// The engine's answer to ``Action/deliver(to:envelope:ref:)``: a link took it, or the peer is direct nowhere.
        case delivered(DeliveryRef, ok: Bool)
        /// How many courier relays are connected (publishing waits for one).
        case relaysConnected(Int)
        /// A relay's `CLOSED` for `subscription`, or its `NOTICE` (nil): it may have refused a filter as too large.
        case refused(subscription: String?, message: String)
        case deadline
    }

    /// A verified peer of the engine's table.
    public struct PeerReport: Sendable {
        public let id: MeshPeerID
        public let noiseKey: [UInt8]
        public let direct: Bool

        public init(id: MeshPeerID, noiseKey: [UInt8], direct: Bool) {
            self.id = id
            self.noiseKey = noiseKey
            self.direct = direct
        }
    }

    public enum Action: Sendable, Equatable {
        case publish(NostrEvent)
        case subscribe(id: String, filter: NostrFilter)
        case unsubscribe(id: String)
        /// Send `envelope` to `to` as a directed, signed 0x04 (TTL 7) on a link where it is a direct peer; answer
        /// ``Input/delivered(_:ok:)``.
        case deliver(to: MeshPeerID, envelope: [UInt8], ref: DeliveryRef)
        case storeHeld(Held)
        case removeHeld(String)
        case storePending(Pending)
        case removePending(eventID: String)
        case rememberSeen(eventID: String, atMs: UInt64)
    }

    /// What holds ready mail back (COURIER.md §4.4; typed counter key).
    public enum AirtimeCap: String, CounterKey, CaseIterable {
        /// ``Configuration/deliveriesPerPeerPerMinute`` handovers to that phone in the last minute.
        case peerRate = "peer_rate"
        /// ``Configuration/bytesPerMinute`` envelope bytes over all links in the last minute.
        case bytes
        /// No slot of the mesh's one downlink schedule: chat downlinks first, courier's share of the budget used.
        case downlinkBudget = "downlink_budget"
    }

    public enum Limits {
        /// Backfill rounds per chunk and load: with the filter's limit of 500, 5,000 drops a day for 100 phones.
        public static let maxBackfillRounds = 10
        /// Backfill subscriptions open at once (more wait their turn): 8 chunks and 2 backfills are nostream's default
        /// cap of 10 subscriptions a connection (COURIER.md §4.3), which a relay enforces by refusing the 11th.
        public static let maxBackfillsOpen = 2
    }

    public let configuration: Configuration
    /// What the gateway counts; ``counters`` adds what the watch list counts itself.
    private var tallies = CourierCounters()
    public var counters: CourierCounters {
        var counters = tallies
        counters.watchOverflow = watch.overflow
        return counters
    }
    private(set) var held: [String: Held] = [:]
    /// Held envelope ids by recipient tag (hex): a direct phone's held mail is three lookups away.
    private var heldByTag: [String: Set<String>] = [:]
    private var pending: [MeshPeerID: [Pending]] = [:]
    /// Whose queue holds each pending drop (by event id).
    private var pendingPeer: [String: MeshPeerID] = [:]
    private var seen: [String: UInt64] = [:]
    private var seenOrder = FIFOQueue<(String, UInt64)>()
    private var depositTimes: [MeshPeerID: [UInt64]] = [:]
    private var publishing: [String: (held: String, deadline: UInt64)] = [:]
    private var publishRetryAt: [String: UInt64] = [:]
    private var relaysUp = 0
    private var keyCounter: UInt64 = 0
    // Watching.
    private var watch: CourierWatch
    /// Watched peers the engine reported as direct peers of a link (deliveries go to them).
    private var direct: Set<MeshPeerID> = []
    private var subscribeDue: UInt64?
    /// The watch was split into smaller chunks that have not been sent yet.
    private var smallerChunksDue = false
    // Delivery.
    /// Deliveries handed to the engine and not answered yet, with their peer.
    private var delivering: [DeliveryRef: MeshPeerID] = [:]
    /// Handover times inside the last minute, by phone (the per-phone rate; pruned at every pass).
    private var deliveriesByPeer: [MeshPeerID: [UInt64]] = [:]
    private var bytesSent: [(atMs: UInt64, bytes: Int)] = []
    private var airtimeRetryAt: UInt64?
    /// The caps that held ready mail back at the last delivery pass (a cap is counted when it starts holding).
    private var holding: Set<AirtimeCap> = []
    /// No envelope, pending drop or lost watch entry expires before this (lowered as they are added).
    private var expiryCheckAt: UInt64 = 0
    /// The bridge's own tags for ``ownTagsDay`` (mail for the bridge itself is for no one here).
    private var ownTags: [[UInt8]] = []
    private var ownTagsDay: UInt32?
    /// Subscriptions whose stored events are still arriving: how many came, the oldest `created_at` (for a backfill
    /// when a chunk's backlog reached the filter's limit), and how many backfill rounds the chunk had.
    private var loads: [String: (count: Int, oldest: Int64, round: Int)] = [:]
    /// Chunks whose backlog is to be asked again, waiting for a backfill subscription to close
    /// (``Limits/maxBackfillsOpen``), oldest first, with the oldest drop their load brought.
    private var backfillsWaiting: [(chunk: String, oldest: Int64)] = []
    /// No held envelope is due for a publish before this (lowered by a deposit, a refusal, a relay coming up).
    private var publishCheckAt: UInt64 = 0

    public init(configuration: Configuration, restored: Restored = Restored()) {
        self.configuration = configuration
        watch = CourierWatch(
            subscriptions: configuration.maxSubscriptions, perSubscription: configuration.peersPerSubscription,
            ttlMs: configuration.watchTTLMs)
        for entry in restored.held { hold(entry) }
        for entry in restored.pending { enqueue(entry) }
        for entry in restored.seen.sorted(by: { $0.atMs < $1.atMs }) {
            seen[entry.id] = entry.atMs
            seenOrder.append((entry.id, entry.atMs))
        }
    }

    public var heldCount: Int { held.count }
    /// Ready mail waits for a slot of the downlink schedule (the caller asks again when one frees up).
    public var waitsForSlots: Bool { holding.contains(.downlinkBudget) }
    public var pendingCount: Int { pendingPeer.count }
    public var watchedCount: Int { watch.entries.count }
    public var subscriptionCount: Int { watch.sent.count }
    /// Tags per subscription filter now (``Configuration/tagsPerFilter``, halved after refusals).
    public var tagsPerFilter: Int { watch.perSubscription * 3 }

    // MARK: Inputs

    /// Takes `input` at `nowMs`; `slots` is how many handovers the mesh's downlink schedule lets go now (the bridge's
    /// router: chat first, courier's share of the budget; unbounded when the gateway runs on its own).
    public mutating func handle(_ input: Input, nowMs: UInt64, slots: Int = .max) -> [Action] {
        var actions: [Action] = []
        switch input {
        case .deposit(let depositor, let bytes):
            deposit(bytes, from: depositor, nowMs: nowMs, into: &actions)
        case .peerVerified(let peer, let noiseKey, let isDirect):
            verified(peer, noiseKey: noiseKey, direct: isDirect, nowMs: nowMs)
        case .peerLost(let peer):
            lost(peer, nowMs: nowMs)
        case .peersResync(let table):
            // Peer reports were dropped while the executor fell behind (a flood): the engine's table is the truth.
            let present = Set(table.map(\.id))
            for peer in table { verified(peer.id, noiseKey: peer.noiseKey, direct: peer.direct, nowMs: nowMs) }
            for (peer, entry) in watch.entries where entry.lostAtMs == nil && !present.contains(peer) { lost(peer, nowMs: nowMs) }
        case .drop(let event, let subscription):
            if let subscription, var load = loads[subscription] {
                load.count += 1
                load.oldest = min(load.oldest, event.createdAt)
                loads[subscription] = load
            }
            take(event, nowMs: nowMs, into: &actions)
        case .endOfStored(let subscription):
            backfill(after: subscription, nowMs: nowMs, into: &actions)
        case .published(let eventID, let accepted):
            guard let attempt = publishing.removeValue(forKey: eventID.hex) else { break }
            if accepted {
                tallies.publishes.add(.confirmed)
                if var entry = held[attempt.held] {
                    entry.publishedMs = nowMs
                    held[attempt.held] = entry
                    actions.append(.storeHeld(entry))
                    publishCheckAt = min(publishCheckAt, nowMs + configuration.republishMs)
                }
            } else {
                tallies.publishes.add(.refused)
                publishRetryAt[attempt.held] = nowMs + configuration.publishRetryMs
                publishCheckAt = min(publishCheckAt, nowMs + configuration.publishRetryMs)
            }
        case .delivered(let ref, let ok):
            let peer = delivering.removeValue(forKey: ref)
            guard ok else {
                // Direct on no link after all: nothing more for it until its next direct announce.
                if let peer { direct.remove(peer) }
                tallies.deliveries.add(.failed)
                break
            }
            tallies.deliveries.add(.delivered)
            // The envelope is remembered as handed over (24 h, on disk): the same mail under another drop (another
            // courier's, or our own coming back from the relay) or deposited again is not delivered twice.
            switch ref {
            case .held(let id):
                if release(id) != nil { actions.append(.removeHeld(id)) }
                remember(id, nowMs: nowMs, into: &actions)
            case .pending(let eventID):
                let entry = pendingPeer[eventID].flatMap { pending[$0]?.first { $0.eventID == eventID } }
                if let envelope = entry.flatMap({ try? CourierEnvelope.decode($0.envelope) }) {
                    remember(Self.envelopeID(envelope), nowMs: nowMs, into: &actions)
                }
                removePending(eventID, into: &actions)
            }
        case .relaysConnected(let count):
            if relaysUp == 0, count > 0 { publishCheckAt = 0 }
            relaysUp = count
        case .refused(let subscription, let message):
            // One halving per refusal: more CLOSEDs of the same REQs (every relay answers it) wait for the smaller ones.
            guard !smallerChunksDue, Self.refusesFilter(subscription: subscription, message: message),
                  watch.halve(minimum: max(1, configuration.minTagsPerFilter / 3))
            else { break }
            tallies.filterHalvings += 1
            smallerChunksDue = true
            watchChanged(nowMs: nowMs)
        case .deadline:
            break
        }
        expire(nowMs: nowMs, into: &actions)
        publishDue(nowMs: nowMs, into: &actions)
        resubscribeIfDue(nowMs: nowMs, into: &actions)
        deliverDue(nowMs: nowMs, slots: slots, into: &actions)
        return actions
    }

    /// When the machine next wants ``Input/deadline``: a debounced resubscription, the UTC day change, a watch entry
    /// or an envelope expiring, a publish due or unanswered, an airtime window reopening. No scan of the stores: the
    /// expiry and publish passes leave their next times behind (``expiryCheckAt``, ``publishCheckAt``).
    public func nextDeadline() -> UInt64? {
        var due: [UInt64?] = [subscribeDue, airtimeRetryAt, expiryCheckAt == .max ? nil : expiryCheckAt]
        if !watch.entries.isEmpty { due.append((UInt64(watch.day) + 1) * 86_400_000) }
        due += publishing.values.map(\.deadline)
        if relaysUp > 0, publishCheckAt != .max { due.append(publishCheckAt) }
        return due.compactMap { $0 }.min()
    }

    // MARK: Deposits

    private mutating func deposit(_ bytes: [UInt8], from depositor: MeshPeerID, nowMs: UInt64, into actions: inout [Action]) {
        guard let envelope = try? CourierEnvelope.decode(bytes) else { return tallies.deposits.add(.malformed) }
        guard !envelope.isExpired(nowMs: nowMs) else { return tallies.deposits.add(.expired) }
        guard envelope.expiryMs <= nowMs + CourierDrop.Limits.maxExpiryAheadMs else { return tallies.deposits.add(.expiryTooFar) }
        guard !isForBridge(envelope, nowMs: nowMs) else { return tallies.deposits.add(.forBridge) }
        let id = Self.envelopeID(envelope)
        if held[id] != nil || seen[id] != nil { return tallies.deposits.add(.duplicate) }
        var times = (depositTimes[depositor] ?? []).filter { $0 + 60_000 > nowMs }
        guard times.count < configuration.depositsPerMinute else { return tallies.deposits.add(.rateLimited) }
        guard held.values.filter({ $0.depositor == depositor }).count < configuration.perDepositor else {
            return tallies.deposits.add(.depositorFull)
        }
        if held.count >= configuration.storeMax, let oldest = held.values.min(by: { ($0.depositedMs, $0.id) < ($1.depositedMs, $1.id) }) {
            _ = release(oldest.id)
            actions.append(.removeHeld(oldest.id))
            tallies.evictions.add(.held)
        }
        times.append(nowMs)
        depositTimes[depositor] = times
        let entry = Held(id: id, envelope: envelope, depositor: depositor, depositedMs: nowMs)
        hold(entry)
        expiryCheckAt = min(expiryCheckAt, envelope.expiryMs)
        publishCheckAt = 0
        actions.append(.storeHeld(entry))
        tallies.deposits.add(.accepted)
    }

    private mutating func publishDue(nowMs: UInt64, into actions: inout [Action]) {
        for (eventID, attempt) in publishing where attempt.deadline <= nowMs {
            publishing[eventID] = nil
            tallies.publishes.add(.unanswered)
            publishRetryAt[attempt.held] = nowMs + configuration.publishRetryMs
            publishCheckAt = min(publishCheckAt, nowMs + configuration.publishRetryMs)
        }
        guard relaysUp > 0, nowMs >= publishCheckAt else { return }
        publishCheckAt = .max
        let inFlight = Set(publishing.values.map(\.held))
        for entry in held.values.sorted(by: { ($0.depositedMs, $0.id) < ($1.depositedMs, $1.id) }) where !inFlight.contains(entry.id) {
            let due = max(entry.publishedMs.map { $0 + configuration.republishMs } ?? 0, publishRetryAt[entry.id] ?? 0)
            if due > nowMs {
                publishCheckAt = min(publishCheckAt, due)
                continue
            }
            guard let event = try? CourierDrop.event(for: entry.envelope, key: nextDropKey(), now: Int64(nowMs / 1000)) else {
                tallies.publishes.add(.unencodable)
                continue
            }
            publishRetryAt[entry.id] = nil
            publishing[event.id.hex] = (entry.id, nowMs + configuration.publishAckMs)
            // Our own drop comes back from the relay when its recipient is watched: taken as seen, never queued.
            remember(event.id.hex, nowMs: nowMs, into: &actions)
            tallies.publishes.add(.sent)
            actions.append(.publish(event))
        }
    }

    /// Tagged for the bridge itself (day − 1, day, day + 1): for no one here.
    private mutating func isForBridge(_ envelope: CourierEnvelope, nowMs: UInt64) -> Bool {
        let day = CourierTag.day(unixSeconds: Int64(nowMs / 1000))
        if ownTagsDay != day {
            ownTags = CourierTag.candidates(noiseKey: configuration.ownNoiseKey, unixSeconds: Int64(nowMs / 1000))
            ownTagsDay = day
        }
        return ownTags.contains(envelope.recipientTag)
    }

    /// An envelope's identity: hex of the first 16 bytes of SHA-256 of its ciphertext (one message under several
    /// drops or deposits is one envelope).
    static func envelopeID(_ envelope: CourierEnvelope) -> String { Hex.encode(SHA256.hash(envelope.ciphertext).prefix(16)) }

    /// A key used for one drop: HMAC(seed, counter), the next counter when one is not a valid secret key.
    private mutating func nextDropKey() -> SchnorrSecretKey {
        while true {
            keyCounter += 1
            var counter: [UInt8] = []
            for shift in stride(from: 56, through: 0, by: -8) { counter.append(UInt8(truncatingIfNeeded: keyCounter >> UInt64(shift))) }
            if let key = try? SchnorrSecretKey(bytes: HMACSHA256.authenticationCode(key: configuration.dropKeySeed, message: counter)) {
                return key
            }
        }
    }

    // MARK: Drops

    private mutating func take(_ event: NostrEvent, nowMs: UInt64, into actions: inout [Action]) {
        let id = event.id.hex
        guard seen[id] == nil else { return tallies.drops.add(.duplicate) }
        let envelope: CourierEnvelope
        do {
            envelope = try CourierDrop.envelope(of: event, nowMs: nowMs)
        } catch {
            tallies.dropRefusals.add(error)
            return remember(id, nowMs: nowMs, into: &actions)
        }
        guard seen[Self.envelopeID(envelope)] == nil else {
            tallies.drops.add(.duplicate)
            return remember(id, nowMs: nowMs, into: &actions)
        }
        let tag = Hex.encode(envelope.recipientTag)
        if isForBridge(envelope, nowMs: nowMs) {
            tallies.drops.add(.forBridge)
            return remember(id, nowMs: nowMs, into: &actions)
        }
        // A stranger's tag is left unseen: the peer may be watched when the relay sends it again.
        guard let peer = watch.owner(ofTag: tag) else { return tallies.drops.add(.notWatched) }
        remember(id, nowMs: nowMs, into: &actions)
        let entry = Pending(eventID: id, peer: peer, envelope: (try? envelope.encode()) ?? [], expiryMs: envelope.expiryMs)
        if let queue = pending[peer], queue.count >= configuration.pendingPerPeer {
            removePending(queue[0].eventID, into: &actions)
            tallies.evictions.add(.pending)
        }
        enqueue(entry)
        expiryCheckAt = min(expiryCheckAt, entry.expiryMs)
        actions.append(.storePending(entry))
        tallies.drops.add(.queued)
        if pendingPeer.count > configuration.pendingTotal, let oldest = pending.values.flatMap({ $0 }).min(by: { $0.expiryMs < $1.expiryMs }) {
            removePending(oldest.eventID, into: &actions)
            tallies.evictions.add(.pending)
        }
    }

    private mutating func remember(_ id: String, nowMs: UInt64, into actions: inout [Action]) {
        seen[id] = nowMs
        seenOrder.append((id, nowMs))
        actions.append(.rememberSeen(eventID: id, atMs: nowMs))
        while seenOrder.count > configuration.seenCapacity, let (old, at) = seenOrder.popFirst() {
            if seen[old] == at { seen[old] = nil }
        }
    }

    private mutating func hold(_ entry: Held) {
        held[entry.id] = entry
        heldByTag[entry.tagHex, default: []].insert(entry.id)
    }

    private mutating func release(_ id: String) -> Held? {
        guard let entry = held.removeValue(forKey: id) else { return nil }
        heldByTag[entry.tagHex]?.remove(id)
        if heldByTag[entry.tagHex]?.isEmpty == true { heldByTag[entry.tagHex] = nil }
        return entry
    }

    private mutating func enqueue(_ entry: Pending) {
        pending[entry.peer, default: []].append(entry)
        pendingPeer[entry.eventID] = entry.peer
    }

    private mutating func removePending(_ eventID: String, into actions: inout [Action]) {
        guard let peer = pendingPeer.removeValue(forKey: eventID), var queue = pending[peer],
              let index = queue.firstIndex(where: { $0.eventID == eventID })
        else { return }
        queue.remove(at: index)
        pending[peer] = queue.isEmpty ? nil : queue
        actions.append(.removePending(eventID: eventID))
    }

    // MARK: Watching

    private mutating func verified(_ peer: MeshPeerID, noiseKey: [UInt8], direct isDirect: Bool, nowMs: UInt64) {
        _ = watch.roll(nowMs: nowMs)
        if watch.verified(peer, noiseKey: noiseKey, direct: isDirect, nowMs: nowMs) { watchChanged(nowMs: nowMs) }
        if isDirect, watch.entries[peer] != nil { direct.insert(peer) } else { direct.remove(peer) }
    }

    private mutating func lost(_ peer: MeshPeerID, nowMs: UInt64) {
        direct.remove(peer)
        watch.lost(peer, nowMs: nowMs)
        expiryCheckAt = min(expiryCheckAt, nowMs + configuration.watchTTLMs)
    }

    private mutating func watchChanged(nowMs: UInt64) {
        if subscribeDue == nil { subscribeDue = nowMs + configuration.subscribeDebounceMs }
    }

    /// The changed subscriptions, once the debounce has passed (at once at the UTC day change).
    private mutating func resubscribeIfDue(nowMs: UInt64, into actions: inout [Action]) {
        let dayChanged = watch.roll(nowMs: nowMs)
        guard dayChanged || (subscribeDue.map { $0 <= nowMs } ?? false) else { return }
        subscribeDue = nil
        smallerChunksDue = false
        for action in watch.resubscribe(nowMs: nowMs, filterLimit: configuration.filterLimit) {
            if case .subscribe(let id, _) = action { loads[id] = (0, .max, 0) }
            actions.append(action)
        }
    }

    /// Whether a relay's `CLOSED` (of `subscription`) or `NOTICE` (nil) may be a filter refused as too large: relays
    /// word it differently (COURIER.md §4.3), so any `CLOSED` of a courier subscription counts but for what is plainly
    /// about something else — the transient `auth-required:` and `rate-limited:`, NIP-01's `duplicate:`, and a message
    /// about the number of subscriptions that names no filter (nostream's "Too many subscriptions", a cap of 10 that
    /// backfill rounds can reach; smaller filters would not help) — and a `NOTICE` when it names a filter. A wrong guess
    /// costs one halving, and halvings stop at ``Configuration/minTagsPerFilter``.
    static func refusesFilter(subscription: String?, message: String) -> Bool {
        let text = message.lowercased()
        let namesFilter = text.contains("filter")
        guard let subscription else { return namesFilter }
        guard subscription.hasPrefix("courier-"),
              !["auth-required:", "rate-limited:", "duplicate:"].contains(where: { text.hasPrefix($0) })
        else { return false }
        return namesFilter || !text.contains("subscription")
    }

    /// A chunk's stored drops reached the filter's limit: the relays may hold older ones within the day it asked for,
    /// so the same tags are asked again up to the oldest seen (`<id>-older`), round after round, until a round brings
    /// fewer than the limit (COURIER.md §4.3 "Ours"), at most ``Limits/maxBackfillRounds``.
    private mutating func backfill(after subscription: String, nowMs: UInt64, into actions: inout [Action]) {
        guard let load = loads.removeValue(forKey: subscription) else { return }
        let isBackfill = subscription.hasSuffix("-older")
        let chunk = isBackfill ? String(subscription.dropLast("-older".count)) : subscription
        if load.count >= configuration.filterLimit, load.oldest != .max, load.round < Limits.maxBackfillRounds {
            // A chunk's next round keeps its subscription; a first round waits while others are open.
            if !isBackfill && openBackfills >= Limits.maxBackfillsOpen {
                backfillsWaiting.removeAll { $0.chunk == chunk }
                backfillsWaiting.append((chunk, load.oldest))
                return
            }
            if askOlder(chunk, until: load.oldest, round: load.round + 1, nowMs: nowMs, into: &actions) { return }
        }
        guard isBackfill else { return }
        actions.append(.unsubscribe(id: subscription))
        // The chunks waiting longest take the places that freed up.
        while openBackfills < Limits.maxBackfillsOpen, !backfillsWaiting.isEmpty {
            let next = backfillsWaiting.removeFirst()
            _ = askOlder(next.chunk, until: next.oldest, round: 1, nowMs: nowMs, into: &actions)
        }
    }

    private var openBackfills: Int { loads.keys.reduce(0) { $0 + ($1.hasSuffix("-older") ? 1 : 0) } }

    /// Asks `chunk`'s tags again for drops older than `until` (`<chunk>-older`); false when the chunk is no longer sent.
    private mutating func askOlder(_ chunk: String, until: Int64, round: Int, nowMs: UInt64, into actions: inout [Action]) -> Bool {
        guard let slot = Int(chunk.dropFirst("courier-".count)), let tags = watch.sent[slot] else { return false }
        let id = chunk + "-older"
        loads[id] = (0, .max, round)
        tallies.backfills += 1
        actions.append(.subscribe(id: id, filter: NostrFilter(
            kinds: [CourierDrop.kind], tags: ["x": tags], since: Int64(nowMs / 1000) - 86_400, until: until,
            limit: configuration.filterLimit)))
        return true
    }

    // MARK: Expiry and delivery

    /// Removes what expired; a pass over the stores runs only once something can have (``expiryCheckAt``), so an
    /// input costs no scan of every watched peer and every envelope.
    private mutating func expire(nowMs: UInt64, into actions: inout [Action]) {
        while let (old, at) = seenOrder.first, at + configuration.seenLifetimeMs <= nowMs {
            _ = seenOrder.popFirst()
            if seen[old] == at { seen[old] = nil }
        }
        guard nowMs >= expiryCheckAt else { return }
        if watch.expire(nowMs: nowMs) { watchChanged(nowMs: nowMs) }
        for entry in held.values where entry.envelope.isExpired(nowMs: nowMs) {
            _ = release(entry.id)
            actions.append(.removeHeld(entry.id))
            tallies.expired.add(.held)
        }
        for queue in pending.values {
            for entry in queue where nowMs >= entry.expiryMs {
                removePending(entry.eventID, into: &actions)
                tallies.expired.add(.pending)
            }
        }
        expiryCheckAt = ([watch.nextExpiry()] + held.values.map(\.envelope.expiryMs) + pending.values.flatMap { $0.map(\.expiryMs) })
            .compactMap { $0 }.min() ?? .max
    }

    /// Hands ready mail over: for every direct phone its smallest first, then everyone's second (one phone's backlog
    /// does not hold the others' first mail back), within the per-phone and byte caps and `slots`.
    private mutating func deliverDue(nowMs: UInt64, slots: Int, into actions: inout [Action]) {
        airtimeRetryAt = nil
        var holding: Set<AirtimeCap> = []
        defer {
            for cap in holding.subtracting(self.holding) { tallies.airtimeWaits.add(cap) }
            self.holding = holding
        }
        // Handover times older than the minute count for no one (a phone that left keeps no entry).
        deliveriesByPeer = deliveriesByPeer.compactMapValues { times in
            let recent = times.filter { $0 + 60_000 > nowMs }
            return recent.isEmpty ? nil : recent
        }
        guard !direct.isEmpty, !pending.isEmpty || !held.isEmpty else { return }
        var mail: [MeshPeerID: [(ref: DeliveryRef, bytes: [UInt8])]] = [:]
        for peer in direct {
            for entry in pending[peer] ?? [] { mail[peer, default: []].append((.pending(eventID: entry.eventID), entry.envelope)) }
            for tag in watch.entries[peer]?.tags ?? [] {
                for id in heldByTag[tag] ?? [] {
                    if let entry = held[id] { mail[peer, default: []].append((.held(id), entry.bytes)) }
                }
            }
        }
        let order = mail.flatMap { peer, items in
            items.filter { delivering[$0.ref] == nil }.sorted { $0.bytes.count < $1.bytes.count }.enumerated()
                .map { (rank: $0.offset, peer: peer, ref: $0.element.ref, bytes: $0.element.bytes) }
        }.sorted { ($0.rank, $0.bytes.count, $0.peer) < ($1.rank, $1.bytes.count, $1.peer) }
        bytesSent.removeAll { $0.atMs + 60_000 <= nowMs }
        var bytesInWindow = bytesSent.reduce(0) { $0 + $1.bytes }
        var times: [MeshPeerID: [UInt64]] = [:]
        var slotsLeft = slots
        for item in order {
            let sent = times[item.peer] ?? deliveriesByPeer[item.peer] ?? []
            times[item.peer] = sent
            let cap: AirtimeCap? =
                if sent.count >= configuration.deliveriesPerPeerPerMinute { .peerRate }
                else if bytesInWindow > 0 && bytesInWindow + item.bytes.count > configuration.bytesPerMinute { .bytes }
                else if slotsLeft <= 0 { .downlinkBudget }
                else { nil }
            if let cap {
                holding.insert(cap)
                // The caller wakes the gateway when the schedule has a slot again; the gateway's own caps reopen here.
                let reopens = cap == .peerRate ? sent.first.map { $0 + 60_000 } : bytesSent.first.map { $0.atMs + 60_000 }
                if cap != .downlinkBudget, let reopens { airtimeRetryAt = min(airtimeRetryAt ?? .max, reopens) }
                continue
            }
            slotsLeft -= 1
            times[item.peer] = sent + [nowMs]
            bytesInWindow += item.bytes.count
            bytesSent.append((nowMs, item.bytes.count))
            delivering[item.ref] = item.peer
            tallies.deliveries.add(.sent)
            actions.append(.deliver(to: item.peer, envelope: item.bytes, ref: item.ref))
        }
        for (peer, sent) in times { deliveriesByPeer[peer] = sent.isEmpty ? nil : sent }
    }
}

/// The gateway's counters: typed, without identities (no peer, tag or event id ever reaches a metric).
public struct CourierCounters: Sendable, Equatable {
    public enum Deposit: String, CounterKey, CaseIterable {
        case accepted, duplicate, malformed, expired
        case expiryTooFar = "expiry_too_far"
        case forBridge = "for_bridge"
        case rateLimited = "rate_limited"
        case depositorFull = "depositor_full"
    }

    public enum Drop: String, CounterKey, CaseIterable {
        case queued, duplicate
        case notWatched = "not_watched"
        case forBridge = "for_bridge"
    }

    public enum Publish: String, CounterKey, CaseIterable {
        case sent, confirmed, refused, unanswered, unencodable
    }

    public enum Delivery: String, CounterKey, CaseIterable {
        case sent, delivered, failed
    }

    public enum Store: String, CounterKey, CaseIterable {
        case held, pending
    }

    public typealias AirtimeCap = CourierGateway.AirtimeCap

    public var deposits = Tally<Deposit>()
    public var drops = Tally<Drop>()
    public var dropRefusals = Tally<CourierDrop.Refusal>()
    public var publishes = Tally<Publish>()
    public var deliveries = Tally<Delivery>()
    public var evictions = Tally<Store>()
    public var expired = Tally<Store>()
    /// Peers not watched because the watch list was full of direct peers.
    public var watchOverflow = 0
    /// Times ready mail began waiting for airtime, by the cap that held it.
    public var airtimeWaits = Tally<AirtimeCap>()
    /// Subscriptions asked again for older drops because a chunk's backlog reached the filter's limit.
    public var backfills = 0
    /// Times the chunk was halved because a relay refused a filter.
    public var filterHalvings = 0

    public init() {}
}
