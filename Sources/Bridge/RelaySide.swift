public import BridgeCore
public import Nostr
import Synchronization

/// What the bridge needs from the relay side (the executable adapts the live relay pool to it), so this
/// module never touches sockets.
public protocol BridgeRelayClient: Sendable {
    func publish(_ event: NostrEvent)
    /// The authors (lowercase hex) whose events the relay side verifies first once a relay's verification
    /// budget is spent (``BridgeCoordinator`` sends its established senders and the operator's allowed and
    /// verified Nostr keys). Verified all the same: this buys queue priority, never a skipped check.
    func setPriorityAuthors(_ authors: Set<String>)
}

/// The bounded hand-over from the relay pool's consumer to the coordinator: newest kept, every overflow
/// counted (a flood must show up in `/metrics`, not vanish).
public final class RelayIntake: Sendable {
    public enum Limits {
        /// Inputs buffered for the coordinator (a burst of relay backfill is ≤ 200 events per subscription).
        public static let buffer = 1024
    }

    public let stream: AsyncStream<BridgeRelayInput>
    private let continuation: AsyncStream<BridgeRelayInput>.Continuation
    private let droppedCount = Atomic<Int>(0)

    public init(buffer: Int = Limits.buffer) {
        (stream, continuation) = AsyncStream.makeStream(of: BridgeRelayInput.self, bufferingPolicy: .bufferingNewest(buffer))
    }

    public func yield(_ input: BridgeRelayInput) {
        if case .dropped = continuation.yield(input) { droppedCount.add(1, ordering: .relaxed) }
    }

    public func finish() { continuation.finish() }

    /// Inputs dropped because the coordinator fell behind.
    public var dropped: Int { droppedCount.load(ordering: .relaxed) }
}
