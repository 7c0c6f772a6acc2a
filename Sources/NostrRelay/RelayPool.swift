public import BotSupport
public import Nostr
public import WebSocketRuntime
import Synchronization

/// The live relay pool: a ``RelayPoolCore`` driven by one ``WebSocketRuntime`` service thread.
///
/// Threads: socket events arrive on the runtime's loop thread and are fed to the core under a `Mutex`;
/// `publish`/`subscribe` come from any thread and take the same lock. The core only enqueues socket
/// commands, so nothing blocks the loop except Schnorr checks, which the verification budget bounds.
/// Signing and NIP-13 mining never happen here: callers hand in finished events.
///
/// Inbound events leave through ``events``, a bounded `AsyncStream` (newest kept); overflow is counted
/// in ``droppedEvents``.
public final class RelayPool: Sendable {
    public enum Limits {
        /// Reports buffered for a slow consumer before the oldest are dropped (phones: 256 frames/relay).
        public static let eventBuffer = 1024
        /// Timer resolution for backoff, connect timeouts and probes.
        public static let tickInterval: Duration = .milliseconds(200)
    }

    public let events: AsyncStream<RelayPoolEvent>
    private let continuation: AsyncStream<RelayPoolEvent>.Continuation
    private let core: Mutex<RelayPoolCore>
    private let runtime: WebSocketRuntime
    private let dropped = Atomic<Int>(0)
    private let unixNow: @Sendable () -> Int64
    private let logger: Logger

    /// - Parameters:
    ///   - unixNow: wall-clock seconds for `since` and AUTH events (injected; the executable passes the
    ///     system clock).
    public init(
        relayURLs: [String], configuration: RelayPoolCore.Configuration,
        webSocket: WebSocketRuntime.Configuration, logger: Logger, unixNow: @escaping @Sendable () -> Int64
    ) throws(WebSocketError) {
        let (stream, continuation) = AsyncStream.makeStream(
            of: RelayPoolEvent.self, bufferingPolicy: .bufferingNewest(Limits.eventBuffer))
        events = stream
        self.continuation = continuation
        self.unixNow = unixNow
        self.logger = logger
        let forwarder = Forwarder()
        runtime = WebSocketRuntime(configuration: webSocket, logger: logger) { event in forwarder.forward(event) }
        core = Mutex(try RelayPoolCore(relayURLs: relayURLs, configuration: configuration, transport: runtime))
        forwarder.target.withLock { $0 = { [weak self] event in self?.handle(event) } }
    }

    public var droppedEvents: Int { dropped.load(ordering: .relaxed) }
    public var relayURLs: [String] { core.withLock { $0.relayURLs } }
    public func stats(_ url: String) -> RelayStats? { core.withLock { $0.stats(url) } }
    public var verifierCounters: EventVerifier.Counters { core.withLock { $0.verifierCounters } }
    public var connectedCount: Int { core.withLock { $0.connectedCount } }
    /// The connection state of `url` now (nil for a relay not in the pool).
    public func state(_ url: String) -> RelayConnectionMachine.State? { core.withLock { $0.state(url) } }

    /// See ``RelayPoolCore/setRelays(_:now:)``: closes removed relays, connects added ones (subscriptions
    /// follow on connect); a bad URL throws and changes nothing.
    @discardableResult
    public func setRelays(_ urls: [String]) throws(WebSocketError) -> RelayPoolCore.RelayListChange {
        let (change, reports) = try core.withLock { core throws(WebSocketError) in try core.setRelays(urls, now: .now) }
        emit(reports)
        return change
    }

    public func publish(_ event: NostrEvent) { core.withLock { $0.publish(event) } }

    /// See ``RelayPoolCore/subscribe(id:filters:lookback:now:unixNow:)`` for the duplicate and replay rules.
    @discardableResult
    public func subscribe(id: String, filters: [NostrFilter], lookback: Int64?) -> RelayPoolCore.SubscribeOutcome {
        let unix = unixNow()
        return core.withLock { $0.subscribe(id: id, filters: filters, lookback: lookback, now: .now, unixNow: unix) }
    }

    public func unsubscribe(id: String) { core.withLock { $0.unsubscribe(id: id) } }

    /// Connects every relay and keeps them connected until the task is cancelled; then closes them,
    /// stops the service thread and finishes ``events``.
    public func run() async throws(WebSocketError) {
        try runtime.start()
        emit(core.withLock { $0.start(now: .now) })
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: Limits.tickInterval)
            } catch {
                break
            }
            let unix = unixNow()
            emit(core.withLock { $0.tick(now: .now, unixNow: unix) })
        }
        emit(core.withLock { $0.stop() })
        runtime.shutdown()
        continuation.finish()
    }

    private func handle(_ event: WebSocketEvent) {
        let unix = unixNow()
        emit(core.withLock { $0.handle(event, now: .now, unixNow: unix) })
    }

    private func emit(_ reports: [RelayPoolEvent]) {
        for report in reports {
            switch report {
            case .connected(let relay): logger.info("relay connected", [("relay.url", .string(relay))])
            case .disconnected(let relay, let reason):
                logger.info("relay disconnected", [("relay.url", .string(relay)), ("reason", .string(reason))])
            case .connectFailed(let relay, let reason):
                logger.warning("relay connect failed", [("relay.url", .string(relay)), ("reason", .string(reason))])
            case .rejected(let relay, _, let reason):
                logger.debug("inbound dropped", [("relay.url", .string(relay)), ("drop.reason", .string(reason))])
            case .ok(let relay, let id, false, let message):
                logger.info("event rejected by relay",
                            [("relay.url", .string(relay)), ("event.id", .string(id)), ("reason", .string(message))])
            case .closed(let relay, let subscription, let message):
                logger.info("subscription closed by relay",
                            [("relay.url", .string(relay)), ("subscription", .string(subscription)), ("reason", .string(message))])
            case .notice(let relay, let message):
                logger.info("relay notice", [("relay.url", .string(relay)), ("notice", .string(message))])
            default: break
            }
            if case .dropped = continuation.yield(report) { dropped.add(1, ordering: .relaxed) }
        }
    }
}

/// Breaks the init-order cycle runtime ↔ pool: the runtime is created first and forwards to whatever
/// target the pool installs.
private final class Forwarder: Sendable {
    let target = Mutex<(@Sendable (WebSocketEvent) -> Void)?>(nil)

    func forward(_ event: WebSocketEvent) {
        let target = target.withLock { $0 }
        target?(event)
    }
}
