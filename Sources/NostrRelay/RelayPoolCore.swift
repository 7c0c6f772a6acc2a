public import BotCrypto
import BotSupport
public import Nostr
public import WebSocketRuntime

/// What the pool needs from a WebSocket layer. ``WebSocketRuntime`` is the live one; tests pass a fake
/// that records frames. Calls only enqueue: they never call back into the pool synchronously.
public protocol RelayTransport: Sendable {
    func open(_ endpoint: WebSocketEndpoint) -> ConnectionID
    func send(_ connection: ConnectionID, text: String)
    func close(_ connection: ConnectionID)
}

extension WebSocketRuntime: RelayTransport {}

/// Something the pool reports to its consumer.
public enum RelayPoolEvent: Sendable, Equatable {
    /// A verified event, first copy across all relays.
    case event(NostrEvent, relay: String, subscription: String)
    /// An inbound frame or event dropped, with the named reason (`id_mismatch`, `bad_signature`, …).
    case rejected(relay: String, subscription: String?, reason: String)
    /// Every relay that received the REQ answered EOSE (or dropped) — or, with `fallback` true, the
    /// 10 s EOSE fallback passed first (NOSTR-GEO §6); stored events may still trickle in after it.
    case endOfStoredEvents(subscription: String, fallback: Bool)
    case ok(relay: String, eventID: String, accepted: Bool, message: String)
    case closed(relay: String, subscription: String, message: String)
    case notice(relay: String, message: String)
    case connected(relay: String)
    case disconnected(relay: String, reason: String)
    /// An attempt never came up: DNS, refused, timeout or TLS. For TLS the reason carries lws's own log
    /// line (e.g. `… (lws: … self-signed certificate …)`), the only place OpenSSL's reason appears.
    case connectFailed(relay: String, reason: String)
}

/// Per-relay counters (NOSTR-GEO §15 q1: log and count `OK false` / `CLOSED` reasons per relay).
public struct RelayStats: Sendable, Equatable {
    public var connects = 0
    public var disconnects = 0
    public var failures: [String: Int] = [:]
    /// The reason of the most recent failed attempt or lost connection, for status output.
    public var lastFailure: String?
    public var okAccepted = 0
    public var okRejected: [String: Int] = [:]
    public var closed: [String: Int] = [:]
    public var notices = 0
    public var authAnswered = 0
    /// Events and subscriptions re-sent after a successful NIP-42 AUTH (they had met `auth-required`).
    public var authRetried = 0
    public var authIgnored = 0
    /// Inbound drops by reason (parse errors, verification failures, filter mismatch).
    public var drops: [String: Int] = [:]
    public var duplicates = 0
    /// EOSE frames received (every REQ the relay accepted, including replays).
    public var eoseReceived = 0
    /// Subscriptions whose EOSE this relay had not sent when the 10 s fallback fired.
    public var eoseTimeouts = 0
    public var delivered = 0
    public var published = 0
    /// Events evicted from the offline publish queue.
    public var queueDropped = 0

    /// The prefix of a NIP-01 machine-readable reason (`blocked`, `rate-limited`, `pow`, …) or the text.
    static func reasonKey(_ message: String) -> String {
        if let colon = message.firstIndex(of: ":") { return String(message[..<colon]) }
        return message.isEmpty ? "(none)" : String(message.prefix(40))
    }
}

