import Nostr

/// The frames of one connection between intake and delivery, in arrival order, at most `capacity`.
///
/// Events wait here for their verification (which may finish out of order on several workers); any other
/// message that arrives behind an event waits for its turn, so what a relay sent is reported in the order
/// it sent it. A ring buffer indexed by a per-connection sequence number: O(1) append, completion and
/// delivery; the next event for a worker is found by a cursor that only moves forward.
struct InboundWindow: Sendable {
    enum Slot: Sendable {
        /// An event not yet handed to a worker; `priority`: its claimed author may draw on the relay's
        /// priority reserve when the budget is spent (``RelayPoolCore/setPriorityAuthors(_:)``); `trusted`: its
        /// claimed author is one a trusted subscription names, verified without the budget.
        case waiting(UnverifiedEvent, subscription: String, priority: Bool, trusted: Bool)
        /// An event a worker is verifying.
        case verifying(subscription: String)
        /// A verification outcome waiting for the slots before it.
        case verified(Result<NostrEvent, NostrError>, subscription: String)
        /// A non-event message waiting for the events before it.
        case message(RelayMessage, unixNow: Int64)

        var isReady: Bool {
            switch self {
            case .verified, .message: true
            case .waiting, .verifying: false
            }
        }
    }

    let capacity: Int
    private var slots: [Slot?]
    private var head = 0
    private(set) var count = 0
    /// Sequence number of the oldest slot.
    private var firstSequence: UInt64 = 0
    /// Sequence number from which to look for the next waiting event.
    private var dispatchCursor: UInt64 = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
    }

    var isEmpty: Bool { count == 0 }
    var isFull: Bool { count == capacity }
    private var endSequence: UInt64 { firstSequence + UInt64(count) }

    private func ringIndex(_ sequence: UInt64) -> Int { (head + Int(sequence - firstSequence)) % capacity }

    /// Appends; false when full.
    mutating func append(_ slot: Slot) -> Bool {
        guard !isFull else { return false }
        slots[(head + count) % capacity] = slot
        count += 1
        return true
    }

    /// The oldest event not yet handed out, now marked as being verified.
    mutating func takeWaiting() -> (sequence: UInt64, event: UnverifiedEvent, priority: Bool, trusted: Bool)? {
        var sequence = max(dispatchCursor, firstSequence)
        while sequence < endSequence {
            let index = ringIndex(sequence)
            if case .waiting(let event, let subscription, let priority, let trusted) = slots[index] {
                slots[index] = .verifying(subscription: subscription)
                dispatchCursor = sequence + 1
                return (sequence, event, priority, trusted)
            }
            sequence += 1
        }
        dispatchCursor = sequence
        return nil
    }

    /// Records the outcome for the event at `sequence`; false when that slot is not being verified here
    /// (a stale job from a connection that has ended).
    mutating func complete(_ sequence: UInt64, _ outcome: Result<NostrEvent, NostrError>) -> Bool {
        guard sequence >= firstSequence, sequence < endSequence else { return false }
        let index = ringIndex(sequence)
        guard case .verifying(let subscription) = slots[index] else { return false }
        slots[index] = .verified(outcome, subscription: subscription)
        return true
    }

    /// The oldest slot, if it is ready to be delivered; removed.
    mutating func popReady() -> Slot? {
        guard count > 0, let slot = slots[head], slot.isReady else { return nil }
        return popFirst()
    }

    /// The oldest slot, ready or not; removed (used when the connection ends).
    mutating func popFirst() -> Slot? {
        guard count > 0 else { return nil }
        let slot = slots[head]
        slots[head] = nil
        head = (head + 1) % capacity
        count -= 1
        firstSequence += 1
        return slot
    }
}
