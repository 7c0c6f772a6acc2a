import BotSupport
import IdentityCache
public import Nostr
public import SpamFilter
import Synchronization
public import Identity

/// What the bridge needs from the relay side (the executable adapts the live relay pool to it), so this
/// module never touches sockets.
public protocol BridgeRelayClient: Sendable {
    func publish(_ event: NostrEvent)
    /// The authors (lowercase hex) whose events the relay side verifies first once a relay's verification
    /// budget is spent (``BridgeCoordinator`` sends its established senders and the operator's allowed and
    /// verified Nostr keys). Verified all the same: this buys queue priority, never a skipped check.
    func setPriorityAuthors(_ authors: Set<String>)
}

/// Inbound relay traffic, already verified by the pool (structure, verification budget, signature).
public enum BridgeRelayInput: Sendable {
    case event(NostrEvent)
    /// How many relays are connected now.
    case connectedRelays(Int)
    /// A relay answered `OK true` for this event (stored, or `duplicate:`): it is no longer a pending uplink.
    case accepted(EventID)
}

/// What the operator asks of a running bridge (signals today; the console later). Thread-safe to submit
/// (``BridgeCoordinator/submit(_:)``), handled in order on the coordinator.
public enum OperatorInput: Sendable {
    /// SIGHUP: the policy file read again (or why it could not be read).
    case reloadPolicy(Result<OperatorLists, OperatorLists.LoadError>)
    /// The console's settings: shadow mode on or off, at once, without a restart.
    case setShadowMode(Bool)
    /// The console's settings: the keyword/regex denylist, in force from the next message.
    case setDenylist(Denylist)
    /// The console blocked or unblocked a sender: a bridge holding an operator key publishes the change to the
    /// fleet list (read-modify-write of the newest list); one that holds none ignores it.
    case fleetChange(FleetChange)
    /// The console's settings: new spam filter limits (the `spam` object's keys), in force from the next
    /// message; every sender's budget starts again full (``BridgeJudge/setSpamConfig(_:)``).
    case setSpamLimits(SpamFilterConfig)
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
