public import BotSupport
public import Nostr
public import WebSocketRuntime
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The live relay pool: a ``RelayPoolCore`` driven by one ``WebSocketRuntime`` service thread and a few
/// verification workers.
///
/// Threads: socket events arrive on the runtime's loop thread, which parses each frame **outside** the
/// lock and then hands it to the core under the `Mutex`; events wait in their connection's window while
/// ``Limits/maxVerificationWorkers`` worker threads (one per core) run id + Schnorr checks outside the
/// lock, taking each relay's budget token under it; results are delivered in each relay's arrival order.
/// `publish`/`subscribe` come from any thread and take the same lock. The core only enqueues socket
/// commands, so nothing under the lock blocks. Signing and NIP-13 mining never happen here: callers hand in
/// finished events.
///
/// Reports (``events``) are yielded while the lock is held, so their order is the core's order; log lines
/// are written after it is released. ``events`` is a bounded `AsyncStream` (newest kept); overflow is
/// counted in ``droppedEvents`` and logged (first and every ``RelayPoolCore/Limits/dropReportInterval``-th).
///
/// No function value is kept in a generic container on the event path: the runtime's handler reaches
/// the pool through ``EventSink``'s weak reference. (Issue 14's crash 1: the handler used to sit in a
/// `Mutex<(@Sendable (WebSocketEvent) -> Void)?>` read with `withLock { $0 }`; each read re-abstracted the
/// stored closure and wrote the wrapper back, one thunk deeper per frame, until the stack overflowed.)
public final class RelayPool: Sendable {
    public enum Limits {
        /// Reports buffered for a slow consumer before the oldest are dropped (phones: 256 frames/relay).
        public static let eventBuffer = 1024
        /// Verification threads: one per online core, at most this many (Schnorr checks are CPU-bound and
        /// the lws thread needs a share too; 2 on the project's 2-core machines).
        public static let maxVerificationWorkers = 4

        /// The worker count for this machine: online cores, between 1 and ``maxVerificationWorkers``.
        public static var verificationWorkers: Int {
            min(maxVerificationWorkers, max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        }
    }

    public let events: AsyncStream<RelayPoolEvent>
    private let continuation: AsyncStream<RelayPoolEvent>.Continuation
    /// The core, and the verification workers' sleep count, under one lock (so a job queued while a worker
    /// goes to sleep always wakes it).
    private struct Shared {
        var core: RelayPoolCore
        /// Workers blocked on ``VerificationWorkers/awaitWork()``, not yet woken.
        var sleepingWorkers = 0
        var stopping = false
        /// The deadline the runtime's timer is armed for (the core's ``RelayPoolCore/nextDeadline()``).
        var armed: ContinuousClock.Instant?
    }

    private let shared: Mutex<Shared>
    private let runtime: WebSocketRuntime
    private let workers: VerificationWorkers
    private let dropped = Atomic<Int>(0)
    private let unixNow: @Sendable () -> Int64
    private let logger: Logger
    /// What the connection log lines call a relay of this pool (`relay connected`, `courier connected`).
    private let subject: String
    /// Verification threads this pool runs while ``run()`` runs.
    public let verificationWorkerCount: Int

    /// - Parameters:
    ///   - unixNow: wall-clock seconds for `since`, the freshness window and AUTH events (injected; the
    ///     executable passes the system clock).
    ///   - verificationWorkers: threads for id + Schnorr checks; nil = ``Limits/verificationWorkers``.
    ///   - subject: the first word of its connection log lines, so a second pool's read apart (`courier connected`).
    public init(
        relayURLs: [String], configuration: RelayPoolCore.Configuration,
        webSocket: WebSocketRuntime.Configuration, logger: Logger, unixNow: @escaping @Sendable () -> Int64,
        verificationWorkers: Int? = nil, subject: String = "relay"
    ) throws(WebSocketError) {
        self.subject = subject
        let (stream, continuation) = AsyncStream.makeStream(
            of: RelayPoolEvent.self, bufferingPolicy: .bufferingNewest(Limits.eventBuffer))
        events = stream
        self.continuation = continuation
        self.unixNow = unixNow
        self.logger = logger
        verificationWorkerCount = max(1, verificationWorkers ?? Limits.verificationWorkers)
        workers = VerificationWorkers(count: verificationWorkerCount)
        let sink = EventSink()
        runtime = WebSocketRuntime(configuration: webSocket, logger: logger) { event in sink.forward(event) }
        shared = Mutex(Shared(core: try RelayPoolCore(relayURLs: relayURLs, configuration: configuration, transport: runtime)))
        sink.attach(self)
    }

