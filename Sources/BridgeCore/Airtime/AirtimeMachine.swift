public import BotSupport
public import BitchatWire
public import BotCrypto
public import Nostr

/// When things go on the mesh (issue 34): the one schedule for everything the bridge puts on the air from Nostr —
/// carriers of each served level, ring carriers, the text mirror's lines — and the courier's handovers, under the
/// island's one budget, paced (``PacedBudget``), not windowed.
///
/// The router decides *what* may cross and hands each downlink over as an ``Offer`` (its ``BridgeRouter/Action/downlink(_:)``);
/// this machine decides *when*: the hold, the lanes, established senders first, least airtime first, per-sender pacing
/// (``AirtimeScheduler``), and who on the island carries it (``CarrierChoice``) with the handover when a bridge leaves.
/// When an offer is due the router re-checks it (the loop rules, freshness) and turns it into its broadcast
/// (``tick(router:now:)``). Courier handovers draw on the same budget (``courierSlots(now:)``, ``chargeCourier(_:now:waiting:)``).
/// Pure: every call carries the time.
public struct AirtimeMachine {
    /// One downlink the router let cross, with what scheduling it needs.
    public struct Offer: Sendable, Equatable {
        public let key: Key
        public let lane: Lane
        public let downlink: BridgeRouter.Downlink
        public let signer: XOnlyPublicKey
        public let createdAt: Int64
        /// The radio copy's stable ID of a rendezvous event (loop rule 1 while it waits).
        public let radioStableID: String?
        /// What it costs on the radio (its encoded bytes).
        public let airtime: Int
        /// The author is on the operator's allow or verify list: scheduled as an established sender's.
        public let protected: Bool
        /// The lane's own per-minute cap, nil for the shared budget alone.
        public let laneLimit: Int?
        /// Draws the hold (∈ [0, 1)).
        public let unit: Double
    }

    /// One downlink: an event as a carrier, or (plain-text mirror) as the bridge's own text.
    public struct Key: Hashable, Sendable {
        public let event: EventID
        public let text: Bool
    }

    /// Where a downlink belongs, for round-robin turns: a channel level (its geohash), the ring, the mirror.
    public enum Lane: Hashable, Sendable {
        case gateway(String)
        case bridge
        case mirror

        var queue: BridgeCounters.DownlinkQueue {
            switch self {
            case .gateway: .gateway
            case .bridge: .bridge
            case .mirror: .mirror
            }
        }
    }

    /// What went on the air and what was dropped or left to another bridge.
    public struct Counters: Sendable, Equatable {
        /// Downlinks broadcast on the mesh, by queue: every form of a message (its carrier on each level, the mirror
        /// line) counts (`bitchat_bridge_downlink_forms_total`).
        public var broadcasts = Tally<BridgeCounters.DownlinkQueue>()
        /// Messages put on the mesh, each once however many forms it took (`bitchat_bridge_forwarded_total`'s
        /// `nostr-to-mesh`).
        public var messages = 0
        /// Downlinks the schedule dropped to make room (a full queue or a sender's own backlog), by lane kind.
        public var queueDrops = Tally<BridgeCounters.DownlinkQueue>()
        /// Downlinks another bridge of the island was chosen to carry (``CarrierChoice``), and those this bridge carried
        /// after all because their carrier left the island within the handover window.
        public var delegated = 0
        public var takenOver = 0

        public init() {}
    }

    public enum Limits {
        /// Downlinks kept for a handover (each holds one event's JSON, ≤ 64 KiB): the whole shared queue's worth twice
        /// over, so a busy minute's delegations all survive the window.
        public static let maxDelegated = 120
    }

    /// The bridges on this island: its own peer ID and the verified peers that announce each role.
    struct IslandBridges: Sendable {
        var own: MeshPeerID?
        var gateways: Set<MeshPeerID> = []
        var rendezvous: Set<MeshPeerID> = []

        func others(on lane: Lane) -> Set<MeshPeerID> {
            switch lane {
            case .gateway, .mirror: gateways
            case .bridge: rendezvous
            }
        }

