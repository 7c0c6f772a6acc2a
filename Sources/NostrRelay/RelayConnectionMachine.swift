/// The life of one relay connection as a pure state machine: inputs in, actions out, no I/O, time and
/// randomness passed in (NOSTR-GEO §6).
///
/// ```
///  idle ──start──▶ connecting ──opened──▶ connected ──(answered, up 60 s: stable)
///   ▲                 │  ▲ failure/timeout      │ closed, unanswered, misbehaving
///   │                 ▼  │ retry time reached    ▼
///   │            backingOff ◀────────────────────┘
///   │                 │ 10th failure, or DNS failure
///   │                 ▼
///   └── stop ── permanentlyFailed ── 600 s after the last disconnect ──▶ connecting (one probe)
/// ```
/// Backoff before attempt k+1 after the k-th consecutive failure: min(1 s · 2^(k−1), 300 s) × U[0.8, 1.2).
///
/// Every way an attempt or a connection ends is a failure of the same series — refused, timed out, closed
/// by the peer, silent, misbehaving — so a relay that completes the handshake and closes at once backs off
/// exactly like one that refuses the connection (it used to be retried every 0.8–1.2 s, because any
/// connection that had come up restarted the series). Only a **stable** connection ends the series: one
/// that has answered (a frame or a PONG, ``answered()``) and stayed up ``Limits/stableAfter``. Its loss
/// is then failure 1 of a new series.
public struct RelayConnectionMachine: Sendable {
    public enum Limits {
        /// Consecutive failures after which the relay counts as permanently failed (phones: 10).
        public static let maxConsecutiveFailures = 10
        /// Backoff ceiling (phones: 300 s).
        public static let maxBackoff: Duration = .seconds(300)
        /// A permanently failed relay is probed again this long after its last disconnect (iOS: 600 s).
        public static let permanentFailureRetry: Duration = .seconds(600)
        /// A connection that has answered and stayed up this long is stable: the failure series is over.
        /// A minute is far longer than any flapping relay's cycle seen (handshake-and-close, close after
        /// the first EOSE) and far shorter than a relay's normal life (hours), and it covers a whole PING
        /// round of the pool's liveness probe (``RelayPoolCore/Liveness``).
        public static let stableAfter: Duration = .seconds(60)
    }

    public enum State: Equatable, Sendable {
        case idle
        case connecting(deadline: ContinuousClock.Instant)
        case connected(since: ContinuousClock.Instant)
        case backingOff(until: ContinuousClock.Instant)
        case permanentlyFailed(retryAt: ContinuousClock.Instant)
        case stopped
    }

    /// How an attempt or connection ended.
    public enum Failure: Equatable, Sendable {
        /// Name did not resolve: permanent at once (phones: "hostname could not be found").
        case dns
        /// Refused, reset, TLS or handshake failure.
        case connect
        /// Connect timeout passed.
        case timeout
        /// An open connection closed.
        case closed
        /// An open connection stopped answering (no frame, no PONG within the pool's answer window).
        case unanswered
        /// The pool closed an open connection that kept sending invalid frames or events.
        case misbehaving
    }

    public enum Action: Equatable, Sendable {
        /// Open a socket now.
        case connect
        /// Abort the current attempt (connect timeout) — the driver closes the socket and counts a timeout.
        case abort
        /// Close the socket (``stop()``) — not a failure.
        case close
        /// The connection is up: flush queued events and replay subscriptions.
        case connected
        /// Nothing is connected any more; EOSE waits on this relay are over.
        case disconnected
    }

    public private(set) var state: State = .idle
    /// Failures since the last stable connection (0 once the current one is stable).
    public private(set) var consecutiveFailures = 0
    /// The current connection has answered at least once (``answered()``).
    public private(set) var hasAnswered = false
    public let connectTimeout: Duration
    /// Uniform random in [0, 1) for the jitter; injected so tests are deterministic.
    private let jitterUnit: @Sendable () -> Double
    private var probing = false

    public init(connectTimeout: Duration = .seconds(10), jitterUnit: @escaping @Sendable () -> Double) {
        self.connectTimeout = connectTimeout
        self.jitterUnit = jitterUnit
    }

