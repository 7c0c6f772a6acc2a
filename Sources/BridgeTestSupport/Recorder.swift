import Synchronization

/// Everything something in the world reported (a phone's mesh actions, a bridge's verdicts, its log), kept in order,
/// with waits that end on the report itself: nothing polls.
public final class Recorder<Item: Sendable>: Sendable {
    private struct Waiter {
        let id: Int
        let match: @Sendable (Item) -> Bool
        let continuation: CheckedContinuation<Item?, Never>
    }

    private struct State {
        var items: [Item] = []
        var waiters: [Waiter] = []
        var next = 0
    }

    private let state = Mutex(State())

    public init() {}

    public func append(_ item: Item) {
        let ready = state.withLock { state -> [CheckedContinuation<Item?, Never>] in
            state.items.append(item)
            var matched: [CheckedContinuation<Item?, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.match(item) else { return false }
                matched.append(waiter.continuation)
                return true
            }
            return matched
        }
        for continuation in ready { continuation.resume(returning: item) }
    }

    public var all: [Item] { state.withLock { $0.items } }

    public func count(where match: (Item) -> Bool) -> Int { state.withLock { $0.items.filter(match).count } }

    /// The first item matching `match` from the `after`-th on — already here, or the next to come within `seconds` of
    /// real time (a backstop
    /// for a bug, never a schedule: a world driven by its manual clock answers in milliseconds); nil when none came.
    public func first(after: Int = 0, within seconds: Double = 20, where match: @escaping @Sendable (Item) -> Bool) async -> Item? {
        let id = state.withLock { state -> Int in
            state.next += 1
            return state.next
        }
        let backstop = Task {
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            self.give(up: id)
        }
        defer { backstop.cancel() }
        return await withCheckedContinuation { continuation in
            let held = state.withLock { state -> Item? in
                if after < state.items.count, let item = state.items[after...].first(where: match) { return item }
                state.waiters.append(Waiter(id: id, match: match, continuation: continuation))
                return nil
            }
            if let held { continuation.resume(returning: held) }
        }
    }

    /// Waits until `count` items match (within `seconds`); the matching items, however many came.
    public func count(_ count: Int, within seconds: Double = 20, where match: @escaping @Sendable (Item) -> Bool) async -> [Item] {
        let seen = Mutex(0)
        _ = await first(within: seconds) { item in
            guard match(item) else { return false }
            return seen.withLock { seen in
                seen += 1
                return seen >= count
            }
        }
        return state.withLock { $0.items.filter(match) }
    }

    private func give(up id: Int) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(returning: nil)
    }

    /// Waits until `done` holds for everything reported so far, looking again after each new report, at most
    /// `seconds` in all; whether it held.
    public func until(within seconds: Double = 60, _ done: ([Item]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while true {
            let items = all
            if done(items) { return true }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            let (whole, attoseconds) = left.components
            _ = await first(after: items.count, within: Double(whole) + Double(attoseconds) / 1e18) { _ in true }
        }
    }
}