        /// Who carries `event` on `lane`: nil = this bridge (also when it knows no other bridge).
        func carrier(of event: EventID, lane: Lane) -> MeshPeerID? {
            guard let own else { return nil }
            let others = others(on: lane)
            guard !others.isEmpty, let chosen = CarrierChoice.carrier(for: event, among: others.union([own])), chosen != own
            else { return nil }
            return chosen
        }
    }

    /// A downlink left to another bridge, kept for the handover window in case that bridge leaves.
    struct Delegated: Sendable {
        let offer: Offer
        var carrier: MeshPeerID
        let until: Double
    }

    private var schedule: AirtimeScheduler<Key, Lane, XOnlyPublicKey, Offer>
    private var island = IslandBridges()
    /// Oldest first, at most ``Limits/maxDelegated``.
    private var delegated: [Delegated] = []
    private let handoverWindow: Double
    /// Events of which a form went on the air (``Counters/messages``; bounded like the loop rules' sets).
    private var aired = BoundedSet<EventID>(capacity: LoopGuard<EventID, XOnlyPublicKey>.Limits.maxTrackedEventIDs)
    public private(set) var counters = Counters()

    public init(limits: BridgeLimits = BridgeLimits()) {
        schedule = AirtimeScheduler(settings: limits.airtime)
        schedule.setPacing(limits.mirrorPacing, lane: .mirror)
        schedule.setCompanion(.mirror)
        handoverWindow = limits.handoverWindow
    }

    // MARK: Offers and the air

    /// Schedules `offer` — or, when another bridge on the island is its carrier (``CarrierChoice``), keeps it for the
    /// handover window; what the schedule drops to make room is counted by the dropped item's queue.
    public mutating func offer(_ offer: Offer, now: Double) {
        if let carrier = island.carrier(of: offer.key.event, lane: offer.lane) {
            if delegated.count >= Limits.maxDelegated { delegated.removeFirst(delegated.count - Limits.maxDelegated + 1) }
            delegated.append(Delegated(offer: offer, carrier: carrier, until: now + handoverWindow))
            counters.delegated += 1
            return
        }
        schedule(offer, now: now)
    }

    private mutating func schedule(_ offer: Offer, now: Double) {
        let dropped = schedule.enqueue(
            id: offer.key, lane: offer.lane, sender: offer.signer, item: offer, airtime: offer.airtime, now: now,
            unitRandom: offer.unit, laneLimit: offer.laneLimit, protected: offer.protected)
        for drop in dropped { counters.queueDrops.add(drop.lane.queue) }
    }

    /// The offers due at `now` that `router` still wants (its re-check), as its broadcasts.
    public mutating func tick(router: inout BridgeRouter, now: Double) -> [BridgeRouter.Action] {
        delegated.removeAll { $0.until <= now }
        var islandHas: [EventID] = []
        let due = schedule.due(now: now) { key, offer in
            let check = router.recheck(offer, now: now)
            if check.islandHas { islandHas.append(key.event) }
            return check.wanted
        }
        for sent in due.sent {
            counters.broadcasts.add(sent.lane.queue)
            if aired.insert(sent.id.event).inserted { counters.messages += 1 }
        }
        return router.downlinked(due.sent.map(\.item), islandHas: islandHas)
    }

    /// When ``tick(router:now:)`` has work next: a hold ends or the budget frees up; nil when nothing waits.
    public func nextWake(now: Double) -> Double? { schedule.nextWake(now: now) }

    public var pendingCount: Int { schedule.pendingCount }
    /// Downlinks the schedule dropped, by reason.
    public var drops: Tally<AirtimeDrop> { schedule.drops }
    /// The authors (hex) counted as established at `now` (delivered ≥ 10 min ago).
    public func establishedAuthors(now: Double) -> Set<String> { Set(schedule.establishedSenders(now: now).map(\.hex)) }
    /// When ``establishedAuthors(now:)`` next grows without a delivery (nil: not before the next delivery).
    public func nextEstablishment(now: Double) -> Double? { schedule.nextEstablishment(now: now) }

