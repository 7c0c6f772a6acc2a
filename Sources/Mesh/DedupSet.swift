/// The network dedup set of MESH-WIRE §7.3 (iOS): at most 1 000 keys, each remembered for 300 s; when the
/// set overflows it is trimmed to the newest 750. Insertion order is the eviction order (a FIFO ring), so
/// every operation is O(1) amortised.
struct DedupSet {
    enum Limits {
        /// iOS LRU capacity.
        static let capacity = 1_000
        /// iOS trims to this many when the capacity is exceeded.
        static let trimTo = 750
        /// Keys expire after 300 s.
        static let expiryMs: UInt64 = 300_000
    }

    private var seenAt: [String: UInt64] = [:]
    private var order: [(key: String, at: UInt64)] = []
    private var head = 0

    var count: Int { seenAt.count }

    /// True if `key` was seen (and not expired); otherwise records it and returns false.
    mutating func checkAndInsert(_ key: String, now: UInt64) -> Bool {
        expire(now: now)
        if seenAt[key] != nil { return true }
        seenAt[key] = now
        order.append((key, now))
        if seenAt.count > Limits.capacity {
            while seenAt.count > Limits.trimTo { popOldest() }
        }
        compact()
        return false
    }

    func contains(_ key: String) -> Bool { seenAt[key] != nil }

    mutating func expire(now: UInt64) {
        while head < order.count, now >= order[head].at &+ Limits.expiryMs { popOldest() }
    }

    private mutating func popOldest() {
        guard head < order.count else { return }
        let entry = order[head]
        head += 1
        if seenAt[entry.key] == entry.at { seenAt[entry.key] = nil }
    }

    private mutating func compact() {
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
