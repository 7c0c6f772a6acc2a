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
