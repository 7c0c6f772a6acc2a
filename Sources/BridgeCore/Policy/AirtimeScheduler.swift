public import BotSupport

/// Everything the bridge puts on the mesh from Nostr — carriers for each served channel level, ring
/// carriers, the plain-text mirror — shares **one airtime budget** and is scheduled here (issue 16 part 3,
/// issue 14's fairness item: one scheduler for both).
///
/// Each item is held first for a random 0.2–1.5 s (phones' hold, so several bridges on one island hear each
/// other's copy first), then re-checked by the caller, then sent when the shared budget, its lane's own
/// limit and its sender's pacing allow. Which ready item goes next (the `fair` discipline, the default):
///
/// 1. **Established senders first.** A sender is established when the caller says so (a protected or
///    allow-listed identity) or when this scheduler first put one of its messages on the air at least
///    ``Settings/establishedAfter`` (10 min) ago. Only delivered messages make a sender established, so a flood of
///    fresh keys can promote at most as many keys as the budget lets through (30 a minute), however many
///    keys it has; a regular who posted before the flood keeps its place ahead of all of them. The
///    priority covers ``Settings/establishedQuota`` messages per fairness window in each lane (a
///    message's carrier and its mirror line are one message in two lanes, each counted in its own);
///    beyond that a chatty regular competes with everyone else on airtime, so regulars cannot take the
///    whole budget.
/// 2. **Round-robin across lanes** (channel levels, the ring, the mirror): the lane served longest ago goes
///    first, so a busy level cannot silence a quiet one.
/// 3. **Least airtime first among senders**: the sender with the fewest bytes on the air over the sliding
///    ``Settings/fairnessWindow`` goes first; ties go to the sender served longest ago, then to the oldest
///    item. First-contact keys share what the established leave this way.
///
/// Bounds: each sender may have ``Settings/maxPendingPerSender`` items waiting (its own oldest makes room;
/// an established sender what is left of its quota),
/// and the whole queue ``Settings/maxPending``; when that is full the victim is chosen fairly — a
/// first-contact sender before an established one, then the sender with most items waiting in that lane, then the most
/// airtime, then the newest item — and may be the newcomer itself. The `fifo` discipline (oldest ready item
/// first, oldest dropped when full, no per-sender bound or pacing) is kept for comparison
/// (`bench reach`).
///
/// **Courier handovers** (directed 0x04 to a phone on a link, issue 24, COURIER.md §4.4) are not queued here — the
/// courier gateway keeps its mail — but draw their slots from the same budget: ``courierSlots(now:)`` says how many may
/// go now and ``chargeCourier(_:now:)`` counts them. They go after the downlinks ready to go (chat first), except for
/// ``Settings/courierFloor`` a minute that go ahead of them (while the caller says mail waits, ``setCourierWaiting(_:)``,
/// ``due(now:recheck:)`` leaves those slots free), and never more than ``Settings/courierPerMinute`` a minute.
/// The scheduler is pure: every call carries the time.
public struct AirtimeScheduler<ID: Hashable & Sendable, Lane: Hashable & Sendable, Sender: Hashable & Sendable, Item: Sendable>: Sendable {
    public typealias Discipline = AirtimeDiscipline
    public typealias Settings = AirtimeSettings
    public typealias Drop = AirtimeDrop

    /// A dropped item: which, and why.
    public struct Dropped: Sendable {
        public let id: ID
        public let lane: Lane
        public let reason: Drop
    }

    /// A sent item, with the time it spent queued.
    public struct Sent: Sendable {
        public let id: ID
        public let lane: Lane
        public let sender: Sender
        public let item: Item
        public let enqueuedAt: Double
    }

    struct Pending: Sendable {
        let id: ID
        let lane: Lane
        let sender: Sender
        let item: Item
        let airtime: Int
        let enqueuedAt: Double
        let readyAt: Double
        let sequence: UInt64
        let protected: Bool
    }

    struct SenderState: Sendable {
        var airtime = 0
        var sent = 0
        var lastTurn: UInt64 = 0
    }

