/// A set that remembers at most `capacity` elements, forgetting the oldest insertion first, in O(1)
/// (a ring buffer of insertion order plus a hash set; no `Array.removeFirst`).
public struct BoundedSet<Element: Hashable>: Sendable where Element: Sendable {
    public let capacity: Int
    private var members: Set<Element> = []
    private var ring: [Element?]
    private var head = 0
    /// How many elements were forgotten to make room.
    public private(set) var evictions = 0

    public init(capacity: Int) {
        precondition(capacity > 0, "BoundedSet capacity must be positive")
        self.capacity = capacity
        ring = Array(repeating: nil, count: capacity)
    }

    public var count: Int { members.count }

    public func contains(_ element: Element) -> Bool { members.contains(element) }

    /// Inserts `element` (a no-op when present). Returns whether it was new and which element, if any,
    /// was forgotten to make room.
    @discardableResult
    public mutating func insert(_ element: Element) -> (inserted: Bool, evicted: Element?) {
        guard !members.contains(element) else { return (false, nil) }
        let old = ring[head]
        if let old {
            members.remove(old)
            evictions += 1
        }
        ring[head] = element
        head = (head + 1) % capacity
        members.insert(element)
        return (true, old)
    }

    /// Forgets `element` (its ring slot is reused in turn; a later insert of it is kept until its own slot comes round,
    /// or the old slot's, whichever is first).
    public mutating func remove(_ element: Element) { members.remove(element) }

    /// Elements from oldest to newest (for persisting and restoring).
    public var elementsOldestFirst: [Element] {
        (0..<capacity).compactMap { ring[(head + $0) % capacity] }.filter { members.contains($0) }
    }
}

/// At most `limit` events per `window` seconds for one key: a sliding window over the exact event
/// times (the phones' per-signer and per-depositor limits), kept as a fixed ring of the last `limit`
/// accepted times, so checking is O(1).
public struct SlidingWindowLimiter: Sendable {
    public let limit: Int
    public let window: Double
    private var times: [Double]
    private var next = 0
    private var filled = 0

    public init(limit: Int, window: Double = 60) {
        precondition(limit > 0 && window > 0)
        self.limit = limit
        self.window = window
        times = Array(repeating: 0, count: limit)
    }

    /// True when one more event at `now` stays within the limit; if so it is recorded.
    public mutating func admit(now: Double) -> Bool {
        if filled == limit {
            // The oldest of the last `limit` accepted events must have left the window.
            guard now - times[next] >= window else { return false }
        } else {
            filled += 1
        }
        times[next] = now
        next = (next + 1) % limit
        return true
    }

    /// Whether an event at `now` would be admitted, without recording it.
    public func wouldAdmit(now: Double) -> Bool {
        filled < limit || now - times[next] >= window
    }

    /// How many events at `now` would be admitted (O(limit)).
    public func available(now: Double) -> Int {
        limit - times.prefix(filled).reduce(0) { $0 + (now - $1 < window ? 1 : 0) }
    }

    /// When one more event is admitted next: `now` when it would be now, else when the oldest event in the window leaves it.
    public func nextAdmission(now: Double) -> Double {
        wouldAdmit(now: now) ? now : times[next] + window
    }
}

/// One ``SlidingWindowLimiter`` per key, with at most `maxKeys` keys (least recently created dropped, O(1)).
public struct KeyedWindowLimiter<Key: Hashable & Sendable>: Sendable {
    public let limit: Int
    public let window: Double
    private var limiters: [Key: SlidingWindowLimiter] = [:]
    private var order: BoundedSet<Key>

    public init(limit: Int, window: Double = 60, maxKeys: Int) {
        self.limit = limit
        self.window = window
        order = BoundedSet(capacity: maxKeys)
    }

    public mutating func admit(_ key: Key, now: Double) -> Bool {
        if limiters[key] == nil {
            if let evicted = order.insert(key).evicted { limiters[evicted] = nil }
            limiters[key] = SlidingWindowLimiter(limit: limit, window: window)
        }
        return limiters[key]?.admit(now: now) ?? false
    }

    public var trackedKeys: Int { limiters.count }
}

/// A FIFO of at most `capacity` elements in a ring buffer: O(1) append, O(1) eviction of the oldest.
public struct BoundedQueue<Element: Sendable>: Sendable {
    public let capacity: Int
    private var storage: [Element?]
    private var head = 0
    public private(set) var count = 0
    /// Elements evicted because the queue was full.
    public private(set) var dropped = 0

    public init(capacity: Int) {
        precondition(capacity > 0, "capacity must be positive")
        self.capacity = capacity
        storage = Array(repeating: nil, count: capacity)
    }

    public var isEmpty: Bool { count == 0 }

    /// Appends; when full, the oldest element is evicted and returned.
    @discardableResult
    public mutating func append(_ element: Element) -> Element? {
        if count == capacity {
            let evicted = storage[head]
            storage[head] = element
            head = (head + 1) % capacity
            dropped += 1
            return evicted
        }
        storage[(head + count) % capacity] = element
        count += 1
        return nil
    }

    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % capacity
        count -= 1
        return element
    }
}
