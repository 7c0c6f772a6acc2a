/// A binary min-heap: `push` and `pop` in O(log n), the smallest element at `first`. Elements that compare
/// equal leave in no particular order, so callers that need FIFO ties put a sequence number in the element.
struct MinHeap<Element: Comparable> {
    private(set) var items: [Element] = []

    var first: Element? { items.first }
    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Element? {
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

    mutating func removeAll() { items.removeAll() }
}

/// An item due at `due`, ordered by (due, sequence) so that items due together keep their insertion order.
struct Timed<Item>: Comparable {
    let due: UInt64
    let sequence: UInt64
    let item: Item

    static func < (lhs: Timed, rhs: Timed) -> Bool { (lhs.due, lhs.sequence) < (rhs.due, rhs.sequence) }
    static func == (lhs: Timed, rhs: Timed) -> Bool { (lhs.due, lhs.sequence) == (rhs.due, rhs.sequence) }
}