    // MARK: The island

    /// The bridges on this island: `own` is this bridge's peer ID, `gateways` and `rendezvous` the other verified peers
    /// announcing the gateway or the bridge capability (the caller's peer table: announces heard, leaves and timeouts
    /// applied).
    ///
    /// Decided (issue 16): bridges on one island agree who carries what instead of yielding to copies they may not
    /// hear. For each downlink, ``CarrierChoice`` picks one bridge of the island from the event id and these peer IDs;
    /// only that bridge schedules it. The others keep it for ``BridgeLimits/handoverWindow`` seconds: if its carrier
    /// leaves the set in that time (a leave, or the peer table's timeout), the choice is made again among the remaining
    /// bridges and the new carrier — perhaps this one — schedules it (still re-checked by the router's loop rules, so a
    /// copy already heard is not repeated). A copy that was not heard is not a reason to send another: under radio loss
    /// that is what put messages onto one island twice. The agreement holds once every bridge has heard the others'
    /// announces (each announces on start and every 15 s); all bridges on an island are assumed to serve the same
    /// channel levels (announces do not say which), and a bridge that dies silently loses the events it was chosen for
    /// until the peer table times it out.
    ///
    /// The island's budget is split the same way (issue 34): with n bridges heard on the island each paces 1/n of it
    /// (``PacedBudget``), so together they put no more on the air than one phone gateway would; a bridge that leaves
    /// gives its share back to the others at once (a silent one when the peer table times it out).
    public mutating func setIslandBridges(own: MeshPeerID, gateways: Set<MeshPeerID>, rendezvous: Set<MeshPeerID>, now: Double) {
        island = IslandBridges(own: own, gateways: gateways.subtracting([own]), rendezvous: rendezvous.subtracting([own]))
        schedule.setShare(1 / Double(1 + island.gateways.union(island.rendezvous).count), now: now)
        var kept: [Delegated] = []
        for var item in delegated where item.until > now {
            guard !island.others(on: item.offer.lane).contains(item.carrier) else {
                kept.append(item)
                continue
            }
            if let next = island.carrier(of: item.offer.key.event, lane: item.offer.lane) {
                item.carrier = next
                kept.append(item)
            } else {
                counters.takenOver += 1
                schedule(item.offer, now: now)
            }
        }
        delegated = kept
    }

    /// At a graceful stop: the events of the downlinks still held here that the island has or will have without this
    /// bridge — another bridge of the island takes them over when this bridge's leave arrives (it kept them for the
    /// handover window), or is their carrier already, or the island heard the message's radio copy (`heard`). The
    /// machine remembers them as learned, so the relay's replay after a restart does not carry a second copy of what the
    /// island got while this bridge was away (right after a start a bridge has not heard its island's bridges yet, and
    /// carries as if alone). What only this bridge would carry is left out: the replay carries it.
    public func leftToIsland(heard: (String) -> Bool) -> [EventID] {
        let waiting = schedule.pendingItems.compactMap { item -> EventID? in
            let radioCopy = item.item.radioStableID.map(heard) ?? false
            return island.others(on: item.lane).isEmpty && !radioCopy ? nil : item.id.event
        }
        return waiting + delegated.map(\.offer.key.event)
    }

    /// Downlinks left to another bridge of the island and still inside the handover window.
    public var delegatedCount: Int { delegated.count }

    // MARK: Courier handovers

    /// Courier handovers the schedule lets go now (``AirtimeScheduler/courierSlots(now:)``).
    public func courierSlots(now: Double) -> Int { schedule.courierSlots(now: now) }

    /// When a courier slot is free next (``AirtimeScheduler/nextCourierSlot(now:)``).
    public func nextCourierSlot(now: Double) -> Double { schedule.nextCourierSlot(now: now) }

    /// Counts `count` handovers sent at `now` against the budget, and whether mail still waits for a slot.
    public mutating func chargeCourier(_ count: Int, now: Double, waiting: Bool) {
        schedule.chargeCourier(count, now: now)
        schedule.setCourierWaiting(waiting)
    }
}