    /// A sender's pacing bucket is per lane: each phone views one channel level, and a sender's carriers
    /// and its mirror lines reach different limiters (the Nostr path's and the mesh path's).
    struct PacingKey: Hashable, Sendable {
        let sender: Sender
        let lane: Lane
    }

    struct Bucket: Sendable {
        var tokens: Double
        var at: Double
    }

    struct Delivery: Sendable {
        let at: Double
        let sender: Sender
        let lane: Lane
        let airtime: Int
    }

    public let settings: Settings
    /// The island's budget as this bridge's pace (``PacedBudget``).
    private var budget: PacedBudget
    /// Courier handovers inside the last minute (their share of ``budget``).
    private var courier: SlidingWindowLimiter
    private var laneLimits: [Lane: SlidingWindowLimiter] = [:]
    /// Lanes paced otherwise than ``Settings/senderBurst`` / ``Settings/senderPerSecond`` (``setPacing(_:lane:)``).
    private var lanePacing: [Lane: AirtimePacing] = [:]
    private var laneTurns: [Lane: UInt64] = [:]
    /// Lanes of second forms, ranked by airtime instead of taking turns (``setCompanion(_:)``).
    private var companions: Set<Lane> = []
    private var pending: [Pending] = []
    private var pendingIDs: Set<ID> = []
    private var senders: [Sender: SenderState] = [:]
    /// Pacing buckets of recent deliveries; full ones are forgotten (``expire(now:)``).
    private var pacing: [PacingKey: Bucket] = [:]
    /// Deliveries inside the fairness window per sender and lane: the established quota counts messages,
    /// and one message goes out once per lane (a carrier for iPhones, a mirror line for Android phones).
    private var laneDeliveries: [PacingKey: Int] = [:]
    /// Deliveries inside the fairness window, oldest first (at most the budget's rate × the window).
    private var deliveries: [Delivery] = []
    private var deliveriesHead = 0
    /// Established senders: first and last delivery times.
    private var established: [Sender: (first: Double, last: Double)] = [:]
    private var sequence: UInt64 = 0
    private var turn: UInt64 = 0
    /// Drops by reason.
    public private(set) var drops = Tally<Drop>()
    /// Items sent.
    public private(set) var sentCount = 0
    /// Courier handovers charged to the budget.
    public private(set) var courierCount = 0
    /// Courier mail waits for a slot (``setCourierWaiting(_:)``).
    private var courierWaiting = false

    public init(settings: Settings = Settings()) {
        precondition(settings.perMinute > 0 && settings.maxPending > 0 && settings.maxPendingPerSender > 0)
        self.settings = settings
        budget = PacedBudget(perMinute: settings.perMinute, burst: settings.burst)
        courier = SlidingWindowLimiter(limit: max(1, min(settings.courierPerMinute, settings.perMinute)), window: 60)
    }

    public var pendingCount: Int { pending.count }

    /// Paces each sender of `lane` with `pacing` instead of the settings' (iOS's `MessageRateLimiter`): for a
    /// lane whose receivers judge it by other limits.
    public mutating func setPacing(_ pacing: AirtimePacing, lane: Lane) { lanePacing[lane] = pacing }

    public func isPending(_ id: ID) -> Bool { pendingIDs.contains(id) }

    /// The items waiting, with their lanes, in queue order.
    public var pendingItems: [(id: ID, lane: Lane, item: Item)] { pending.map { ($0.id, $0.lane, $0.item) } }

    /// Items waiting in `lane`.
    public func pendingCount(lane: Lane) -> Int { pending.reduce(0) { $0 + ($1.lane == lane ? 1 : 0) } }

    /// Whether `sender` counts as established at `now` (delivered long enough ago; the caller's protected
    /// flag is per item).
    public func isEstablished(_ sender: Sender, now: Double) -> Bool {
        guard let record = established[sender] else { return false }
        return now - record.first >= settings.establishedAfter
    }

    /// Every sender established at `now` by delivery (the caller's protected senders are its own list).
    public func establishedSenders(now: Double) -> [Sender] {
        established.compactMap { now - $0.value.first >= settings.establishedAfter ? $0.key : nil }
    }

