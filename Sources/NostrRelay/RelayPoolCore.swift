public import BotCrypto
import BotSupport
public import Nostr
public import WebSocketRuntime


/// The pool's policy, without threads or sockets: relays, their state machines and queues, the
/// subscriptions, EOSE tracking, cross-relay dedup, verification budgets and liveness. Every input returns
/// what to report.
///
/// Inbound path, per connection and in arrival order (NOSTR-GEO §5.5): frame parsed (the caller may parse
/// off the lock, ``receive(_:on:now:unixNow:)``) → subscription known → freshness window (optional) →
/// dedup lookup on the claimed id → the connection's ``InboundWindow`` (≤ ``Limits/maxPendingFrames``) →
/// id + budget + Schnorr (``takeJob(now:)`` / ``verify(_:)`` / ``finish(_:_:now:)``, on any thread; an event
/// arriving while its relay's budget is spent gets only the id check, at once) →
/// delivered in arrival order: dedup again (first copy wins), filter, id recorded, reported.
///
/// Isolation: every relay has its own verification budget (an ``EventVerifier``; it survives reconnects,
/// so reconnecting does not refill it), its own window (per connection, flushed when it ends) and its own
/// misbehaviour allowance; workers take jobs from the relays in turn. A relay flooding forged events spends
/// its own budget and queue, then is closed and backed off; the others are served as before.
public struct RelayPoolCore: Sendable {
    public enum Limits {
        /// Events kept per relay while it is not connected (phones: 200, oldest dropped).
        public static let maxQueuedEvents = 200
        /// Event ids remembered for cross-relay dedup; a copy arriving after this many newer events is
        /// delivered again (consumers dedup by id as phones do).
        public static let maxRememberedIDs = 8192
        /// Subscriptions at once (nostr-relay allows 32 per connection).
        public static let maxSubscriptions = 32
        /// A second subscribe with the same id this soon after the last one is ignored (phones: 1 s).
        public static let duplicateSubscribeWindow: Duration = .seconds(1)
        /// The initial load counts as done this long after the REQ even if some relay never sent EOSE
        /// (phones: 10 s).
        public static let eoseFallback: Duration = .seconds(10)
        /// Pages one backfill of a trusted subscription asks a relay for (``BackfillPage``): 20,000 records at the
        /// common cap of 500 take 40; more than this is a relay that keeps answering with something new.
        public static let maxBackfillPages = 100
        /// A trusted subscription is asked again this often for what was stamped in the last
        /// ``trustedRefreshLookback`` seconds (what a relay dropped live under a burst).
        public static let trustedRefresh: Duration = .seconds(60)
        public static let trustedRefreshLookback: Int64 = 900
        /// A backfill that lost events in the report stream runs again this long after it ended (the consumer drains).
        public static let backfillAgain: Duration = .seconds(2)
        /// A backfill that brought at least ``catchUpFresh`` events not seen before (a catch-up) runs again this long
        /// after it ended, until one brings fewer: a relay may acknowledge a bulk before it stores it all (rust-nostr's
        /// did, under load) and drops a lagging subscriber's live events, so a stage that started during a bulk would
        /// otherwise wait for the next refresh, a minute later, for the rest.
        public static let catchUpCheck: Duration = .seconds(5)
        public static let catchUpFresh = 100
        /// Frames of one connection between intake and delivery (events waiting for verification, and
        /// messages behind them); a new event beyond it is dropped (`verification_queue_full`). Phones buffer
        /// 256 frames per relay; a real relay's backfill (≤ 200 per subscription) fits.
        public static let maxPendingFrames = 256
        /// With this many frames in a connection's window the pool stops reading that connection (TCP
        /// back-pressure paces the relay to what verification keeps up with, and nothing is lost); at
        /// ``resumeReadingAt`` it reads again. The room above it absorbs the frames lws had already read.
        public static let pauseReadingAt = 192
        public static let resumeReadingAt = 64
        /// Malformed frames and invalid events (``InboundDrop/isStrike``) a relay may send in a burst before
        /// the pool closes it and backs off (``ConnectionEnd/misbehaving``). No relay we met sends any; 100
        /// leaves room for a relay with a bug in a few stored events. The allowance refills at
        /// ``invalidFramesForgivenPerSecond``, so an occasional bad event never closes a relay.
        public static let invalidFrameAllowance: Double = 100
        /// Refill of the misbehaviour allowance per second.
        public static let invalidFramesForgivenPerSecond: Double = 1
        /// Drops of one (relay, reason) are reported (log + ``RelayPoolEvent/rejected(relay:subscription:reason:count:)``)
        /// the first time and then every this many; all are counted.
        public static let dropReportInterval = 1000
        /// NOTICE frames reported per relay in a burst, refilled at ``noticesPerMinute``; beyond that they
        /// are counted (``RelayStats/noticesSuppressed``), not reported: a relay controls their text and rate.
        public static let noticeBurst: Double = 10
        public static let noticesPerMinute: Double = 6
        /// Priority authors (``RelayPoolCore/setPriorityAuthors(_:)``) remembered; beyond it the rest are
        /// ignored: the bridge's scheduler tracks 4,096 established senders, and operator lists are smaller.
        public static let maxPriorityAuthors = 8_192
        /// Each priority author's reserve on each relay, used only once that relay's budget is spent: a
        /// burst of 10 and 10 a minute — more than a person types, so a regular's lines all get their
        /// Schnorr check during a flood; and a forger who claims that author's key spends only that
        /// author's reserve, with a strike against its relay for every bad signature.
        public static let priorityReserveBurst: Double = 10
        public static let priorityReservePerMinute: Double = 10
    }

