/// A binary min-heap: `push` and `pop` in O(log n), the smallest element at `first`. Elements that compare
/// equal leave in no particular order, so callers that need FIFO ties put a sequence number in the element.
public struct MinHeap<Element: Comparable> {
    public init() {}

    public private(set) var items: [Element] = []

    public var first: Element? { items.first }
    public var count: Int { items.count }
    public var isEmpty: Bool { items.isEmpty }

    public mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    public mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, items[left] < items[smallest] { smallest = left }
            if right < items.count, items[right] < items[smallest] { smallest = right }
            guard smallest != parent else { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }

    public mutating func removeAll() { items.removeAll() }
}

/// An item due at `due`, ordered by (due, sequence) so that items due together keep their insertion order.
public struct Timed<Item>: Comparable {
    public let due: UInt64
    public let sequence: UInt64
    public let item: Item

    public init(due: UInt64, sequence: UInt64, item: Item) {
        self.due = due
        self.sequence = sequence
        self.item = item
    }

    public static func < (lhs: Timed, rhs: Timed) -> Bool { (lhs.due, lhs.sequence) < (rhs.due, rhs.sequence) }
    public static func == (lhs: Timed, rhs: Timed) -> Bool { (lhs.due, lhs.sequence) == (rhs.due, rhs.sequence) }
}