    /// When the next delivered sender becomes established (the set of ``establishedSenders(now:)`` grows
    /// then, or at a delivery); nil when every remembered sender is established already.
    public func nextEstablishment(now: Double) -> Double? {
        established.values.lazy.map { $0.first + self.settings.establishedAfter }.filter { $0 > now }.min()
    }

    /// Bytes `sender` put on the air inside the fairness window (as of the last call).
    public func airtime(of sender: Sender) -> Int { senders[sender]?.airtime ?? 0 }

    /// Queues `item` to be sent no earlier than `now + hold + extraHold`. `unitRandom` ∈ [0, 1) picks the
    /// hold; `extraHold` lets a bridge yield to peer bridges that go first. `airtime` is what the item costs
    /// on the radio (its encoded bytes); `laneLimit` is the lane's own per-minute cap (nil: only the shared
    /// budget); `protected` marks a sender the operator or the stranger cache vouches for. Returns the items
    /// dropped to make room — possibly this one. Duplicates are ignored.
    @discardableResult
    public mutating func enqueue(
        id: ID, lane: Lane, sender: Sender, item: Item, airtime: Int, now: Double, unitRandom: Double,
        extraHold: Double = 0, laneLimit: Int? = nil, protected: Bool = false
    ) -> [Dropped] {
        guard !pendingIDs.contains(id) else { return [] }
        if let laneLimit, laneLimits[lane] == nil { laneLimits[lane] = SlidingWindowLimiter(limit: max(1, laneLimit), window: 60) }
        expire(now: now)
        sequence += 1
        let hold = Self.minimumHold + (Self.maximumHold - Self.minimumHold) * min(max(unitRandom, 0), 1)
        let entry = Pending(
            id: id, lane: lane, sender: sender, item: item, airtime: max(1, airtime), enqueuedAt: now,
            readyAt: now + hold + max(0, extraHold), sequence: sequence, protected: protected)
        var dropped: [Dropped] = []
        switch settings.discipline {
        case .fifo:
            if pending.count >= settings.maxPending {
                dropped.append(remove(at: 0, reason: .queueFull))
            }
        case .fair:
            // Per lane, as the pacing: a sender's carriers and its mirror lines are two backlogs.
            let backlog = pending.indices.filter { pending[$0].sender == sender && pending[$0].lane == lane }
            if backlog.count >= backlogLimit(entry, now: now), let oldest = backlog.first {
                dropped.append(remove(at: oldest, reason: .senderBacklog))
            } else if pending.count >= settings.maxPending {
                guard let victim = victimIndex(incoming: entry, now: now) else {
                    drops.add(.queueFull)
                    return [Dropped(id: id, lane: lane, reason: .queueFull)]
                }
                dropped.append(remove(at: victim, reason: .queueFull))
            }
        }
        pending.append(entry)
        pendingIDs.insert(id)
        return dropped
    }

    /// Items to send now, in send order: held long enough, still wanted (`recheck`; refused ones are
    /// returned in `dropped`), within the shared budget, their lane's limit and their sender's pacing.
    /// Items that cannot go yet keep waiting.
    public mutating func due(now: Double, recheck: (ID, Item) -> Bool) -> (sent: [Sent], dropped: [Dropped]) {
        expire(now: now)
        var dropped: [Dropped] = []
        var index = 0
        while index < pending.count {
            let entry = pending[index]
            if entry.readyAt <= now && !recheck(entry.id, entry.item) {
                dropped.append(remove(at: index, reason: .recheck))
            } else {
                index += 1
            }
        }
        var sent: [Sent] = []
        while chatSlots(now: now) > 0, let next = nextIndex(now: now) {
            // Established first also when an established item waits only for its sender's pacing token
            // (≤ 1 s; ≤ 10 s on a lane paced like the mirror's): first-contact items leave it a budget slot.
            if leavesSlotToPacedPriority(pending[next], now: now) { break }
            let entry = pending.remove(at: next)
            pendingIDs.remove(entry.id)
            budget.take(now: now)
            _ = laneLimits[entry.lane]?.admit(now: now)
            record(entry, now: now)
            sent.append(Sent(id: entry.id, lane: entry.lane, sender: entry.sender, item: entry.item, enqueuedAt: entry.enqueuedAt))
        }
        sentCount += sent.count
        return (sent, dropped)
    }