/// The pool's policy, without threads or sockets: relays, their state machines and queues, the
/// subscriptions, EOSE tracking, cross-relay dedup and verification. Every input returns what to report.
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
    }

    public struct Configuration: Sendable {
        public var verification: EventVerifier.Configuration
        /// NIP-42: answer AUTH challenges with this key (operator opt-in); nil = ignore AUTH as phones do.
        public var authKey: SchnorrSecretKey?
        public var connectTimeout: Duration
        /// Uniform [0, 1) for backoff jitter.
        public var jitterUnit: @Sendable () -> Double

        public init(
            verification: EventVerifier.Configuration = .init(), authKey: SchnorrSecretKey? = nil,
            connectTimeout: Duration = .seconds(10), jitterUnit: @escaping @Sendable () -> Double
        ) {
            self.verification = verification
            self.authKey = authKey
            self.connectTimeout = connectTimeout
            self.jitterUnit = jitterUnit
        }
    }

    /// A subscription as the pool remembers it, so it can be replayed after a reconnect.
    public struct Subscription: Sendable {
        public let id: String
        /// Filters without `since`; each send sets `since = now − lookback` when `lookback` is set.
        public let filters: [NostrFilter]
        public let lookback: Int64?
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

    struct Relay: Sendable {
        let url: String
        let endpoint: WebSocketEndpoint
        var machine: RelayConnectionMachine
        var connection: ConnectionID?
        var queue = BoundedQueue<QueuedEvent>(capacity: Limits.maxQueuedEvents)
        var activeSubscriptions: Set<String> = []
        var auth = AuthSession()
        var stats = RelayStats()
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
    private let transport: any RelayTransport
    private var relays: [Relay] = []
    private var subscriptions: [String: Subscription] = [:]
    private var subscriptionOrder: [String] = []
    private var verifier: EventVerifier
    private var seen = BoundedSet<[UInt8]>(capacity: Limits.maxRememberedIDs)
    /// Between ``start(now:)`` and ``stop()``: relays added by ``setRelays(_:now:)`` connect at once.
    private var running = false

    public init(relayURLs: [String], configuration: Configuration, transport: any RelayTransport) throws(WebSocketError) {
        self.configuration = configuration
        self.transport = transport
        verifier = EventVerifier(configuration: configuration.verification)
        var seenURLs = Set<String>()
        for url in relayURLs {
            let endpoint = try WebSocketEndpoint(url: url)
            guard seenURLs.insert(endpoint.description).inserted else { continue }
            relays.append(Relay(url: endpoint.description, endpoint: endpoint,
                                machine: RelayConnectionMachine(connectTimeout: configuration.connectTimeout,
                                                                jitterUnit: configuration.jitterUnit)))
        }
    }

    public var relayURLs: [String] { relays.map(\.url) }
    public var verifierCounters: EventVerifier.Counters { verifier.counters }
    public func stats(_ url: String) -> RelayStats? { relays.first { $0.url == url }?.stats }
    public func state(_ url: String) -> RelayConnectionMachine.State? { relays.first { $0.url == url }?.machine.state }
    public var connectedCount: Int { relays.filter(\.machine.isConnected).count }

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
            relays.append(Relay(url: endpoint.description, endpoint: endpoint,
                                machine: RelayConnectionMachine(connectTimeout: configuration.connectTimeout,
                                                                jitterUnit: configuration.jitterUnit)))
            change.added.append(endpoint.description)
            if running {
                let index = relays.count - 1
                perform(relays[index].machine.start(now: now), relay: index, now: now, unixNow: 0, into: &out)
            }
        }
        return (change, out)
    }

    /// Sends to every connected relay; queues for the others (≤ 200 each, oldest dropped and counted).
    public mutating func publish(_ event: NostrEvent) {
        let queued = QueuedEvent(id: event.id.hex, text: ClientMessage.event(event).text)
        for index in relays.indices {
            if let connection = relays[index].connection, relays[index].machine.isConnected {
                send(queued, relay: index, connection: connection)
            } else if relays[index].queue.append(queued) != nil {
                relays[index].stats.queueDropped += 1
            }
        }
    }

    private mutating func send(_ event: QueuedEvent, relay index: Int, connection: ConnectionID) {
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
        id: String, filters: [NostrFilter], lookback: Int64?, now: ContinuousClock.Instant, unixNow: Int64
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
        var subscription = Subscription(id: id, filters: filters, lookback: lookback, subscribedAt: now,
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
        }
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

    public mutating func handle(_ event: WebSocketEvent, now: ContinuousClock.Instant, unixNow: Int64)
        -> [RelayPoolEvent]
    {
        var out: [RelayPoolEvent] = []
        switch event {
        case .opened(let id):
            guard let index = relayIndex(id) else { break }
            let actions = relays[index].machine.opened(now: now)
            perform(actions, relay: index, now: now, unixNow: unixNow, into: &out)
        case .ended(let id, let failure):
            guard let index = relayIndex(id) else { break }
            relays[index].connection = nil
            let kind: RelayConnectionMachine.Failure
            switch failure {
            case .dns: kind = .dns
            case .connect: kind = .connect
            case .closed, .closedLocally: kind = .closed
            }
            let wasConnected = relays[index].machine.isConnected
            relays[index].stats.lastFailure = failure.description
            if !wasConnected {
                relays[index].stats.failures[Self.failureKey(failure), default: 0] += 1
                out.append(.connectFailed(relay: relays[index].url, reason: failure.description))
            }
            let actions = relays[index].machine.ended(kind, now: now)
            perform(actions, relay: index, now: now, unixNow: unixNow, reason: failure.description, into: &out)
        case .oversizedMessage(let id, let bytes):
            guard let index = relayIndex(id) else { break }
            drop(index, subscription: nil, NostrError.frameTooLarge(bytes: bytes).name, into: &out)
        case .text(let id, let frame):
            guard let index = relayIndex(id) else { break }
            receive(frame, relay: index, now: now, unixNow: unixNow, into: &out)
        }
        return out
    }

    private static func failureKey(_ failure: WebSocketFailure) -> String {
        switch failure {
        case .dns: "dns"
        case .connect: "connect"
        case .closed: "closed"
        case .closedLocally: "closed_locally"
        }
    }

    private func relayIndex(_ id: ConnectionID) -> Int? { relays.firstIndex { $0.connection == id } }

    private mutating func drop(_ index: Int, subscription: String?, _ reason: String, into out: inout [RelayPoolEvent]) {
        relays[index].stats.drops[reason, default: 0] += 1
        out.append(.rejected(relay: relays[index].url, subscription: subscription, reason: reason))
    }

    private mutating func receive(
        _ frame: [UInt8], relay index: Int, now: ContinuousClock.Instant, unixNow: Int64,
        into out: inout [RelayPoolEvent]
    ) {
        let url = relays[index].url
        let message: RelayMessage
        do {
            message = try RelayMessage.parse(frame)
        } catch {
            drop(index, subscription: nil, error.name, into: &out)
            return
        }
        switch message {
        case .event(let subscriptionID, let unverified):
            guard let subscription = subscriptions[subscriptionID] else {
                drop(index, subscription: subscriptionID, "unknown_subscription", into: &out)
                return
            }
            // Dedup lookup before verification; ids are recorded only after success, so a forged copy
            // cannot suppress the genuine event (NOSTR-GEO §5.5 steps 3–4).
            if let claimed = unverified.claimedID, seen.contains(claimed.bytes) {
                relays[index].stats.duplicates += 1
                return
            }
            let event: NostrEvent
            do {
                event = try verifier.verify(unverified, now: now)
            } catch {
                drop(index, subscription: subscriptionID, error.name, into: &out)
                return
            }
            guard subscription.filters.contains(where: { Self.matchesIgnoringTime($0, event) }) else {
                drop(index, subscription: subscriptionID, "filter_mismatch", into: &out)
                return
            }
            seen.insert(event.id.bytes)
            relays[index].stats.delivered += 1
            out.append(.event(event, relay: url, subscription: subscriptionID))
        case .ok(let eventID, let accepted, let reason):
            if accepted {
                relays[index].stats.okAccepted += 1
            } else {
                relays[index].stats.okRejected[RelayStats.reasonKey(reason), default: 0] += 1
            }
            if eventID == relays[index].auth.eventID, !eventID.isEmpty {
                if accepted { authenticated(relay: index, unixNow: unixNow) }
            } else if !accepted, reason.hasPrefix("auth-required:"), configuration.authKey != nil,
                let text = relays[index].auth.unconfirmed.removeValue(forKey: eventID)
            {
                if relays[index].auth.authenticated {
                    retry(event: eventID, text: text, relay: index)
                } else if relays[index].auth.refused.append(text) != nil {
                    relays[index].stats.queueDropped += 1
                }
            } else {
                relays[index].auth.unconfirmed.removeValue(forKey: eventID)
            }
            out.append(.ok(relay: url, eventID: eventID, accepted: accepted, message: reason))
        case .endOfStoredEvents(let subscriptionID):
            relays[index].stats.eoseReceived += 1
            eoseAnswered(subscriptionID, relay: url, into: &out)
        case .closed(let subscriptionID, let reason):
            relays[index].stats.closed[RelayStats.reasonKey(reason), default: 0] += 1
            relays[index].activeSubscriptions.remove(subscriptionID)
            if reason.hasPrefix("auth-required:"), configuration.authKey != nil, subscriptions[subscriptionID] != nil {
                if relays[index].auth.authenticated {
                    // Closed although we are authenticated (the REQ crossed our AUTH): once more.
                    if relays[index].auth.retried.insert("sub:" + subscriptionID).inserted {
                        relays[index].stats.authRetried += 1
                        send(subscription: subscriptionID, relay: index, unixNow: unixNow)
                    }
                } else {
                    relays[index].auth.closedSubscriptions.insert(subscriptionID)
                }
            }
            eoseAnswered(subscriptionID, relay: url, into: &out)
            out.append(.closed(relay: url, subscription: subscriptionID, message: reason))
        case .notice(let text):
            relays[index].stats.notices += 1
            out.append(.notice(relay: url, message: text))
        case .auth(let challenge):
            guard let key = configuration.authKey, let connection = relays[index].connection else {
                relays[index].stats.authIgnored += 1
                return
            }
            let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: unixNow, kind: NostrKind.clientAuthentication,
                                         tags: [["relay", url], ["challenge", challenge]], content: "")
            guard let signed = try? unsigned.signed(with: key) else {
                drop(index, subscription: nil, "auth_signing_failed", into: &out)
                return
            }
            relays[index].auth.eventID = signed.id.hex
            relays[index].stats.authAnswered += 1
            transport.send(connection, text: ClientMessage.auth(signed).text)
        }
    }

    /// Kinds, tags, ids and authors; `since`/`until` stay the relay's business (clock skew, replays).
    static func matchesIgnoringTime(_ filter: NostrFilter, _ event: NostrEvent) -> Bool {
        var filter = filter
        filter.since = nil
        filter.until = nil
        return filter.matches(event)
    }

    /// The relay accepted our AUTH: re-send what it refused for want of it, subscriptions first.
    private mutating func authenticated(relay index: Int, unixNow: Int64) {
        var auth = relays[index].auth
        auth.authenticated = true
        auth.eventID = nil
        let closed = auth.closedSubscriptions
        auth.closedSubscriptions.removeAll()
        var refused: [String] = []
        while let text = auth.refused.popFirst() { refused.append(text) }
        auth.unconfirmed.removeAll()
        auth.unconfirmedOrder = BoundedQueue(capacity: Limits.maxQueuedEvents)
        relays[index].auth = auth
        for id in subscriptionOrder where closed.contains(id) && relays[index].auth.retried.insert("sub:" + id).inserted {
            relays[index].stats.authRetried += 1
            send(subscription: id, relay: index, unixNow: unixNow)
        }
        for text in refused { retry(event: nil, text: text, relay: index) }
    }

    private mutating func retry(event id: String?, text: String, relay index: Int) {
        guard let connection = relays[index].connection else { return }
        if let id, !relays[index].auth.retried.insert("event:" + id).inserted { return }
        relays[index].stats.authRetried += 1
        transport.send(connection, text: text)
    }

    private mutating func eoseAnswered(_ id: String, relay url: String, into out: inout [RelayPoolEvent]) {
        // Only a relay that was sent the REQ can complete the initial load; one that never got it
        // (connected later, or not at all) must not end it early.
        guard var subscription = subscriptions[id], subscription.eoseWaiting.remove(url) != nil else { return }
        if subscription.eoseWaiting.isEmpty, !subscription.eoseReported {
            subscription.eoseReported = true
            out.append(.endOfStoredEvents(subscription: id, fallback: false))
        }
        subscriptions[id] = subscription
    }

    private mutating func send(subscription id: String, relay index: Int, unixNow: Int64) {
        guard let subscription = subscriptions[id], let connection = relays[index].connection else { return }
        transport.send(connection, text: subscription.request(unixNow: unixNow).text)
        relays[index].activeSubscriptions.insert(id)
        if !subscription.eoseReported { subscriptions[id]?.eoseWaiting.insert(relays[index].url) }
    }

    private mutating func perform(
        _ actions: [RelayConnectionMachine.Action], relay index: Int, now: ContinuousClock.Instant, unixNow: Int64,
        reason: String = "", into out: inout [RelayPoolEvent]
    ) {
        for action in actions {
            switch action {
            case .connect:
                relays[index].connection = transport.open(relays[index].endpoint)
            case .abort:
                if let connection = relays[index].connection { transport.close(connection) }
                relays[index].connection = nil
                relays[index].stats.failures["timeout", default: 0] += 1
            case .connected:
                relays[index].stats.connects += 1
                guard let connection = relays[index].connection else { continue }
                while let queued = relays[index].queue.popFirst() { send(queued, relay: index, connection: connection) }
                relays[index].activeSubscriptions.removeAll()
                for id in subscriptionOrder { send(subscription: id, relay: index, unixNow: unixNow) }
                out.append(.connected(relay: relays[index].url))
            case .disconnected:
                relays[index].stats.disconnects += 1
                relays[index].activeSubscriptions.removeAll()
                relays[index].auth = AuthSession()
                for id in subscriptionOrder { eoseAnswered(id, relay: relays[index].url, into: &out) }
                out.append(.disconnected(relay: relays[index].url, reason: reason.isEmpty ? "closed" : reason))
            }
        }
    }
}
