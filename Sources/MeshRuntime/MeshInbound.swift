public import Mesh
import BotSupport
import Synchronization

/// The inbound path of a transport: what its owner thread received, queued per link under a budget and
/// handed to the single consumer (the ``MeshNode``) round-robin across links — one event per link with
/// something queued, in turn — so a flood on one link costs the other links nothing but their turn.
///
/// It also keeps the transport's counters (``MeshTransportCounters``): every frame accepted or dropped,
/// by reason and link, inbound and outbound (transports report their own drops here).
///
/// Per link, events stay in order (`linkUp`, its frames, `linkDown`). Link events are never dropped (there
/// are as many as links); a frame beyond the link's budget is dropped and counted `queueFull`. The sequence
/// ends after ``finish()`` once everything queued was taken, or when the consuming task is cancelled.
public final class MeshInbound: AsyncSequence, Sendable {
    public typealias Element = MeshTransportEvent

    public enum Limits {
        /// Frames waiting for the consumer per link: bursts (a fragmented 16 KB deposit is ~35 frames at the
        /// BLE MTU) fit many times over, a flood stops at this and costs the node nothing more.
        public static let framesPerLink = 512
        /// Bytes waiting per link (hubs may carry frames of up to 64 KiB): 1 MiB.
        public static let bytesPerLink = 1 << 20
    }

    private struct LinkQueue {
        var events = FIFOQueue<MeshTransportEvent>()
        var frames = 0
        var bytes = 0
        /// Between the producer's `linkUp` and `linkDown`.
        var up = false
        var counters = MeshLinkCounters()

        var isEmpty: Bool { events.isEmpty }

        mutating func take() -> MeshTransportEvent? {
            let event = events.popFirst()
            if case .frame(_, let bytes) = event {
                frames -= 1
                self.bytes -= bytes.count
            }
            return event
        }
    }

    private struct State {
        var links: [MeshLinkID: LinkQueue] = [:]
        /// Links with queued events, in turn order (each at most once).
        var ready = FIFOQueue<MeshLinkID>()
        var waiter: CheckedContinuation<MeshTransportEvent?, Never>?
        var finished = false
        var cancelled = false
        var totals = MeshTransportCounters()
        /// Those waiting in ``drained()``.
        var drainWaiters: [CheckedContinuation<Void, Never>] = []

        /// The drain waiters to resume, when nothing is queued on any link.
        mutating func drainedWaiters() -> [CheckedContinuation<Void, Never>] {
            guard ready.isEmpty, !drainWaiters.isEmpty else { return [] }
            defer { drainWaiters = [] }
            return drainWaiters
        }

        mutating func enqueue(_ event: MeshTransportEvent, on link: MeshLinkID, into queue: inout LinkQueue) {
            if queue.isEmpty { ready.append(link) }
            queue.events.append(event)
        }

        mutating func pop() -> MeshTransportEvent? {
            while let link = ready.popFirst() {
                guard var queue = links[link], let event = queue.take() else { continue }
                if !queue.isEmpty { ready.append(link) }
                // A link that went down and has nothing left to deliver is forgotten (its counts stay in the totals).
                links[link] = queue.isEmpty && !queue.up ? nil : queue
                return event
            }
            return nil
        }

        /// The waiting consumer and the event it gets, if both exist (resumed outside the lock).
        mutating func handOff() -> (CheckedContinuation<MeshTransportEvent?, Never>, MeshTransportEvent?)? {
            guard let waiter else { return nil }
            if let event = pop() {
                self.waiter = nil
                return (waiter, event)
            }
            if finished {
                self.waiter = nil
                return (waiter, nil)
            }
            return nil
        }
    }

    private let state = Mutex(State())

    public init() {}

    // MARK: Producer (the transport)

    private enum Admission {
        case queue
        case drop(MeshInboundDrop)
        /// Not queued, not a drop (a `linkDown` for a link that is not up).
        case ignore
    }

    public func linkUp(_ link: MeshLinkID, mtu: Int, kind: MeshLinkKind = .point) {
        push(.linkUp(link, mtu: mtu, kind: kind), on: link) { queue in
            queue.up = true
            return .queue
        }
    }

    public func linkDown(_ link: MeshLinkID) {
        push(.linkDown(link), on: link) { queue in
            guard queue.up else { return .ignore }
            queue.up = false
            return .queue
        }
    }