    /// Reports dropped because the consumer of ``events`` fell behind.
    public var droppedEvents: Int { dropped.load(ordering: .relaxed) }
    public var relayURLs: [String] { shared.withLock { $0.core.relayURLs } }
    public func stats(_ url: String) -> RelayStats? { shared.withLock { $0.core.stats(url) } }
    /// Verification outcomes of all relays since the pool started.
    public var verifierCounters: EventVerifier.Counters { shared.withLock { $0.core.verifierCounters } }
    public var connectedCount: Int { shared.withLock { $0.core.connectedCount } }
    /// Connected relays that answered within the answer window (``RelayPoolCore/Liveness``): what health
    /// should count as up.
    public var answeringCount: Int { shared.withLock { $0.core.answeringCount(now: .now) } }
    /// Whether `url` is connected and answering (nil for a relay not in the pool).
    public func isAnswering(_ url: String) -> Bool? { shared.withLock { $0.core.isAnswering(url, now: .now) } }
    /// Every relay's state, liveness and counters, read under one lock (for `/metrics` and `/healthz`).
    public func snapshot() -> RelayPoolSnapshot { shared.withLock { $0.core.snapshot(now: .now) } }
    /// The connection state of `url` now (nil for a relay not in the pool).
    public func state(_ url: String) -> RelayConnectionMachine.State? { shared.withLock { $0.core.state(url) } }

    /// See ``RelayPoolCore/setRelays(_:now:)``: closes removed relays, connects added ones (subscriptions
    /// follow on connect); a bad URL throws and changes nothing.
    @discardableResult
    public func setRelays(_ urls: [String]) throws(WebSocketError) -> RelayPoolCore.RelayListChange {
        var change = RelayPoolCore.RelayListChange()
        try apply { core throws(WebSocketError) in
            let result = try core.setRelays(urls, now: .now)
            change = result.change
            return result.events
        }
        return change
    }

    public func publish(_ event: NostrEvent) { apply { $0.publish(event) } }

    /// See ``RelayPoolCore/subscribe(id:filters:lookback:now:unixNow:)`` for the duplicate and replay rules.
    @discardableResult
    public func subscribe(id: String, filters: [NostrFilter], lookback: Int64?, trusted: Bool = false) -> RelayPoolCore.SubscribeOutcome {
        let unix = unixNow()
        return shared.withLock { $0.core.subscribe(id: id, filters: filters, lookback: lookback, trusted: trusted, now: .now, unixNow: unix) }
    }

    public func unsubscribe(id: String) { shared.withLock { $0.core.unsubscribe(id: id) } }

    /// See ``RelayPoolCore/setPriorityAuthors(_:)``: authors whose events may use a relay's priority
    /// reserve of verifications once its budget is spent (verified all the same).
    public func setPriorityAuthors(_ authors: Set<String>) { shared.withLock { $0.core.setPriorityAuthors(authors) } }

    /// Connects every relay and keeps them connected until the task is cancelled; then closes them,
    /// stops the service thread and the workers, and finishes ``events``.
    public func run() async throws(WebSocketError) {
        try runtime.start()
        if workers.start({ [self] in verifyLoop() }) == 0 {
            logger.error("no verification thread could be started; verifying on the socket thread")
        }
        // Deadlines computed before the runtime ran (a subscribe) could not arm its timer: arm it afresh.
        shared.withLock { $0.armed = nil }
        apply { $0.start(now: .now) }
        // No tick: the runtime's timer fires at the core's next deadline (``rearm(_:)``), on the loop thread.
        let stopped = WakeSignal()
        while !Task.isCancelled { await stopped.wait() }
        apply { $0.stop() }
        runtime.shutdown()
        stopWorkers()
        continuation.finish()
    }