    /// When a connected relay counts as answering, and when the pool probes and gives up on it.
    ///
    /// Decision: a relay is **answering** once it has sent something on this connection — any text frame
    /// (EOSE, an event, a NOTICE, even garbage) or a PONG — and did so within ``answerWindow``. Real relays
    /// answer our REQs with EOSE within a round trip, so they count as answering at once. A quiet channel
    /// sends nothing for hours, so the pool probes: a WebSocket PING when the connection opens and whenever
    /// it has been quiet for ``probeAfterQuiet``; the PONG proves liveness for the price of a few bytes and
    /// no relay-side work (a `REQ` with `limit: 0` would also prove it, but costs the relay a query and
    /// some relays refuse it). A connection that answers nothing within ``answerWindow`` — a relay that
    /// upgraded and went silent, or one whose link died — is closed (``ConnectionEnd/unanswered``) and
    /// backed off. lws's own idle PING (30 s) and hang-up (90 s) stay as a second line.
    public struct Liveness: Sendable {
        /// A connected relay silent for this long is sent a PING.
        public var probeAfterQuiet: Duration
        /// A connection counts as answering while its last answer is younger than this; with none for this
        /// long (since it opened, for a relay that never answered) it is closed. One quiet period plus the
        /// time a PONG may take on a bad mobile link.
        public var answerWindow: Duration

        public init(probeAfterQuiet: Duration = .seconds(25), answerWindow: Duration = .seconds(45)) {
            self.probeAfterQuiet = probeAfterQuiet
            self.answerWindow = answerWindow
        }
    }

    /// How many malformed frames and invalid events a relay may send before it is closed and backed off.
    public struct Misbehaviour: Sendable {
        public var allowance: Double
        public var forgivenPerSecond: Double

        public init(
            allowance: Double = Limits.invalidFrameAllowance, forgivenPerSecond: Double = Limits.invalidFramesForgivenPerSecond
        ) {
            self.allowance = allowance
            self.forgivenPerSecond = forgivenPerSecond
        }

        /// Never close (benchmarks and tests that measure the intake path itself under a garbage flood).
        public static let unlimited = Misbehaviour(allowance: .infinity, forgivenPerSecond: 0)
    }

