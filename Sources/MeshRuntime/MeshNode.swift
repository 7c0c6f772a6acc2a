public import Mesh
public import BotSupport
import Synchronization
public import BitchatWire

/// The bounds of a ``MeshNodeOf``.
public enum MeshNodeLimits {
    /// Actions buffered for the consumer of ``actions``; overflow is dropped and counted. A dropped peer
    /// change is repaired by a ``MeshAction/peersResync(_:)`` as soon as there is room (retried every
    /// ``resyncRetryMs``).
    public static let actionBuffer = 4_096
    /// Delayed transmits waiting for their jitter to elapse; more are dropped and counted.
    public static let maxPendingTransmits = 8_192
    /// Inputs waiting in ``MeshNode/enqueue(_:)``'s queue; more are dropped and counted.
    public static let maxQueuedInputs = 4_096
    /// How soon a peer resync is offered again while the consumer of ``actions`` has no room.
    public static let resyncRetryMs: UInt64 = 1_000
}

/// What the node itself counts (the engine's counters are ``MeshNode/counters``).
public struct MeshNodeCounters: Sendable, Equatable {
    /// Frames handed to the transport.
    public var transmitted = 0
    /// Actions the consumer of ``MeshNode/actions`` did not take in time.
    public var droppedActions = 0
    /// Delayed transmits beyond ``Limits/maxPendingTransmits``.
    public var droppedTransmits = 0
    /// ``MeshNode/enqueue(_:)`` calls beyond ``Limits/maxQueuedInputs``.
    public var droppedInputs = 0
    /// Transmits still waiting when a ``MeshNode/flush(timeoutMs:)`` ran out of time (dropped).
    public var abandonedAtFlush = 0
    /// ``MeshAction/peersResync(_:)`` actions delivered after dropped peer changes.
    public var peerResyncs = 0

    public init() {}
}

/// What ``MeshNodeOf/flush(timeoutMs:)`` achieved.
public struct MeshNodeFlushReport: Sendable, Equatable {
    /// True when every queued input was applied and every transmit handed to the transport in time.
    public var completed: Bool
    /// Transmits dropped at the deadline.
    public var abandonedTransmits: Int
}

/// The node that runs the bridge's (and the test phones') ``MeshPeerEngine``.
public typealias MeshNode = MeshNodeOf<MeshPeerEngine>

