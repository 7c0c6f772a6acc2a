/// A first-in first-out queue on an array with a moving head: `append` and `popFirst` are O(1) amortised
/// (the consumed prefix is dropped once it is more than half of the array, or at once when all is consumed).
public struct FIFOQueue<Element> {
    public init() {}

    private var items: [Element] = []
    private var head = 0

    public var count: Int { items.count - head }
    public var isEmpty: Bool { head == items.count }
    public var first: Element? { isEmpty ? nil : items[head] }

    public mutating func append(_ element: Element) { items.append(element) }

    public mutating func popFirst() -> Element? {
        guard !isEmpty else { return nil }
        let element = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 1_024)
            head = 0
        } else if head > 256, head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}