    public struct Configuration: Sendable {
        /// The verification budget **of each relay** (burst 400, 200/s: a relay's backfill of two
        /// subscriptions verifies at once; a relay flooding forged events costs ≈ 1 % of a core, and only
        /// while it stays connected).
        public var verification: EventVerifier.Configuration
        /// NIP-42: answer AUTH challenges with this key (operator opt-in); nil = ignore AUTH as phones do.
        public var authKey: SchnorrSecretKey?
        public var connectTimeout: Duration
        public var liveness: Liveness
        public var misbehaviour: Misbehaviour
        /// Events whose `created_at` is further than this many seconds from the wall clock are dropped at
        /// intake (`stale` / `future`), before they cost a Schnorr check; nil keeps them (`nostr listen`
        /// shows the hour of history phones load). The bridge carries nothing outside ±900 s.
        public var freshnessWindow: Int64?
        /// Uniform [0, 1) for backoff jitter.
        public var jitterUnit: @Sendable () -> Double

        public init(
            verification: EventVerifier.Configuration = .init(), authKey: SchnorrSecretKey? = nil,
            connectTimeout: Duration = .seconds(10), liveness: Liveness = .init(), misbehaviour: Misbehaviour = .init(),
            freshnessWindow: Int64? = nil, jitterUnit: @escaping @Sendable () -> Double
        ) {
            self.verification = verification
            self.authKey = authKey
            self.connectTimeout = connectTimeout
            self.liveness = liveness
            self.misbehaviour = misbehaviour
            self.freshnessWindow = freshnessWindow
            self.jitterUnit = jitterUnit
        }
    }

    /// A subscription as the pool remembers it, so it can be replayed after a reconnect.
    public struct Subscription: Sendable {
        public let id: String
        /// Filters without `since`; each send sets `since = now − lookback` when `lookback` is set.
        public let filters: [NostrFilter]
        public let lookback: Int64?
        /// A trusted subscription's authors (its filters' `authors`; empty for any other): their events on it skip
        /// the freshness window and are verified without the relay's budget. For the operator's own records (the
        /// fleet list, the site's records), which may be older than any window and arrive by the thousand at a
        /// catch-up. A relay that forges them gains nothing: every one is still verified, and each bad signature is
        /// a strike against that relay (``Misbehaviour``), which closes it after a few.
        public let trustedAuthors: Set<String>
        /// When a trusted subscription was last refreshed (``Limits/trustedRefresh``).
        var refreshedAt: ContinuousClock.Instant
        /// A trusted event of this subscription was lost in the report stream since its backfills began: they run
        /// again from the top once done (``RelayPoolCore/reportLost(_:)``).
        var lostInBackfill = false
        /// When that second backfill starts.
        var backfillAgainAt: ContinuousClock.Instant?
        /// When `subscribe` last accepted this id (monotonic), for the duplicate window.
        var subscribedAt: ContinuousClock.Instant
        /// When the EOSE fallback fires if not every relay answered by then.
        var eoseDeadline: ContinuousClock.Instant
        var eoseWaiting: Set<String> = []
        var eoseReported = false

        func request(unixNow: Int64) -> ClientMessage {
            let fresh = filters.map { filter -> NostrFilter in
                var filter = filter
                if let lookback { filter.since = unixNow - lookback }
                return filter
            }
            return .request(subscription: id, filters: fresh)
        }
    }

    /// One event to verify, handed to a worker by ``takeJob(now:)`` with the relay's budget decision.
    public struct VerificationJob: Sendable {
        let relay: Int
        let connection: ConnectionID
        let sequence: UInt64
        public let event: UnverifiedEvent
        /// A budget token was taken for it: Schnorr may run (returned if the id check fails).
        public let admitted: Bool
        /// The token came from the author's priority reserve, not the relay's budget.
        var reserved = false
    }