/// Runs a ``MeshMachine`` — the ``MeshPeerEngine``, or a test world's model of an app — against a real
/// ``MeshTransport``: feeds it transport events and the owner's inputs, wakes it at its own next deadline
/// (``MeshMachine/nextDeadline()``), performs its transmits (honouring their jitter delays) and publishes
/// everything else on ``actions``.
///
/// The engine stays pure; the node is the only place with time, and its time is a ``TimeSource`` (tests inject
/// ``ManualTime``). One timer task sleeps until the earliest of the engine's deadline and the next due transmit,
/// and is woken early (``DeadlineInbox``) when new work is due sooner or the owner queued an input. No ticks: an
/// idle node with no links sleeps until something arrives.
///
/// Inputs arrive two ways, both applied in the order given:
/// - ``submit(_:)`` (async, returns the time the input was applied at), for callers that await each input;
/// - ``enqueue(_:)`` (synchronous, from any context, bounded), for an owner such as the bridge's coordinator
///   that must not wait on the node but needs its inputs kept in order. ``flush(timeoutMs:)`` then applies
///   what is queued and waits until every transmit has left, so a stop can send the leave and close the
///   transport only after it went out.
///
/// Ends when the transport's event sequence ends (it is closed) or the task running ``run()`` is cancelled.
public actor MeshNodeOf<Engine: MeshMachine> {
    public typealias Limits = MeshNodeLimits
    public typealias Counters = MeshNodeCounters
    public typealias FlushReport = MeshNodeFlushReport

    /// A transmit waiting for its delay.
    private struct Pending {
        let link: MeshLinkID
        let frame: [UInt8]
    }

    public nonisolated let actions: AsyncStream<MeshAction>
    private let continuation: AsyncStream<MeshAction>.Continuation
    private var engine: Engine
    private let transport: any MeshTransport
    private let clock: any TimeSource
    private var random: SeededRandom
    /// The owner's queued inputs and the timer's wake-up.
    private let inbox = DeadlineInbox<MeshInput>(capacity: Limits.maxQueuedInputs)
    private var pending = MinHeap<Timed<Pending>>()
    private var sequence: UInt64 = 0
    private var nodeCounters = Counters()
    private var droppedInputs = 0
    /// A peer change was dropped: the consumer's view of the live peers is stale until a resync gets through.
    private var peersOutOfSync = false

    /// `actionBuffer`: ``Limits/actionBuffer`` (tests make it small to overflow it).
    public init(engine: Engine, transport: any MeshTransport, clock: any TimeSource, seed: UInt64,
                actionBuffer: Int = Limits.actionBuffer) {
        self.engine = engine
        self.transport = transport
        self.clock = clock
        self.random = SeededRandom(seed: seed)
        (actions, continuation) = AsyncStream.makeStream(of: MeshAction.self, bufferingPolicy: .bufferingOldest(actionBuffer))
    }

    /// `wallClock` returns ms since the Unix epoch (the executable passes the system clock).
    public init(engine: Engine, transport: any MeshTransport, wallClock: @escaping @Sendable () -> UInt64, seed: UInt64) {
        self.init(engine: engine, transport: transport, clock: SystemTime(wallClock: wallClock), seed: seed)
    }

    /// The node's own counters (transmits, drops).
    public var driverCounters: Counters {
        var counters = nodeCounters
        counters.droppedInputs = droppedInputs
        return counters
    }
    /// True while jittered transmits are still waiting.
    public var hasPendingTransmits: Bool { !pending.isEmpty }

    /// Applies an input now (e.g. `.sendPublicMessage`) and returns the timestamp (ms) it was applied at.
    /// Inputs queued with ``enqueue(_:)`` before this call are applied first, so the two paths keep order.
    @discardableResult
    public func submit(_ input: MeshInput) -> UInt64 {
        applyQueuedInputs()
        let now = apply(input)
        wakeIfSooner()
        return now
    }

    /// Queues an input to be applied in order, without waiting (from any context). False when the queue is
    /// full (the input is dropped and counted).
    @discardableResult
    public nonisolated func enqueue(_ input: MeshInput) -> Bool { inbox.post(input) }

    /// Applies every queued input, then waits until every pending transmit has been handed to the transport
    /// or `timeoutMs` passed on the node's clock; what still waits then is dropped and counted. Works whether
    /// or not ``run()`` is running. Meant for a stop: enqueue the leave, flush, then close the transport.
    public func flush(timeoutMs: UInt64) async -> FlushReport {
        applyQueuedInputs()
        let deadline = clock.nowMs() &+ timeoutMs
        while let next = pending.first {
            let now = clock.nowMs()
            flushDue(now: now)
            guard !pending.isEmpty else { break }
            guard now < deadline, !Task.isCancelled else {
                let abandoned = pending.count
                pending.removeAll()
                nodeCounters.abandonedAtFlush += abandoned
                return FlushReport(completed: false, abandonedTransmits: abandoned)
            }
            await clock.sleep(untilMs: min(next.due, deadline))
        }
        return FlushReport(completed: true, abandonedTransmits: 0)
    }

    /// Drives the node until the transport closes or the task is cancelled.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [transport] in
                for await event in transport.events {
                    await self.handle(event)
                }
            }
            group.addTask { await self.timerLoop() }
            // The transport ending ends the node.
            await group.next()
            group.cancelAll()
        }
        applyQueuedInputs()
        continuation.finish()
    }

    // MARK: Inputs

    private func handle(_ event: MeshTransportEvent) {
        let input: MeshInput =
            switch event {
            case .linkUp(let link, let mtu, let kind): .linkUp(link, mtu: mtu, kind: kind)
            case .linkDown(let link): .linkDown(link)
            case .frame(let link, let frame): .frame(link, frame)
            }
        // The owner's inputs posted before this event go first: a restarted bridge's pins (posted at start) are in the
        // engine before the first frame, so a pinned phone's deposit right after the restart is not dropped unverified.
        applyQueuedInputs()
        apply(input)
        wakeIfSooner()
    }

    @discardableResult
    private func apply(_ input: MeshInput) -> UInt64 {
        let now = clock.nowMs()
        perform(engine.handle(input, now: now, random: &random), now: now)
        return now
    }

    private func applyQueuedInputs() {
        let (inputs, dropped) = inbox.take()
        droppedInputs += dropped
        for input in inputs { apply(input) }
    }

    // MARK: Timer

    /// When the node next has work: the engine's deadline, the next due transmit, a peer resync to retry.
    private func nextDeadline(now: UInt64) -> UInt64 {
        var next = min(engine.nextDeadline() ?? .max, pending.first?.due ?? .max)
        if peersOutOfSync { next = min(next, now &+ Limits.resyncRetryMs) }
        return next
    }

    /// Tells the timer when an input brought the next deadline forward.
    private func wakeIfSooner() { inbox.bringForward(nextDeadline(now: clock.nowMs())) }

    /// Sleeps until the next deadline (woken early by new work or a queued input), then does what is due.
    private func timerLoop() async {
        while !Task.isCancelled {
            await inbox.wait(until: nextDeadline(now: clock.nowMs()), on: clock)
            guard !Task.isCancelled else { return }
            applyQueuedInputs()
            let now = clock.nowMs()
            if let due = engine.nextDeadline(), due <= now { perform(engine.handle(.tick, now: now, random: &random), now: now) }
            resyncPeersIfNeeded()
            flushDue(now: now)
        }
    }

    /// After a dropped peer change, offers the whole table until the consumer has room for it (a flood keeps the
    /// buffer full; the table is bounded, so one snapshot per retry is cheap).
    private func resyncPeersIfNeeded() {
        guard peersOutOfSync else { return }
        if case .enqueued = continuation.yield(.peersResync(engine.livePeers)) {
            peersOutOfSync = false
            nodeCounters.peerResyncs += 1
        }
    }

    // MARK: Actions

    private func perform(_ actions: [MeshAction], now: UInt64) {
        for action in actions {
            switch action {
            case .transmit(let link, let frame, let delay):
                if delay == 0 {
                    transport.send(frame, on: link)
                    nodeCounters.transmitted += 1
                } else if pending.count < Limits.maxPendingTransmits {
                    sequence += 1
                    pending.push(Timed(due: now + delay, sequence: sequence, item: Pending(link: link, frame: frame)))
                } else {
                    nodeCounters.droppedTransmits += 1
                }
            default:
                if case .dropped = continuation.yield(action) {
                    nodeCounters.droppedActions += 1
                    if action.changesPeers { peersOutOfSync = true }
                }
            }
        }
    }

    private func flushDue(now: UInt64) {
        while let next = pending.first, next.due <= now, let item = pending.pop()?.item {
            transport.send(item.frame, on: item.link)
            nodeCounters.transmitted += 1
        }
    }
}

extension MeshNodeOf where Engine == MeshPeerEngine {
    public var peers: [MeshPeerID: MeshPeer] { engine.peers }
    public var counters: MeshCounters { engine.counters }
    public var linkCount: Int { engine.linkCount }
    public var identity: MeshIdentity { engine.identity }
}

extension MeshNodeOf where Engine: Sendable {
    /// The machine as it is now (a copy: a test reads a model's state through it).
    public var machine: Engine { engine }
}
