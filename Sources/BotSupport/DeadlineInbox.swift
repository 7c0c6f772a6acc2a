import Synchronization

/// The one wake-up of an async owner that runs on deadlines (the bridge's coordinator, the mesh node): other
/// threads post items to it, in order and bounded; the owner's single timer task sleeps until its next deadline
/// (``wait(on:)``) and is woken early by a post, by ``close()``, or by ``bringForward(_:)`` when new work is due
/// sooner than the deadline it sleeps until. Nothing polls: an idle owner sleeps until its deadline.
public final class DeadlineInbox<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var dropped = 0
        var closed = false
        /// The deadline (ms) the owner sleeps until.
        var armed = UInt64.max
    }

    /// Items waiting at most; more are dropped and counted (``take()`` reports them).
    public let capacity: Int
    private let wake = WakeSignal()
    private let state = Mutex(State())

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Queues `item` and wakes the owner; false (dropped, counted) when full or closed.
    @discardableResult
    public func post(_ item: Item) -> Bool {
        let accepted = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            guard state.items.count < capacity else {
                state.dropped += 1
                return false
            }
            state.items.append(item)
            return true
        }
        if accepted { wake.signal() }
        return accepted
    }

    /// What waits, oldest first, and how many posts were dropped since the last take.
    public func take() -> (items: [Item], dropped: Int) {
        state.withLock { state in
            defer {
                state.items.removeAll()
                state.dropped = 0
            }
            return (state.items, state.dropped)
        }
    }

    public var isClosed: Bool { state.withLock { $0.closed } }

    /// No more posts; the owner is woken (its loop sees ``isClosed`` and ends).
    public func close() {
        state.withLock { $0.closed = true }
        wake.signal()
    }

    /// Wakes the owner when `deadline` (ms) is earlier than the one it sleeps until.
    public func bringForward(_ deadline: UInt64) {
        let earlier = state.withLock { state -> Bool in
            guard deadline < state.armed else { return false }
            state.armed = deadline
            return true
        }
        if earlier { wake.signal() }
    }

    /// Sleeps on `time` until `deadline` (ms), a post, ``bringForward(_:)`` with an earlier deadline, ``close()``
    /// or the task's cancellation, whichever comes first. One waiter at a time.
    public func wait(until deadline: UInt64, on time: any TimeSource) async {
        state.withLock { $0.armed = deadline }
        await time.wait(untilMs: deadline, or: wake)
        state.withLock { $0.armed = .max }
    }
}
