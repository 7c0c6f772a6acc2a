/// The life of one relay connection as a pure state machine: inputs in, actions out, no I/O, time and
/// randomness passed in (NOSTR-GEO §6).
///
/// ```
///  idle ──start──▶ connecting ──opened──▶ connected
///   ▲                 │  ▲ failure/timeout      │ closed
///   │                 ▼  │ retry time reached    ▼
///   │            backingOff ◀────────────────────┘
///   │                 │ 10th failure, or DNS failure
///   │                 ▼
///   └── stop ── permanentlyFailed ── 600 s after the last disconnect ──▶ connecting (one probe)
/// ```
/// Backoff before attempt k+1 after the k-th consecutive failure: min(1 s · 2^(k−1), 300 s) × U[0.8, 1.2).
public struct RelayConnectionMachine: Sendable {
    public enum Limits {
        /// Consecutive failures after which the relay counts as permanently failed (phones: 10).
        public static let maxConsecutiveFailures = 10
        /// Backoff ceiling (phones: 300 s).
        public static let maxBackoff: Duration = .seconds(300)
        /// A permanently failed relay is probed again this long after its last disconnect (iOS: 600 s).
        public static let permanentFailureRetry: Duration = .seconds(600)
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
    }

    public enum Action: Equatable, Sendable {
        /// Open a socket now.
        case connect
        /// Abort the current attempt (timeout) — the driver closes the socket.
        case abort
        /// The connection is up: flush queued events and replay subscriptions.
        case connected
        /// Nothing is connected any more; EOSE waits on this relay are over.
        case disconnected
    }

    public private(set) var state: State = .idle
    public private(set) var consecutiveFailures = 0
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

    public mutating func opened(now: ContinuousClock.Instant) -> [Action] {
        guard case .connecting = state else { return [] }
        state = .connected(since: now)
        consecutiveFailures = 0
        probing = false
        return [.connected]
    }

    /// The attempt or the open connection ended.
    public mutating func ended(_ failure: Failure, now: ContinuousClock.Instant) -> [Action] {
        let wasConnected = isConnected
        switch state {
        case .connecting, .connected: break
        default: return []
        }
        if wasConnected {
            // A connection that was up resets the count: its loss is failure 1 of a new series.
            consecutiveFailures = 1
        } else {
            consecutiveFailures += 1
        }
        let permanent = failure == .dns || probing || consecutiveFailures >= Limits.maxConsecutiveFailures
        probing = false
        if permanent {
            state = .permanentlyFailed(retryAt: now + Limits.permanentFailureRetry)
        } else {
            state = .backingOff(until: now + Self.backoff(failure: consecutiveFailures, jitterUnit: jitterUnit()))
        }
        return wasConnected ? [.disconnected] : []
    }

    /// Advances timers: connect timeout, end of backoff, the late probe of a failed relay.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        switch state {
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
        return (hadSocket ? [.abort] : []) + (wasConnected ? [.disconnected] : [])
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