    struct Relay: Sendable {
        /// Stable identity while the relay is in the pool (indices move when the list changes).
        let key: Int
        let url: String
        let endpoint: WebSocketEndpoint
        var machine: RelayConnectionMachine
        var connection: ConnectionID?
        var queue = BoundedQueue<QueuedEvent>(capacity: Limits.maxQueuedEvents)
        var activeSubscriptions: Set<String> = []
        /// Trusted subscriptions being paged in on this connection (``BackfillPage``).
        var backfills: [String: BackfillPage] = [:]
        var auth = AuthSession()
        var stats = RelayStats()
        /// This relay's Schnorr budget and outcome counts.
        var verifier: EventVerifier
        var strikes: TokenBucket
        /// Priority authors' reserves on this relay (hex pubkey → bucket), created on first use.
        var reserves: [String: TokenBucket] = [:]
        var notices = TokenBucket(capacity: Limits.noticeBurst, refillPerSecond: Limits.noticesPerMinute / 60)
        /// The current connection's frames between intake and delivery.
        var window = InboundWindow(capacity: Limits.maxPendingFrames)
        /// Reading of the current connection is paused (``Limits/pauseReadingAt``).
        var readingPaused = false
        /// When the current connection opened, last answered (frame or PONG) and was last probed.
        var openedAt: ContinuousClock.Instant?
        var lastAnswer: ContinuousClock.Instant?
        var lastProbe: ContinuousClock.Instant?

        init(key: Int, endpoint: WebSocketEndpoint, configuration: Configuration) {
            self.key = key
            url = endpoint.description
            self.endpoint = endpoint
            machine = RelayConnectionMachine(connectTimeout: configuration.connectTimeout, jitterUnit: configuration.jitterUnit)
            verifier = EventVerifier(configuration: configuration.verification)
            strikes = TokenBucket(capacity: configuration.misbehaviour.allowance, refillPerSecond: configuration.misbehaviour.forgivenPerSecond)
        }
    }

    struct QueuedEvent: Sendable {
        let id: String
        let text: String
    }

    /// NIP-42 state of one connection (reset when it drops). Only used when the operator set `authKey`.
    ///
    /// A relay that requires AUTH challenges on connect, but the pool has already sent its REQs and its
    /// queued EVENTs by then, so they come back `CLOSED auth-required:` / `OK false auth-required:`.
    /// Those are remembered and re-sent once the relay accepts our AUTH event. Each is retried once per
    /// connection, so a relay that keeps refusing cannot make the pool loop.
    struct AuthSession: Sendable {
        /// Our kind-22242 answer, until its OK.
        var eventID: String?
        var authenticated = false
        /// Subscriptions the relay closed with `auth-required:`.
        var closedSubscriptions: Set<String> = []
        /// EVENT texts sent before authentication, by id, until their OK (oldest forgotten first).
        var unconfirmed: [String: String] = [:]
        var unconfirmedOrder = BoundedQueue<String>(capacity: Limits.maxQueuedEvents)
        /// EVENT texts the relay refused with `auth-required:`, re-sent after AUTH (oldest dropped).
        var refused = BoundedQueue<String>(capacity: Limits.maxQueuedEvents)
        /// Ids (events and subscriptions) already re-sent on this connection.
        var retried: Set<String> = []

        mutating func remember(_ event: QueuedEvent) {
            guard !authenticated, unconfirmed.updateValue(event.text, forKey: event.id) == nil else { return }
            if let evicted = unconfirmedOrder.append(event.id) { unconfirmed.removeValue(forKey: evicted) }
        }
    }

    public let configuration: Configuration
    let transport: any RelayTransport
    var relays: [Relay] = []
    var nextRelayKey = 0
    var subscriptions: [String: Subscription] = [:]
    var subscriptionOrder: [String] = []
    /// Outcomes of every relay's verifications (kept when a relay leaves the pool).
    public internal(set) var verifierCounters = EventVerifier.Counters()
    var seen = BoundedSet<[UInt8]>(capacity: Limits.maxRememberedIDs)
    /// Between ``start(now:)`` and ``stop()``: relays added by ``setRelays(_:now:)`` connect at once.
    var running = false
    /// Authors (lowercase hex) whose events may use the priority reserve (``setPriorityAuthors(_:)``).
    public internal(set) var priorityAuthors: Set<String> = []
    /// Where ``takeJob(now:)`` looks first: the relays take turns.
    var jobCursor = 0
    /// Events queued for verification and not yet taken by ``takeJob(now:)`` (the live pool wakes sleeping
    /// workers while there are some).
    public internal(set) var waitingJobs = 0

