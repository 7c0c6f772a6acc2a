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

/// A set of event ids remembering the most recent `capacity` insertions (FIFO eviction, O(1)).
public struct BoundedIDSet: Sendable {
    private var members: Set<[UInt8]> = []
    private var order: BoundedQueue<[UInt8]>

    public init(capacity: Int) { order = BoundedQueue(capacity: capacity) }

    public var count: Int { members.count }

    public func contains(_ id: [UInt8]) -> Bool { members.contains(id) }

    /// Inserts; returns false when already present.
    @discardableResult
    public mutating func insert(_ id: [UInt8]) -> Bool {
        guard members.insert(id).inserted else { return false }
        if let evicted = order.append(id) { members.remove(evicted) }
        return true
    }
}