    /// When ``due(now:recheck:)`` has work next: the earliest hold end; items ready but the budget holding them, its
    /// next token; a lane limit, a sender's pacing or a slot kept for a paced established item holding them, one second
    /// on (a token frees up within that). Nil when nothing is pending.
    public func nextWake(now: Double) -> Double? {
        guard let earliest = pending.map(\.readyAt).min() else { return nil }
        guard earliest <= now else { return earliest }
        guard chatSlots(now: now) > 0 else {
            let token = budget.nextToken(now: now)
            return token > now ? token : now + 1
        }
        guard let next = nextIndex(now: now), !leavesSlotToPacedPriority(pending[next], now: now) else { return now + 1 }
        return now
    }

    /// This bridge's part of the island's budget (``PacedBudget/setShare(_:now:)``).
    public mutating func setShare(_ share: Double, now: Double) { budget.setShare(share, now: now) }

    // MARK: Courier handovers

    /// Courier handovers that may go at `now`: what the budget has free, less a slot for each downlink ready to go (chat
    /// first, COURIER.md §4.4) — except that up to ``Settings/courierFloor`` handovers a minute go ahead of them —, and
    /// never beyond ``Settings/courierPerMinute`` a minute. Asked after ``due(now:recheck:)``, so the downlinks still
    /// ready are those the budget or their pacing holds.
    public func courierSlots(now: Double) -> Int {
        let free = budget.available(now: now)
        let ahead = min(free, courierAhead(now: now))
        let ready = pending.reduce(0) { $0 + (claimsSlot($1, now: now) ? 1 : 0) }
        return min(courier.available(now: now), ahead + max(0, free - ahead - ready))
    }

    /// Whether courier mail waits for a slot (the caller's gateway, after each of its passes): while it does, downlinks
    /// leave it what is left of its floor.
    public mutating func setCourierWaiting(_ waiting: Bool) { courierWaiting = waiting }

    /// What is left of ``Settings/courierFloor`` in the last minute.
    private func courierAhead(now: Double) -> Int {
        max(0, min(settings.courierFloor, courier.limit) - (courier.limit - courier.available(now: now)))
    }

    /// Budget slots downlinks may take now: the free ones, less those kept for waiting courier mail within its floor.
    private func chatSlots(now: Double) -> Int {
        budget.available(now: now) - (courierWaiting ? courierAhead(now: now) : 0)
    }

    /// Counts `count` handovers sent at `now` against the budget and the courier share.
    public mutating func chargeCourier(_ count: Int, now: Double) {
        for _ in 0..<max(0, count) {
            budget.take(now: now)
            _ = courier.admit(now: now)
        }
        courierCount += max(0, count)
    }

    /// When ``courierSlots(now:)`` is next above zero: now, or the courier share or the budget freeing a slot, or — the
    /// free slots claimed by ready downlinks — a second on, as ``nextWake(now:)``.
    public func nextCourierSlot(now: Double) -> Double {
        guard courierSlots(now: now) == 0 else { return now }
        let reopens = max(courier.nextAdmission(now: now), budget.nextToken(now: now))
        return reopens > now ? reopens : now + 1
    }

    /// A downlink that will take the next free budget slot: held long enough and admitted by its lane (its sender's
    /// pacing frees it within a second or ten).
    private func claimsSlot(_ entry: Pending, now: Double) -> Bool {
        entry.readyAt <= now && (laneLimits[entry.lane]?.wouldAdmit(now: now) ?? true)
    }

    // MARK: Choice

