public import Nostr
public import WebSocketRuntime

/// What the pool needs from a WebSocket layer. ``WebSocketRuntime`` is the live one; tests pass a fake
/// that records frames. Calls only enqueue: they never call back into the pool synchronously.
public protocol RelayTransport: Sendable {
    func open(_ endpoint: WebSocketEndpoint) -> ConnectionID
    func send(_ connection: ConnectionID, text: String)
    /// A WebSocket PING; the answer comes back as `.pong`.
    func ping(_ connection: ConnectionID)
    /// Stop or resume reading the connection (back-pressure: TCP slows the relay down, nothing is lost).
    func setReading(_ connection: ConnectionID, paused: Bool)
    func close(_ connection: ConnectionID)
}

extension WebSocketRuntime: RelayTransport {}

/// Something the pool reports to its consumer.
public enum RelayPoolEvent: Sendable, Equatable {
    /// A verified event, first copy across all relays.
    case event(NostrEvent, relay: String, subscription: String)
    /// Inbound frames or events of `relay` dropped for `reason`. Reported for the first drop and then every
    /// ``RelayPoolCore/Limits/dropReportInterval``-th of each (relay, reason), so a flood cannot flood the
    /// consumer or the log; `count` is the total so far (every drop is counted in ``RelayStats/drops``).
    case rejected(relay: String, subscription: String?, reason: InboundDrop, count: Int)
    /// Every relay that received the REQ answered EOSE (or dropped) — or, with `fallback` true, the
    /// 10 s EOSE fallback passed first (NOSTR-GEO §6); stored events may still trickle in after it.
    case endOfStoredEvents(subscription: String, fallback: Bool)
    case ok(relay: String, eventID: String, accepted: Bool, message: String)
    case closed(relay: String, subscription: String, message: String)
    /// A NOTICE, within the relay's notice allowance (``RelayPoolCore/Limits/noticeBurst``).
    case notice(relay: String, message: String)
    case connected(relay: String)
    case disconnected(relay: String, reason: String)
    /// An attempt never came up: DNS, refused, timeout or TLS. For TLS the reason carries lws's own log
    /// line (e.g. `… (lws: … self-signed certificate …)`), the only place OpenSSL's reason appears.
    case connectFailed(relay: String, reason: String)
    /// The pool closed an open connection because of the relay's behaviour (`.unanswered` or `.misbehaving`);
    /// a `.disconnected` follows. Reported so the operator sees why (log at warning level).
    case closedByPool(relay: String, why: ConnectionEnd, detail: String)
    /// `relay`'s offline publish queue evicted its oldest event: reported for the first and every
    /// ``RelayPoolCore/Limits/dropReportInterval``-th; `count` is the total.
    case publishQueueDropped(relay: String, count: Int)
}


/// One relay as an operator view needs it (``RelayPoolCore/snapshot(now:)``).
public struct RelaySnapshot: Sendable, Equatable {
    public let url: String
    public let state: RelayConnectionMachine.State
    /// Failures since the last stable connection (the backoff exponent).
    public let consecutiveFailures: Int
    /// While backing off or failed: the time left until the next attempt (what an operator waiting for a relay
    /// that has come back wants to know); nil in every other state.
    public let nextAttemptIn: Duration?
    /// Connected and answered within the answer window: what health counts as up.
    public let isAnswering: Bool
    /// Time since the current connection last answered (nil: not connected, or no answer yet).
    public let sinceLastAnswer: Duration?
    /// Frames of the current connection waiting for verification or delivery.
    public let pendingFrames: Int
    /// Events waiting in the offline publish queue.
    public let queuedEvents: Int
    public let stats: RelayStats
}

/// The whole pool at one instant.
public struct RelayPoolSnapshot: Sendable, Equatable {
    public let relays: [RelaySnapshot]
    /// Verification outcomes of all relays since the pool started.
    public let verification: EventVerifier.Counters

    public var connectedCount: Int { relays.filter { $0.state.name == "open" }.count }
    public var answeringCount: Int { relays.filter(\.isAnswering).count }
}