    /// On the runtime's loop thread.
    fileprivate func receive(_ event: WebSocketEvent) {
        let unix = unixNow()
        guard case .text(let connection, let frame) = event else {
            if case .timer = event {
                // The armed timer has fired: whatever the tick does, the next deadline is armed afresh. (lws may fire a
                // few microseconds early; the tick then finds nothing due, the deadline is unchanged, and ``rearm(_:)``
                // skipped it as already armed — a relay stayed in backoff with "next attempt in 0 s" for 10–30 s.)
                applyShared { shared in
                    shared.armed = nil
                    return shared.core.handle(event, now: .now, unixNow: unix)
                }
                return
            }
            apply { $0.handle(event, now: .now, unixNow: unix) }
            return
        }
        let parsed = RelayPoolCore.parse(frame)
        let inline = workers.running == 0
        var wake = 0
        applyShared { shared in
            var reports = shared.core.receive(parsed, on: connection, now: .now, unixNow: unix)
            if inline { reports += shared.core.verifyWaiting(now: .now) }
            // Wake as many sleeping workers as there are jobs for — decided under the lock the workers
            // fall asleep under, so no job waits for a worker that is about to sleep.
            wake = min(shared.sleepingWorkers, shared.core.waitingJobs)
            shared.sleepingWorkers -= wake
            return reports
        }
        workers.wake(wake)
    }

    /// One worker thread: under the lock once per job, deliver the last job's outcome and take the next
    /// (with its budget token); verify it outside the lock; sleep when there is no job.
    private func verifyLoop() {
        var done: (job: RelayPoolCore.VerificationJob, outcome: Result<NostrEvent, NostrError>)?
        while true {
            var next: RelayPoolCore.VerificationJob?
            var stop = false
            applyShared { [done] shared in
                var reports: [RelayPoolEvent] = []
                if let done { reports = shared.core.finish(done.job, done.outcome, now: .now) }
                if shared.stopping {
                    stop = true
                } else if let job = shared.core.takeJob(now: .now) {
                    next = job
                } else {
                    shared.sleepingWorkers += 1
                }
                return reports
            }
            done = nil
            if stop { return }
            if let job = next {
                done = (job, RelayPoolCore.verify(job))
            } else {
                workers.awaitWork()
            }
        }
    }

    /// Tells the workers to end (each sees it at its next look; sleeping ones are woken) and joins them.
    private func stopWorkers() {
        let sleeping = shared.withLock { shared in
            shared.stopping = true
            defer { shared.sleepingWorkers = 0 }
            return shared.sleepingWorkers
        }
        workers.wake(sleeping)
        workers.join()
    }

    /// Runs `body` on the core under the lock, yields its reports in order while still holding it, then
    /// logs them.
    private func apply<E: Error>(_ body: (inout RelayPoolCore) throws(E) -> [RelayPoolEvent]) throws(E) {
        try applyShared { shared throws(E) in try body(&shared.core) }
    }

    /// Arms the runtime's timer for the core's next deadline when it changed (under the lock, after every change:
    /// O(relays + subscriptions), a fraction of a frame's parse).
    private func rearm(_ shared: inout Shared) {
        let next = shared.core.nextDeadline()
        guard next != shared.armed, !shared.stopping else { return }
        shared.armed = next
        runtime.scheduleTimer(at: next)
    }

    private func applyShared<E: Error>(_ body: (inout Shared) throws(E) -> [RelayPoolEvent]) throws(E) {
        var overflow: [Int] = []
        let reports = try shared.withLock { shared throws(E) in
            let reports = try body(&shared)
            for report in reports {
                if case .dropped(let lost) = continuation.yield(report) {
                    shared.core.reportLost(lost, now: .now)
                    let total = dropped.add(1, ordering: .relaxed).newValue
                    if RelayPoolCore.isReported(total) { overflow.append(total) }
                }
            }
            // After the reports: a trusted event lost on the way schedules a backfill (``RelayPoolCore/reportLost``).
            rearm(&shared)
            return reports
        }
        log(reports)
        for total in overflow {
            logger.info("relay pool report stream full; oldest report dropped", [
                ("queue", .string("relay_events")), ("queue.dropped", .integer(Int64(total))),
            ])
        }
    }