    /// The hold phones use before a downlink (`GatewayService`/`BridgeService`: 0.2–1.5 s), so a peer
    /// bridge's broadcast of the same event can arrive first.
    public static var minimumHold: Double { 0.2 }
    public static var maximumHold: Double { 1.5 }
    /// Pacing buckets kept before the full ones are pruned (a bucket refills in 5 s; 30 deliveries a minute
    /// leave at most a few dozen partial ones).
    static var pacingPruneAt: Int { 256 }

    /// Whether `entry` (a first-contact item) must leave the budget's free slots to priority items that wait
    /// only for their pacing token.
    private func leavesSlotToPacedPriority(_ entry: Pending, now: Double) -> Bool {
        priorityClass(entry, now: now) > 0 && chatSlots(now: now) <= pacedPriorityItems(now: now)
    }

    /// Items served ahead of first-contact keys that have served their hold and wait only for their
    /// sender's pacing token.
    private func pacedPriorityItems(now: Double) -> Int {
        guard settings.discipline == .fair else { return 0 }
        return pending.reduce(0) { count, entry in
            guard entry.readyAt <= now, priorityClass(entry, now: now) == 0,
                laneLimits[entry.lane]?.wouldAdmit(now: now) ?? true,
                let bucket = pacing[PacingKey(sender: entry.sender, lane: entry.lane)], tokens(bucket, lane: entry.lane, now: now) < 1
            else { return count }
            return count + 1
        }
    }

    private func eligible(_ entry: Pending, now: Double) -> Bool {
        guard entry.readyAt <= now else { return false }
        if let limiter = laneLimits[entry.lane], !limiter.wouldAdmit(now: now) { return false }
        guard settings.discipline == .fair, let bucket = pacing[PacingKey(sender: entry.sender, lane: entry.lane)] else { return true }
        return tokens(bucket, lane: entry.lane, now: now) >= 1
    }

    private func lanePace(of lane: Lane) -> AirtimePacing {
        lanePacing[lane] ?? AirtimePacing(burst: settings.senderBurst, perSecond: settings.senderPerSecond)
    }

    private func tokens(_ bucket: Bucket, lane: Lane, now: Double) -> Double {
        let pace = lanePace(of: lane)
        return min(pace.burst, bucket.tokens + max(0, now - bucket.at) * pace.perSecond)
    }

    /// Items `entry`'s sender may have waiting: ``Settings/maxPendingPerSender``, or — for a sender served
    /// ahead of first-contact keys — what is left of its quota, whichever is more. Under a flood the shared
    /// budget is often spent for the minute by the time a regular speaks; its lines then wait for the
    /// window to free up and go first, rather than replacing one another.
    private func backlogLimit(_ entry: Pending, now: Double) -> Int {
        guard priorityClass(entry, now: now) == 0 else { return settings.maxPendingPerSender }
        return max(settings.maxPendingPerSender, settings.establishedQuota - delivered(entry))
    }

    /// 0 = served ahead of first-contact keys; 1 = first contact (or an established sender past its quota).
    private func priorityClass(_ entry: Pending, now: Double) -> Int {
        guard entry.protected || isEstablished(entry.sender, now: now) else { return 1 }
        return delivered(entry) < settings.establishedQuota ? 0 : 1
    }

    /// What `entry`'s sender delivered in `entry`'s lane inside the fairness window.
    private func delivered(_ entry: Pending) -> Int {
        laneDeliveries[PacingKey(sender: entry.sender, lane: entry.lane)] ?? 0
    }