    /// min(1 s · 2^(k−1), 300 s) × (0.8 + 0.4 · unit) for the k-th consecutive failure (k ≥ 1).
    public static func backoff(failure k: Int, jitterUnit unit: Double) -> Duration {
        let exponent = min(max(k - 1, 0), 20)
        let base = min(Duration.seconds(1 << exponent), Limits.maxBackoff)
        return base * (0.8 + 0.4 * min(max(unit, 0), 0.999_999))
    }

    public var isConnected: Bool {
        if case .connected = state { return true }
        return false
    }

    /// The current connection is stable (``Limits/stableAfter``): its failure series is over.
    public private(set) var isStable = false

    /// Begin connecting (from idle or stopped).
    public mutating func start(now: ContinuousClock.Instant) -> [Action] {
        switch state {
        case .idle, .stopped:
            state = .connecting(deadline: now + connectTimeout)
            return [.connect]
        default:
            return []
        }
    }

    /// The upgrade completed. The failure series goes on until the connection proves stable.
    public mutating func opened(now: ContinuousClock.Instant) -> [Action] {
        guard case .connecting = state else { return [] }
        state = .connected(since: now)
        hasAnswered = false
        isStable = false
        return [.connected]
    }

    /// The open connection answered (any frame, or a PONG). Needed before it can count as stable.
    public mutating func answered() {
        if isConnected { hasAnswered = true }
    }

    /// The attempt or the open connection ended.
    public mutating func ended(_ failure: Failure, now: ContinuousClock.Instant) -> [Action] {
        let wasConnected = isConnected
        switch state {
        case .connecting, .connected: break
        default: return []
        }
        hasAnswered = false
        isStable = false
        consecutiveFailures += 1
        let permanent = failure == .dns || probing || consecutiveFailures >= Limits.maxConsecutiveFailures
        probing = false
        if permanent {
            state = .permanentlyFailed(retryAt: now + Limits.permanentFailureRetry)
        } else {
            state = .backingOff(until: now + Self.backoff(failure: consecutiveFailures, jitterUnit: jitterUnit()))
        }
        return wasConnected ? [.disconnected] : []
    }

    /// When ``tick(now:)`` next has something to do (connect timeout, stability, end of backoff, the late probe
    /// of a failed relay); nil when nothing is timed.
    public var nextDeadline: ContinuousClock.Instant? {
        switch state {
        case .connected(let since) where !isStable && hasAnswered: since + Limits.stableAfter
        case .connecting(let deadline): deadline
        case .backingOff(let until): until
        case .permanentlyFailed(let retryAt): retryAt
        default: nil
        }
    }

    /// Advances timers: connect timeout, stability, end of backoff, the late probe of a failed relay.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        switch state {
        case .connected(let since) where !isStable && hasAnswered && now - since >= Limits.stableAfter:
            isStable = true
            consecutiveFailures = 0
            probing = false
            return []
        case .connecting(let deadline) where now >= deadline:
            return [.abort] + ended(.timeout, now: now)
        case .backingOff(let until) where now >= until:
            state = .connecting(deadline: now + connectTimeout)
            return [.connect]
        case .permanentlyFailed(let retryAt) where now >= retryAt:
            probing = true
            state = .connecting(deadline: now + connectTimeout)
            return [.connect]
        default:
            return []
        }
    }

    public mutating func stop() -> [Action] {
        let wasConnected = isConnected
        let hadSocket: Bool
        switch state {
        case .connecting, .connected: hadSocket = true
        default: hadSocket = false
        }
        state = .stopped
        hasAnswered = false
        isStable = false
        return (hadSocket ? [.close] : []) + (wasConnected ? [.disconnected] : [])
    }
}

extension RelayConnectionMachine.State {
    /// The state's name as operators see it (`/metrics`, status): `connecting` (also before the first
    /// attempt), `open`, `backoff`, `failed` (permanently, until the late probe) or `closed` (stopped).
    public var name: String {
        switch self {
        case .idle, .connecting: "connecting"
        case .connected: "open"
        case .backingOff: "backoff"
        case .permanentlyFailed: "failed"
        case .stopped: "closed"
        }
    }
}