    public init(relayURLs: [String], configuration: Configuration, transport: any RelayTransport) throws(WebSocketError) {
        self.configuration = configuration
        self.transport = transport
        var seenURLs = Set<String>()
        for url in relayURLs {
            let endpoint = try WebSocketEndpoint(url: url)
            guard seenURLs.insert(endpoint.description).inserted else { continue }
            addRelay(endpoint)
        }
    }

    mutating func addRelay(_ endpoint: WebSocketEndpoint) {
        relays.append(Relay(key: nextRelayKey, endpoint: endpoint, configuration: configuration))
        nextRelayKey += 1
    }

    public var relayURLs: [String] { relays.map(\.url) }
    public func stats(_ url: String) -> RelayStats? {
        guard let relay = relays.first(where: { $0.url == url }) else { return nil }
        var stats = relay.stats
        stats.verification = relay.verifier.counters
        return stats
    }
    public func state(_ url: String) -> RelayConnectionMachine.State? { relays.first { $0.url == url }?.machine.state }
    public var connectedCount: Int { relays.filter(\.machine.isConnected).count }

    /// Whether `url` is connected and answered within the answer window (``Liveness``); nil for a relay
    /// not in the pool.
    public func isAnswering(_ url: String, now: ContinuousClock.Instant) -> Bool? {
        relays.first { $0.url == url }.map { Self.isAnswering($0, now: now, window: configuration.liveness.answerWindow) }
    }

    /// Connected relays that answered within the answer window: what health should count as "up".
    public func answeringCount(now: ContinuousClock.Instant) -> Int {
        relays.filter { Self.isAnswering($0, now: now, window: configuration.liveness.answerWindow) }.count
    }

    static func isAnswering(_ relay: Relay, now: ContinuousClock.Instant, window: Duration) -> Bool {
        guard relay.machine.isConnected, let last = relay.lastAnswer else { return false }
        return now - last < window
    }

    /// Everything an operator view needs about every relay, read at once.
    private static func nextAttempt(_ state: RelayConnectionMachine.State, now: ContinuousClock.Instant) -> Duration? {
        switch state {
        case .backingOff(let until): max(until - now, .zero)
        case .permanentlyFailed(let retryAt): max(retryAt - now, .zero)
        default: nil
        }
    }

    public func snapshot(now: ContinuousClock.Instant) -> RelayPoolSnapshot {
        RelayPoolSnapshot(
            relays: relays.map { relay in
                var stats = relay.stats
                stats.verification = relay.verifier.counters
                return RelaySnapshot(
                    url: relay.url, state: relay.machine.state, consecutiveFailures: relay.machine.consecutiveFailures,
                    nextAttemptIn: Self.nextAttempt(relay.machine.state, now: now),
                    isAnswering: Self.isAnswering(relay, now: now, window: configuration.liveness.answerWindow),
                    sinceLastAnswer: relay.lastAnswer.map { now - $0 }, pendingFrames: relay.window.count,
                    queuedEvents: relay.queue.count, stats: stats)
            },
            verification: verifierCounters)
    }

    // MARK: Commands

    public mutating func start(now: ContinuousClock.Instant) -> [RelayPoolEvent] {
        running = true
        var out: [RelayPoolEvent] = []
        for index in relays.indices {
            let actions = relays[index].machine.start(now: now)
            perform(actions, relay: index, now: now, unixNow: 0, into: &out)
        }
        return out
    }

    public mutating func stop() -> [RelayPoolEvent] {
        running = false
        var out: [RelayPoolEvent] = []
        for index in relays.indices {
            let actions = relays[index].machine.stop()
            perform(actions, relay: index, now: .now, unixNow: 0, into: &out)
        }
        return out
    }

    /// What ``setRelays(_:now:)`` changed (normalized URLs, in list order).
    public struct RelayListChange: Equatable, Sendable {
        public var added: [String] = []
        public var removed: [String] = []
        public var isEmpty: Bool { added.isEmpty && removed.isEmpty }
    }