    /// The next item: among the lanes that take turns, the best by (class, lane turn, airtime, last turn, age); a
    /// companion lane's best (``setCompanion(_:)``) goes instead when its sender ranks before that one's by (class,
    /// airtime, last turn, age) — a line's second form waits while a sender with less on the air waits.
    private func nextIndex(now: Double) -> Int? {
        typealias Key = (Int, UInt64, Int, UInt64, UInt64)
        var best: (index: Int, key: Key)?
        var companion: (index: Int, key: Key)?
        for (index, entry) in pending.enumerated() where eligible(entry, now: now) {
            let key: Key
            switch settings.discipline {
            case .fifo:
                key = (0, 0, 0, 0, entry.sequence)
            case .fair:
                let state = senders[entry.sender]
                let turn = companions.contains(entry.lane) ? 0 : laneTurns[entry.lane] ?? 0
                key = (priorityClass(entry, now: now), turn, state?.airtime ?? 0, state?.lastTurn ?? 0, entry.sequence)
            }
            if settings.discipline == .fair, companions.contains(entry.lane) {
                if companion == nil || key < companion!.key { companion = (index, key) }
            } else if best == nil || key < best!.key {
                best = (index, key)
            }
        }
        guard let best else { return companion?.index }
        guard let companion else { return best.index }
        // At equal airtime the other lanes' item first: a line's second form never goes ahead of a first one.
        func rank(_ key: Key, second: Int) -> (Int, Int, Int, UInt64, UInt64) { (key.0, key.2, second, key.3, key.4) }
        return rank(companion.key, second: 1) < rank(best.key, second: 0) ? companion.index : best.index
    }

    /// `lane` carries a second form of what other lanes carry (the text mirror's persona lines, one per carrier of the
    /// configured channel): it takes no round-robin turn of its own and its items rank by their sender's airtime
    /// against the other lanes' best, so the mirror is inside fairness — every sender's first carrier before anyone's
    /// mirror line under a backlog (issue 34: 31–38 senders starved on the iPhones with the mirror a lane of its own).
    public mutating func setCompanion(_ lane: Lane) { companions.insert(lane) }

    /// The fair victim when the queue is full: worst first by (first contact, items waiting, airtime), then
    /// the newest item — possibly the newcomer itself, which is then refused; nil when the newcomer is the worst.
    ///
    /// Among equals the newest goes, not the oldest: under a flood of equal first-contact items (fresh keys,
    /// each with its carrier and its mirror line) arriving faster than the queue turns over within a hold —
    /// 400 items a second against 60 per 0.2 s — dropping the oldest pushed out every item before its hold
    /// ended (or, ready, before the next budget slot), so the flood's keys got no airtime at all while it
    /// lasted (issue 14, the world's `FloodTests` with the mirror on). Kept items wait at most the queue's two
    /// minutes of budget, well inside the ±900 s phones accept.
    private func victimIndex(incoming: Pending, now: Double) -> Int? {
        // Items waiting are counted per lane, as the backlog is: a sender's carrier and its mirror line are
        // one item in each of two lanes, so neither form is always the victim (counted per sender, the
        // older form — the carrier — lost every time to the line queued right after it).
        // A companion lane's item (``setCompanion(_:)``) counts all its sender's items: with its carrier waiting it is
        // that sender's second, a victim before anyone's first.
        var waiting: [PacingKey: Int] = [PacingKey(sender: incoming.sender, lane: incoming.lane): 1]
        var waitingPerSender: [Sender: Int] = [incoming.sender: 1]
        for entry in pending {
            waiting[PacingKey(sender: entry.sender, lane: entry.lane), default: 0] += 1
            if !companions.isEmpty { waitingPerSender[entry.sender, default: 0] += 1 }
        }
        func badness(_ entry: Pending) -> (Int, Int, Int, UInt64) {
            let count =
                companions.contains(entry.lane)
                ? waitingPerSender[entry.sender] ?? 0 : waiting[PacingKey(sender: entry.sender, lane: entry.lane)] ?? 0
            return (priorityClass(entry, now: now), count, senders[entry.sender]?.airtime ?? 0, entry.sequence)
        }
        var worst: (index: Int?, key: (Int, Int, Int, UInt64)) = (nil, badness(incoming))
        for (index, entry) in pending.enumerated() {
            let key = badness(entry)
            if key > worst.key { worst = (index, key) }
        }
        return worst.index
    }

    // MARK: Bookkeeping

    private mutating func remove(at index: Int, reason: Drop) -> Dropped {
        let entry = pending.remove(at: index)
        pendingIDs.remove(entry.id)
        drops.add(reason)
        return Dropped(id: entry.id, lane: entry.lane, reason: reason)
    }