    private func log(_ reports: [RelayPoolEvent]) {
        for report in reports {
            switch report {
            case .connected(let relay): logger.info("\(subject) connected", [("relay.url", .string(relay))])
            case .disconnected(let relay, let reason):
                logger.info("\(subject) disconnected", [("relay.url", .string(relay)), ("reason", .string(reason))])
            case .connectFailed(let relay, let reason):
                logger.warning("\(subject) connect failed", [("relay.url", .string(relay)), ("reason", .string(reason))])
            case .closedByPool(let relay, let why, let detail):
                logger.warning("\(subject) closed by the pool", [
                    ("relay.url", .string(relay)), ("reason", .string(why.rawValue)), ("detail", .string(detail)),
                ])
            case .rejected(let relay, let subscription, let reason, let count):
                logger.info("inbound dropped", [
                    ("relay.url", .string(relay)), ("drop.reason", .string(reason.rawValue)),
                    ("drop.category", .string(reason.category.rawValue)), ("drop.count", .integer(Int64(count))),
                    ("subscription", subscription.map { .string($0) } ?? .null),
                ])
            case .publishQueueDropped(let relay, let count):
                logger.info("offline publish queue full; oldest event dropped", [
                    ("relay.url", .string(relay)), ("queue", .string("relay_offline")), ("queue.dropped", .integer(Int64(count))),
                ])
            case .ok(let relay, let id, false, let message):
                logger.info("event rejected by relay",
                            [("relay.url", .string(relay)), ("event.id", .string(id)), ("reason", .string(message))])
            case .closed(let relay, let subscription, let message):
                logger.info("subscription closed by relay",
                            [("relay.url", .string(relay)), ("subscription", .string(subscription)), ("reason", .string(message))])
            case .notice(let relay, let message):
                logger.info("\(subject) notice", [("relay.url", .string(relay)), ("notice", .string(message))])
            case .event, .endOfStoredEvents, .ok: break
            }
        }
    }
}

/// Hands the runtime's events to the pool. The runtime is created before the pool is complete and the
/// pool holds the runtime, so the sink holds the pool weakly — a reference in a struct, never a closure in
/// a generic container (see ``RelayPool``).
private final class EventSink: Sendable {
    private struct Target {
        weak var pool: RelayPool?
    }

    private let target = Mutex(Target())

    func attach(_ pool: RelayPool) { target.withLock { $0.pool = pool } }

    func forward(_ event: WebSocketEvent) { target.withLock { $0.pool }?.receive(event) }
}

/// The verification threads: started by ``RelayPool/run()``, woken by the pool when jobs arrive while they
/// sleep (the pool counts the sleepers under its lock), joined at its end.
private final class VerificationWorkers: @unchecked Sendable {
    let count: Int
    private let work = DispatchSemaphore(value: 0)
    /// Written by `start`/`join` only, on the thread running ``RelayPool/run()``.
    private var threads: [pthread_t] = []
    private let runningCount = Atomic<Int>(0)

    init(count: Int) { self.count = count }

    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Threads running (0 before ``start(_:)``, after ``join()``, or if none could be created).
    var running: Int { runningCount.load(ordering: .acquiring) }

    /// Starts the threads; returns how many could be created.
    func start(_ body: @escaping @Sendable () -> Void) -> Int {
        for _ in 0..<count {
            var thread = pthread_t()
            let box = Unmanaged.passRetained(Body(body)).toOpaque()
            let rc = pthread_create(&thread, nil, { argument in
                guard let argument else { return nil }
                Unmanaged<Body>.fromOpaque(argument).takeRetainedValue().run()
                return nil
            }, box)
            if rc == 0 {
                threads.append(thread)
            } else {
                Unmanaged<Body>.fromOpaque(box).release()
            }
        }
        runningCount.store(threads.count, ordering: .releasing)
        return threads.count
    }

    /// Wakes `workers` sleeping workers.
    func wake(_ workers: Int) {
        for _ in 0..<max(0, workers) { work.signal() }
    }

    /// Blocks until woken.
    func awaitWork() { work.wait() }

    /// Waits for every thread to end (after the pool told them to stop).
    func join() {
        for thread in threads { pthread_join(thread, nil) }
        threads.removeAll()
        runningCount.store(0, ordering: .releasing)
    }
}