    /// Replaces the relay list (SIGHUP): relays not in `relayURLs` are closed and forgotten (their offline
    /// queue and counters with them); new ones are appended and, while the pool runs, connect at once —
    /// the live subscriptions are sent to them when they are up, as after any reconnect. Relays in both lists
    /// keep their connection, queue and counters. Every URL is parsed before anything changes, so a bad
    /// list throws and leaves the pool as it was.
    public mutating func setRelays(_ relayURLs: [String], now: ContinuousClock.Instant)
        throws(WebSocketError) -> (change: RelayListChange, events: [RelayPoolEvent])
    {
        var wanted: [WebSocketEndpoint] = []
        var wantedURLs = Set<String>()
        for url in relayURLs {
            let endpoint = try WebSocketEndpoint(url: url)
            if wantedURLs.insert(endpoint.description).inserted { wanted.append(endpoint) }
        }
        var change = RelayListChange()
        var out: [RelayPoolEvent] = []
        for index in relays.indices.reversed() where !wantedURLs.contains(relays[index].url) {
            let url = relays[index].url
            perform(relays[index].machine.stop(), relay: index, now: now, unixNow: 0, reason: "removed from the relay list",
                    into: &out)
            relays.remove(at: index)
            // No EOSE can come from it any more.
            for id in subscriptionOrder { eoseAnswered(id, relay: url, into: &out) }
            change.removed.insert(url, at: 0)
        }
        for endpoint in wanted where !relays.contains(where: { $0.url == endpoint.description }) {
            addRelay(endpoint)
            change.added.append(endpoint.description)
            if running {
                let index = relays.count - 1
                perform(relays[index].machine.start(now: now), relay: index, now: now, unixNow: 0, into: &out)
            }
        }
        return (change, out)
    }

    /// Sends to every connected relay; queues for the others (≤ 200 each, oldest dropped and counted).
    @discardableResult
    public mutating func publish(_ event: NostrEvent) -> [RelayPoolEvent] {
        let queued = QueuedEvent(id: event.id.hex, text: ClientMessage.event(event).text)
        var out: [RelayPoolEvent] = []
        for index in relays.indices {
            if let connection = relays[index].connection, relays[index].machine.isConnected {
                send(queued, relay: index, connection: connection)
            } else if relays[index].queue.append(queued) != nil {
                relays[index].stats.queueDropped += 1
                let count = relays[index].stats.queueDropped
                if Self.isReported(count) { out.append(.publishQueueDropped(relay: relays[index].url, count: count)) }
            }
        }
        return out
    }

    /// The first and every ``Limits/dropReportInterval``-th of a count are reported.
    static func isReported(_ count: Int) -> Bool { count == 1 || count % Limits.dropReportInterval == 0 }

    mutating func send(_ event: QueuedEvent, relay index: Int, connection: ConnectionID) {
        transport.send(connection, text: event.text)
        relays[index].stats.published += 1
        if configuration.authKey != nil { relays[index].auth.remember(event) }
    }

    /// What ``subscribe(id:filters:lookback:now:unixNow:)`` did.
    public enum SubscribeOutcome: Equatable, Sendable {
        /// New or changed filters: REQ sent to this many connected relays (the others get it on connect).
        case sent(relays: Int)
        /// Same filters and lookback as the live subscription: the REQ went only to connected relays where
        /// it was not active (e.g. closed by the relay); `relays` of them.
        case alreadyActive(resentTo: Int)
        /// The same id was subscribed less than ``Limits/duplicateSubscribeWindow`` ago: nothing sent.
        case ignoredDuplicate
        /// ``Limits/maxSubscriptions`` reached: nothing sent.
        case tooManySubscriptions
    }