    private mutating func record(_ entry: Pending, now: Double) {
        turn += 1
        laneTurns[entry.lane] = turn
        let key = PacingKey(sender: entry.sender, lane: entry.lane)
        let bucket = pacing[key] ?? Bucket(tokens: lanePace(of: entry.lane).burst, at: now)
        pacing[key] = Bucket(tokens: tokens(bucket, lane: entry.lane, now: now) - 1, at: now)
        var state = senders[entry.sender] ?? SenderState()
        state.airtime += entry.airtime
        state.sent += 1
        state.lastTurn = turn
        senders[entry.sender] = state
        laneDeliveries[key, default: 0] += 1
        deliveries.append(Delivery(at: now, sender: entry.sender, lane: entry.lane, airtime: entry.airtime))
        if let record = established[entry.sender] {
            established[entry.sender] = (record.first, now)
        } else {
            established[entry.sender] = (now, now)
            if established.count > settings.maxTrackedSenders,
                let stalest = established.min(by: { $0.value.last < $1.value.last })?.key
            {
                established[stalest] = nil
            }
        }
    }

    /// Drops deliveries older than the fairness window from the senders' airtime; a sender with none left
    /// is forgotten.
    private mutating func expire(now: Double) {
        while deliveriesHead < deliveries.count, now - deliveries[deliveriesHead].at >= settings.fairnessWindow {
            let old = deliveries[deliveriesHead]
            deliveriesHead += 1
            let key = PacingKey(sender: old.sender, lane: old.lane)
            if let count = laneDeliveries[key] { laneDeliveries[key] = count > 1 ? count - 1 : nil }
            guard var state = senders[old.sender] else { continue }
            state.airtime -= old.airtime
            state.sent -= 1
            senders[old.sender] = state.sent <= 0 ? nil : state
        }
        // Buckets are created only by deliveries (≤ the budget's rate); a full one is the same as none.
        if pacing.count > Self.pacingPruneAt {
            pacing = pacing.filter { tokens($0.value, lane: $0.key.lane, now: now) < lanePace(of: $0.key.lane).burst }
        }
        if deliveriesHead > 256 && deliveriesHead * 2 > deliveries.count {
            deliveries.removeFirst(deliveriesHead)
            deliveriesHead = 0
        }
    }
}

/// A lane's per-sender pacing at air time: a token bucket of `burst` items refilled at `perSecond`.
public struct AirtimePacing: Sendable, Equatable {
    public var burst: Double
    public var perSecond: Double

    public init(burst: Double, perSecond: Double) {
        precondition(burst >= 1 && perSecond > 0)
        self.burst = burst
        self.perSecond = perSecond
    }
}

/// How an ``AirtimeScheduler`` picks the next item.
public enum AirtimeDiscipline: String, Sendable, CaseIterable {
    /// Established first, round-robin lanes, least airtime first, fair victims (the default).
    case fair
    /// Oldest ready item first, oldest dropped when full: the scheduler before issue 16, for comparison.
    case fifo
}

