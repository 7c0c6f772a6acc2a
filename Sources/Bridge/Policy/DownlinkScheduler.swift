import BotSupport

/// Paces what the bridge broadcasts on the mesh (`fromGateway` / `fromBridge` carriers), as phones do:
/// each item is held for a random 0.2–1.5 s (so several bridges on one island hear each other's copy
/// first), then re-checked by the caller, then sent within a per-minute budget. Excess waits in a
/// bounded queue; when the queue is full the oldest item is dropped and counted.
public struct DownlinkScheduler<ID: Hashable & Sendable, Item: Sendable>: Sendable {
    public enum Limits {
        /// Shortest hold before a downlink (phones: 0.2 s), so a peer bridge's broadcast can arrive first.
        public static var minimumHold: Double { 0.2 }
        /// Longest hold (phones: 1.5 s).
        public static var maximumHold: Double { 1.5 }
    }

    struct Pending: Sendable {
        let id: ID
        let item: Item
        let readyAt: Double
    }

    public let maxPending: Int
    private var budget: SlidingWindowLimiter
    private var pending: [Pending] = []
    private var pendingIDs: Set<ID> = []
    /// Items dropped because the queue was full (oldest first).
    public private(set) var droppedForQueueBound = 0
    /// Items discarded by the re-check before sending.
    public private(set) var discardedOnRecheck = 0

    /// - Parameters:
    ///   - perMinute: broadcasts allowed per sliding minute (gateway 30, bridge 20).
    ///   - maxPending: queue bound (30 for both roles).
    public init(perMinute: Int, maxPending: Int) {
        precondition(perMinute > 0 && maxPending > 0)
        budget = SlidingWindowLimiter(limit: perMinute, window: 60)
        self.maxPending = maxPending
    }

    public var pendingCount: Int { pending.count }

    public func isPending(_ id: ID) -> Bool { pendingIDs.contains(id) }

    /// Queues `item` to be sent no earlier than `now + hold + extraHold`. `unitRandom` ∈ [0, 1) picks the
    /// hold; `extraHold` lets a bridge yield to peer bridges that go first (see ``BridgeRouter``).
    /// Returns the id of an item dropped to respect the queue bound, if any. Duplicates are ignored.
    @discardableResult
    public mutating func enqueue(id: ID, item: Item, now: Double, unitRandom: Double, extraHold: Double = 0) -> ID? {
        guard !pendingIDs.contains(id) else { return nil }
        var dropped: ID?
        if pending.count >= maxPending {
            // Small bound (30): removing the oldest is cheap and keeps send order simple.
            let oldest = pending.removeFirst()
            pendingIDs.remove(oldest.id)
            droppedForQueueBound += 1
            dropped = oldest.id
        }
        let hold = Limits.minimumHold + (Limits.maximumHold - Limits.minimumHold) * min(max(unitRandom, 0), 1)
        pending.append(Pending(id: id, item: item, readyAt: now + hold + max(0, extraHold)))
        pendingIDs.insert(id)
        return dropped
    }

    /// Items to send now, oldest first: held long enough, still wanted (`recheck`), within the budget.
    /// Items that fail the re-check are discarded; items over budget keep waiting.
    public mutating func due(now: Double, recheck: (ID, Item) -> Bool) -> [(id: ID, item: Item)] {
        var out: [(ID, Item)] = []
        var kept: [Pending] = []
        for entry in pending {
            guard entry.readyAt <= now else {
                kept.append(entry)
                continue
            }
            guard recheck(entry.id, entry.item) else {
                discardedOnRecheck += 1
                pendingIDs.remove(entry.id)
                continue
            }
            if budget.admit(now: now) {
                out.append((entry.id, entry.item))
                pendingIDs.remove(entry.id)
            } else {
                kept.append(entry)
            }
        }
        pending = kept
        return out
    }

    /// When the caller should call ``due(now:recheck:)`` next: the earliest hold end, or, when items are
    /// ready but the budget is spent, the moment the budget frees up. Nil when nothing is pending.
    public func nextWake(now: Double) -> Double? {
        guard let earliest = pending.map(\.readyAt).min() else { return nil }
        if earliest <= now && !budget.wouldAdmit(now: now) { return now + 1 }
        return max(earliest, now)
    }
}

/// Deposits waiting for a relay while none is connected: at most `maxTotal` (20) and `maxPerDepositor` (5)
/// per depositor, the oldest dropped (and counted) first; flushed in arrival order on reconnect.
public struct UplinkQueue<Depositor: Hashable & Sendable, Item: Sendable>: Sendable {
    public let maxTotal: Int
    public let maxPerDepositor: Int
    private var items: [(depositor: Depositor, item: Item)] = []
    public private(set) var dropped = 0

    public init(maxTotal: Int, maxPerDepositor: Int) {
        self.maxTotal = maxTotal
        self.maxPerDepositor = maxPerDepositor
    }

    public var count: Int { items.count }

    /// Queues `item`; returns what was dropped to make room.
    @discardableResult
    public mutating func enqueue(_ item: Item, from depositor: Depositor) -> [Item] {
        var removed: [Item] = []
        if items.filter({ $0.depositor == depositor }).count >= maxPerDepositor,
            let index = items.firstIndex(where: { $0.depositor == depositor })
        {
            removed.append(items.remove(at: index).item)
        }
        if items.count >= maxTotal {
            removed.append(items.removeFirst().item)
        }
        dropped += removed.count
        items.append((depositor, item))
        return removed
    }

    /// Everything queued, oldest first; the queue is empty afterwards.
    public mutating func drain() -> [Item] {
        defer { items.removeAll() }
        return items.map(\.item)
    }
}