    /// Opens (or replaces) a subscription on every relay; replayed with a fresh `since` after reconnects.
    ///
    /// Phones' rules (NOSTR-GEO §6): a second call with the same id within 1 s is ignored, whatever its
    /// filters (a burst of UI refreshes must not flood relays); an identical REQ that is already active on
    /// a relay is not sent again. Decision where the spec is silent: after the 1 s window, *changed*
    /// filters replace the subscription everywhere (NIP-01 semantics of a REQ with a known id) and restart
    /// EOSE tracking and its fallback.
    /// - Parameters:
    ///   - now: monotonic time, for the duplicate window and the EOSE fallback.
    ///   - unixNow: wall-clock seconds, for `since = unixNow − lookback`.
    @discardableResult
    public mutating func subscribe(
        id: String, filters: [NostrFilter], lookback: Int64?, trusted: Bool = false, now: ContinuousClock.Instant, unixNow: Int64
    ) -> SubscribeOutcome {
        if let existing = subscriptions[id] {
            if now - existing.subscribedAt < Limits.duplicateSubscribeWindow { return .ignoredDuplicate }
            if existing.filters == filters, existing.lookback == lookback {
                subscriptions[id]?.subscribedAt = now
                var resent = 0
                for index in relays.indices where relays[index].machine.isConnected
                    && !relays[index].activeSubscriptions.contains(id)
                {
                    send(subscription: id, relay: index, unixNow: unixNow)
                    resent += 1
                }
                return .alreadyActive(resentTo: resent)
            }
        } else {
            guard subscriptions.count < Limits.maxSubscriptions else { return .tooManySubscriptions }
            subscriptionOrder.append(id)
        }
        let trustedAuthors = trusted ? Set(filters.flatMap { $0.authors ?? [] }) : []
        var subscription = Subscription(id: id, filters: filters, lookback: lookback, trustedAuthors: trustedAuthors, refreshedAt: now, subscribedAt: now,
                                        eoseDeadline: now + Limits.eoseFallback)
        let text = subscription.request(unixNow: unixNow).text
        var sent = 0
        for index in relays.indices {
            guard let connection = relays[index].connection, relays[index].machine.isConnected else { continue }
            transport.send(connection, text: text)
            relays[index].activeSubscriptions.insert(id)
            subscription.eoseWaiting.insert(relays[index].url)
            sent += 1
        }
        subscriptions[id] = subscription
        return .sent(relays: sent)
    }

    /// Forgets the subscription locally first, then sends CLOSE where it is active.
    public mutating func unsubscribe(id: String) {
        guard subscriptions.removeValue(forKey: id) != nil else { return }
        subscriptionOrder.removeAll { $0 == id }
        let text = ClientMessage.close(subscription: id).text
        for index in relays.indices where relays[index].activeSubscriptions.remove(id) != nil {
            if let connection = relays[index].connection { transport.send(connection, text: text) }
        }
    }

    // MARK: Inputs

    public mutating func tick(now: ContinuousClock.Instant, unixNow: Int64) -> [RelayPoolEvent] {
        var out: [RelayPoolEvent] = []
        for index in relays.indices {
            let actions = relays[index].machine.tick(now: now)
            perform(actions, relay: index, now: now, unixNow: unixNow, into: &out)
            checkLiveness(relay: index, now: now, into: &out)
        }
        refreshTrusted(now: now, unixNow: unixNow)
        // EOSE fallback: the initial load is over after 10 s even if some relay never answered.
        for id in subscriptionOrder {
            guard var subscription = subscriptions[id], !subscription.eoseReported, now >= subscription.eoseDeadline
            else { continue }
            for index in relays.indices where subscription.eoseWaiting.contains(relays[index].url) {
                relays[index].stats.eoseTimeouts += 1
            }
            subscription.eoseWaiting.removeAll()
            subscription.eoseReported = true
            subscriptions[id] = subscription
            out.append(.endOfStoredEvents(subscription: id, fallback: true))
        }
        return out
    }