/// The limits of ``AirtimeScheduler``; each default has its reason.
public struct AirtimeSettings: Sendable, Equatable {
    public var discipline: AirtimeDiscipline = .fair
    /// Broadcasts per sliding minute, all lanes together: the phones' own gateway budget
    /// (`GatewayService` 30/min, NOSTR-GEO §8.11), so the bridge never puts more on an island than one
    /// phone gateway would, however many levels it serves — nor the island's bridges together (``PacedBudget``).
    public var perMinute = 30
    /// Items that may go at once (``PacedBudget``): 2, a line's carrier and its mirror line together; the rest of the
    /// minute is paced, 28 a minute, one every 2.1 s, so no sliding minute holds more than ``perMinute`` and lines
    /// waiting for the air never wait for a window to turn (issue 34: a minute's 30 went out in its first second, then
    /// nothing for 60 s).
    public var burst: Double = 2
    /// Items waiting for their hold or the budget: two minutes of the budget. At a busy site each
    /// newcomer's first line can then wait behind the next two minutes' newcomers instead of being dropped
    /// (`bench reach`: with 30, 14 of 300 senders went unheard; with 60, none), and a two-minute-old line is
    /// still fresh chat (phones take ±15 min). With ≤ 10 per sender no one sender can fill it.
    public var maxPending = 60
    /// Items one sender may have waiting in one lane: 10, iOS's `MessageRateLimiter` burst (5) and five paced seconds
    /// after it, so a burst the phones would still show goes out whole; an eleventh line replaces the
    /// sender's own oldest. Contention is the victim rule's job: a full queue drops first from the sender
    /// with most waiting.
    public var maxPendingPerSender = 10
    /// How far back airtime is counted for least-airtime-first (seconds): ten minutes, about how long a
    /// chat line stays on a phone's first screen at a busy site; a sender who was loud ten minutes ago is
    /// treated as quiet again.
    public var fairnessWindow: Double = 600
    /// How long after its first delivered message a sender counts as established (seconds): one fairness
    /// window (10 min). A regular is someone whose part in the conversation predates the present crowd:
    /// at a busy site everyone who arrived in the last ten minutes is served by airtime alone (max-min
    /// fair: every newcomer's first line before anyone's second), while a regular who spoke before a flood
    /// began keeps its place ahead of the flood's fresh keys. Shorter (60 s was tried) let every sender
    /// with one line through jump ahead of the newcomers with their second (`bench reach`: 77 of 300
    /// senders unheard instead of 0).
    public var establishedAfter: Double = 600
    /// Messages per fairness window an established sender is served ahead of first-contact keys, counted in
    /// each lane: 12, one in 25 of the window's 300 turns, so a few regulars keep their place and still
    /// leave most of the budget to everyone else. Per lane because the text mirror sends each channel line
    /// a second time (a carrier for iPhones, a persona's line for Android phones): counted per sender, a
    /// regular's 7th line under a flood lost its place with the mirror on (6 of 8 crossed, issue 14).
    public var establishedQuota = 12
    /// Senders remembered as established, least recently delivered forgotten beyond this: only delivered
    /// senders enter (≤ 30 a minute), so a flood needs over two hours of full airtime to push one out.
    public var maxTrackedSenders = 4_096
    /// Per-sender pacing at air time, per lane: iOS `MessageRateLimiter` (NOSTR-GEO §5.5 step 14: per sender
    /// capacity 5, refill 1 token/s, on arrival). A sixth line within a second would be dropped by every
    /// iPhone on the island, so it waits for its token here instead of spending airtime.
    public var senderBurst: Double = 5
    public var senderPerSecond: Double = 1
    /// Courier handovers (directed 0x04 to a phone on a link, COURIER.md §4.4) per sliding minute at most, out of
    /// ``perMinute``: a third (10 of 30), so public chat keeps at least 20 slots a minute however much mail waits, and a
    /// phone that walks by with a backlog (≤ 20 drops) has it in about two minutes when chat is quiet. A handover counts
    /// as one slot like a broadcast: it holds one link 1–4 s for a large envelope (the gateway's 256 KiB a minute bounds
    /// the bytes), where a broadcast is short but relayed by every phone.
    public var courierPerMinute = 10
    /// Handovers per sliding minute that go ahead of downlinks ready to go: 3, so a chat flood that keeps the budget full
    /// still lets private mail through (one handover per 20 s) and costs chat one slot in ten; beyond it, mail takes only
    /// slots no ready downlink wants ("after public-chat downlinks").
    public var courierFloor = 3

    public init(discipline: AirtimeDiscipline = .fair, perMinute: Int = 30, maxPending: Int = 60) {
        self.discipline = discipline
        self.perMinute = perMinute
        self.maxPending = maxPending
    }
}

/// Why an item left an ``AirtimeScheduler``'s queue without being sent (typed counter key).
public enum AirtimeDrop: String, CounterKey {
    /// The queue was full and this item was the fair (or, FIFO, the oldest) victim.
    case queueFull = "queue_full"
    /// Its sender already had ``Settings/maxPendingPerSender`` items waiting; its own oldest made room.
    case senderBacklog = "sender_backlog"
    /// The caller's re-check refused it (seen from another bridge, no longer fresh, …).
    case recheck
}

