import BotSupport
public import BitchatWire

/// Runs a ``MeshPeerEngine`` against a real ``MeshTransport``: feeds it transport events and a 1 s tick,
/// performs its transmits (honouring their jitter delays) and publishes everything else on ``actions``.
///
/// The engine stays pure; this actor is the only place with a clock. `wallClock` returns ms since the Unix
/// epoch (injected; the executable passes the system clock). Ends when the transport's event stream ends
/// or the task running ``run()`` is cancelled.
public actor MeshNode {
    public enum Limits {
        /// Actions buffered for the consumer of ``actions``; overflow is dropped and counted.
        public static let actionBuffer = 4_096
        /// Delayed transmits waiting for their jitter to elapse.
        public static let maxPendingTransmits = 8_192
        /// Engine tick period.
        public static let tickMs: UInt64 = 1_000
    }

    public nonisolated let actions: AsyncStream<MeshAction>
    private let continuation: AsyncStream<MeshAction>.Continuation
    private var engine: MeshPeerEngine
    private let transport: any MeshTransport
    private let wallClock: @Sendable () -> UInt64
    private var random: SeededRandom
    private var pending: [(due: UInt64, link: MeshLinkID, frame: [UInt8])] = []
    private var lastTick: UInt64 = 0
    public private(set) var droppedActions = 0
    public private(set) var droppedTransmits = 0
    public private(set) var transmitted = 0

    public init(engine: MeshPeerEngine, transport: any MeshTransport, wallClock: @escaping @Sendable () -> UInt64, seed: UInt64) {
        self.engine = engine
        self.transport = transport
        self.wallClock = wallClock
        self.random = SeededRandom(seed: seed)
        (actions, continuation) = AsyncStream.makeStream(of: MeshAction.self, bufferingPolicy: .bufferingOldest(Limits.actionBuffer))
    }

    public var peers: [MeshPeerID: MeshPeer] { engine.peers }
    public var counters: [String: Int] { engine.counters }
    public var linkCount: Int { engine.linkCount }
    public var identity: MeshIdentity { engine.identity }
    /// True while jittered transmits are still waiting.
    public var hasPendingTransmits: Bool { !pending.isEmpty }

    /// Applies an input now (e.g. `.sendPublicMessage`) and returns the timestamp (ms) it was applied at.
    @discardableResult
    public func submit(_ input: MeshInput) -> UInt64 {
        let now = wallClock()
        perform(engine.handle(input, now: now, random: &random), now: now)
        return now
    }

    /// Drives the node until the transport closes or the task is cancelled.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [transport] in
                for await event in transport.events {
                    await self.handle(event)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    let wait = await self.hasPendingTransmits ? 5 : 50
                    try? await Task.sleep(for: .milliseconds(wait))
                    await self.timerFired()
                }
            }
            // The transport ending ends the node.
            await group.next()
            group.cancelAll()
        }
        continuation.finish()
    }

    private func handle(_ event: MeshTransportEvent) {
        let input: MeshInput =
            switch event {
            case .linkUp(let link, let mtu): .linkUp(link, mtu: mtu)
            case .linkDown(let link): .linkDown(link)
            case .frame(let link, let frame): .frame(link, frame)
            }
        submit(input)
    }

    private func timerFired() {
        let now = wallClock()
        if now >= lastTick + Limits.tickMs {
            lastTick = now
            perform(engine.handle(.tick, now: now, random: &random), now: now)
        }
        flushDue(now: now)
    }

    private func perform(_ actions: [MeshAction], now: UInt64) {
        for action in actions {
            switch action {
            case .transmit(let link, let frame, let delay):
                if delay == 0 {
                    transport.send(frame, on: link)
                    transmitted += 1
                } else if pending.count < Limits.maxPendingTransmits {
                    pending.append((now + delay, link, frame))
                } else {
                    droppedTransmits += 1
                }
            default:
                if case .dropped = continuation.yield(action) { droppedActions += 1 }
            }
        }
        flushDue(now: now)
    }

    private func flushDue(now: UInt64) {
        guard !pending.isEmpty else { return }
        var keep: [(due: UInt64, link: MeshLinkID, frame: [UInt8])] = []
        for item in pending {
            if item.due <= now {
                transport.send(item.frame, on: item.link)
                transmitted += 1
            } else {
                keep.append(item)
            }
        }
        pending = keep
    }
}