    /// When ``tick(now:unixNow:)`` next has something to do: a relay's connect timeout, end of backoff, late probe
    /// or stability; a quiet connection's PING or its answer window; a subscription's EOSE fallback. Nil when
    /// nothing is timed. O(relays + subscriptions): cheap enough to ask after every change.
    public func nextDeadline() -> ContinuousClock.Instant? {
        var next: ContinuousClock.Instant?
        func consider(_ instant: ContinuousClock.Instant) { next = next.map { min($0, instant) } ?? instant }
        let liveness = configuration.liveness
        for relay in relays {
            if let deadline = relay.machine.nextDeadline { consider(deadline) }
            guard relay.machine.isConnected, relay.connection != nil, let opened = relay.openedAt else { continue }
            let last = relay.lastAnswer ?? opened
            consider(last + liveness.answerWindow)
            consider(max(last, relay.lastProbe ?? opened) + liveness.probeAfterQuiet)
        }
        for id in subscriptionOrder {
            if let subscription = subscriptions[id], !subscription.eoseReported { consider(subscription.eoseDeadline) }
        }
        if let refresh = nextTrustedRefresh { consider(refresh) }
        return next
    }

    /// Probes a quiet connection and closes one that stopped answering (``Liveness``).
    mutating func checkLiveness(relay index: Int, now: ContinuousClock.Instant, into out: inout [RelayPoolEvent]) {
        guard relays[index].machine.isConnected, let connection = relays[index].connection, let opened = relays[index].openedAt
        else { return }
        let liveness = configuration.liveness
        let last = relays[index].lastAnswer ?? opened
        if now - last >= liveness.answerWindow {
            let seconds = liveness.answerWindow.components.seconds
            let detail = relays[index].lastAnswer == nil
                ? "no frame and no PONG in the \(seconds) s since it opened" : "no frame and no PONG for \(seconds) s"
            closeByPool(relay: index, .unanswered, detail: detail, now: now, into: &out)
            return
        }
        if now - max(last, relays[index].lastProbe ?? opened) >= liveness.probeAfterQuiet {
            transport.ping(connection)
            relays[index].lastProbe = now
        }
    }

    /// Socket events from the transport. A text frame is parsed and every event it carries verified **on
    /// the calling thread** (tests, single-threaded use); the live pool parses off its lock and verifies
    /// on workers instead (``receive(_:on:now:unixNow:)``, ``takeJob()``).
    public mutating func handle(_ event: WebSocketEvent, now: ContinuousClock.Instant, unixNow: Int64)
        -> [RelayPoolEvent]
    {
        var out: [RelayPoolEvent] = []
        switch event {
        case .opened(let id, let serverDate):
            guard let index = relayIndex(id) else { break }
            relays[index].stats.clockOffset = serverDate.map { $0 - unixNow }
            let actions = relays[index].machine.opened(now: now)
            perform(actions, relay: index, now: now, unixNow: unixNow, into: &out)
        case .ended(let id, let failure):
            guard let index = relayIndex(id) else { break }
            let kind: RelayConnectionMachine.Failure
            let end: ConnectionEnd
            switch failure {
            case .dns: (kind, end) = (.dns, .dns)
            case .connect: (kind, end) = (.connect, .connect)
            case .closed: (kind, end) = (.closed, .closed)
            case .closedLocally: (kind, end) = (.closed, .closedLocally)
            }
            connectionEnded(relay: index, kind, end, reason: failure.description, now: now, into: &out)
        case .oversizedMessage(let id, _):
            guard let index = relayIndex(id) else { break }
            answered(relay: index, now: now)
            relays[index].stats.framesReceived += 1
            drop(index, subscription: nil, .frameTooLarge, now: now, into: &out)
        case .pong(let id):
            guard let index = relayIndex(id) else { break }
            relays[index].stats.pongs += 1
            answered(relay: index, now: now)
        case .text(let id, let frame):
            out = receive(Self.parse(frame), on: id, now: now, unixNow: unixNow)
            out += verifyWaiting(now: now)
        case .timer:
            out = tick(now: now, unixNow: unixNow)
        }
        return out
    }

    /// Parses one text frame (pure; any thread).
    public static func parse(_ frame: [UInt8]) -> Result<RelayMessage, NostrError> {
        do throws(NostrError) {
            return .success(try RelayMessage.parse(frame))
        } catch {
            return .failure(error)
        }
    }
}