    /// Queues one inbound frame; false (counted) when the link is unknown or over its budget.
    @discardableResult
    public func frame(_ link: MeshLinkID, _ bytes: [UInt8]) -> Bool {
        push(.frame(link, bytes), on: link) { queue in
            guard queue.up else { return .drop(.unknownLink) }
            guard queue.frames < Limits.framesPerLink, queue.bytes + bytes.count <= Limits.bytesPerLink else {
                return .drop(.queueFull)
            }
            queue.frames += 1
            queue.bytes += bytes.count
            queue.counters.framesIn += 1
            queue.counters.bytesIn += bytes.count
            return .queue
        }
    }

    /// An inbound frame the transport itself refused (e.g. the BLE link gate), counted for `link`.
    public func countDrop(_ reason: MeshInboundDrop, on link: MeshLinkID) {
        state.withLock { state in
            state.totals.inboundDrops.add(reason)
            state.links[link]?.counters.inboundDrops.add(reason)
        }
    }

    /// An outbound frame the transport could not write, counted for `link`.
    public func countOutboundDrop(_ reason: MeshOutboundDrop, on link: MeshLinkID) {
        state.withLock { state in
            state.totals.outboundDrops.add(reason)
            state.links[link]?.counters.outboundDrops.add(reason)
        }
    }

    public func countReconnect() {
        state.withLock { $0.totals.reconnects += 1 }
    }

    /// No more events: the consumer gets what is queued, then the end of the sequence.
    public func finish() {
        let handOff = state.withLock { state in
            state.finished = true
            return state.handOff()
        }
        if let (waiter, event) = handOff { waiter.resume(returning: event) }
    }

    /// Totals over the transport's life and the live links' own counters.
    public var counters: MeshTransportCounters {
        state.withLock { state in
            var counters = state.totals
            for (link, queue) in state.links where queue.up { counters.links[link] = queue.counters }
            return counters
        }
    }

    /// Events waiting for the consumer, all links (a queue-depth gauge).
    public var queuedEvents: Int { state.withLock { $0.links.values.reduce(0) { $0 + $1.events.count } } }

    /// Links up as the producer reported them (the consumer may not have seen the latest change yet).
    public var linksUp: Int { state.withLock { $0.links.values.filter(\.up).count } }

    /// Runs `admit` on the link's queue under the lock and queues the event (handing it to a waiting
    /// consumer) or counts the drop. Returns whether the event was queued.
    @discardableResult
    private func push(_ event: MeshTransportEvent, on link: MeshLinkID, admit: (inout LinkQueue) -> Admission) -> Bool {
        typealias HandOff = (CheckedContinuation<MeshTransportEvent?, Never>, MeshTransportEvent?)
        let (queued, handOff) = state.withLock { state -> (Bool, HandOff?) in
            guard !state.finished else { return (false, nil) }
            var queue = state.links[link] ?? LinkQueue()
            let admission = admit(&queue)
            switch admission {
            case .queue:
                state.enqueue(event, on: link, into: &queue)
                if case .frame = event { state.totals.framesIn += 1 }
            case .drop(let reason):
                queue.counters.inboundDrops.add(reason)
                state.totals.inboundDrops.add(reason)
            case .ignore:
                break
            }
            if queue.up || !queue.isEmpty { state.links[link] = queue }
            if case .queue = admission { return (true, state.handOff()) }
            return (false, nil)
        }
        if let (waiter, event) = handOff { waiter.resume(returning: event) }
        return queued
    }

    /// Returns once no event waits on any link (the consumer took the last one): a flooded link's queue is worked
    /// through, so a frame queued next is not dropped `queueFull` (a test's barrier after a flood).
    public func drained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                state.drainWaiters.append(continuation)
                return state.drainedWaiters()
            }
            for waiter in now { waiter.resume() }
        }
    }

    // MARK: Consumer (one task)

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbound: MeshInbound

        public mutating func next() async -> MeshTransportEvent? { await inbound.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inbound: self) }

    private func next() async -> MeshTransportEvent? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<MeshTransportEvent?, Never>) in
                let (now, drained) = state.withLock { state -> (MeshTransportEvent??, [CheckedContinuation<Void, Never>]) in
                    if let event = state.pop() { return (.some(event), state.drainedWaiters()) }
                    if state.finished || state.cancelled { return (.some(nil), []) }
                    state.waiter = continuation
                    return (nil, [])
                }
                for waiter in drained { waiter.resume() }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
