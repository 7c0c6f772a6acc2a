import BotSupport
import BitchatWire

/// An in-process mesh of N ``MeshPeerEngine`` nodes on a virtual clock: a deterministic discrete-event
/// simulation for tests. Edges have an MTU (larger frames are dropped, as BLE would refuse them), a loss
/// probability and a latency. Node `i`'s link for edge `e` is `MeshLinkID(e)`.
public struct SimulatedMesh {
    public struct Edge: Sendable {
        public let a: Int
        public let b: Int
        public let mtu: Int
        public let loss: Double
        public let latencyMs: UInt64
    }

    /// Something that happened at a node, with the virtual time.
    public struct Observation: Sendable {
        public let node: Int
        public let time: UInt64
        public let action: MeshAction
    }

    public private(set) var nodes: [MeshPeerEngine]
    public private(set) var edges: [Edge] = []
    public private(set) var now: UInt64
    public private(set) var observations: [Observation] = []
    public private(set) var framesDelivered = 0
    public private(set) var framesLost = 0
    public private(set) var framesOverMTU = 0
    /// Every frame put on the air, per edge, for assertions (kept only when `recordFrames`).
    public private(set) var airLog: [(edge: Int, from: Int, frame: [UInt8])] = []
    public var recordFrames = false

    private var random: SeededRandom
    private var queue = MinHeap<Timed<Delivery>>()
    private var sequence: UInt64 = 0
    private var nextTick: UInt64

    public init(identities: [MeshIdentity], startTime: UInt64, seed: UInt64, configuration: MeshPeerEngine.Configuration = .init()) {
        nodes = identities.map { MeshPeerEngine(identity: $0, configuration: configuration) }
        now = startTime
        nextTick = startTime + 1_000
        random = SeededRandom(seed: seed)
    }

    /// Adds an edge and brings its link up on both nodes (each announces on it).
    @discardableResult
    public mutating func connect(_ a: Int, _ b: Int, mtu: Int = 512, loss: Double = 0, latencyMs: UInt64 = 5) -> Int {
        edges.append(Edge(a: a, b: b, mtu: mtu, loss: loss, latencyMs: latencyMs))
        let edge = edges.count - 1
        apply(.linkUp(MeshLinkID(UInt64(edge)), mtu: mtu), at: a)
        apply(.linkUp(MeshLinkID(UInt64(edge)), mtu: mtu), at: b)
        return edge
    }

    /// Feeds an input to a node now.
    public mutating func apply(_ input: MeshInput, at node: Int) {
        let actions = nodes[node].handle(input, now: now, random: &random)
        for action in actions { perform(action, at: node) }
    }

    /// Runs the simulation for `durationMs` of virtual time (ticking every node once per second).
    public mutating func run(for durationMs: UInt64) {
        let end = now + durationMs
        while true {
            let nextEvent = queue.first?.due ?? .max
            let next = min(nextEvent, nextTick)
            guard next <= end else { break }
            now = next
            if next == nextTick {
                nextTick += 1_000
                for node in nodes.indices { apply(.tick, at: node) }
                continue
            }
            guard let event = queue.pop()?.item else { break }
            apply(.frame(MeshLinkID(UInt64(event.edge)), event.frame), at: event.to)
        }
        now = end
    }

    public func actions(at node: Int) -> [MeshAction] {
        observations.filter { $0.node == node }.map(\.action)
    }

    public func publicMessages(at node: Int) -> [MeshPublicMessage] {
        actions(at: node).compactMap {
            if case .publicMessage(let message) = $0 { return message }
            return nil
        }
    }

    private mutating func perform(_ action: MeshAction, at node: Int) {
        guard case .transmit(let link, let frame, let delay) = action else {
            observations.append(Observation(node: node, time: now, action: action))
            return
        }
        let edgeIndex = Int(link.rawValue)
        guard edges.indices.contains(edgeIndex) else { return }
        let edge = edges[edgeIndex]
        if recordFrames { airLog.append((edgeIndex, node, frame)) }
        guard frame.count <= edge.mtu else {
            framesOverMTU += 1
            return
        }
        if edge.loss > 0, Double.random(in: 0..<1, using: &random) < edge.loss {
            framesLost += 1
            return
        }
        framesDelivered += 1
        let to = edge.a == node ? edge.b : edge.a
        sequence += 1
        queue.push(Timed(due: now + delay + edge.latencyMs, sequence: sequence, item: Delivery(to: to, edge: edgeIndex, frame: frame)))
    }
}

/// A pending delivery.
struct Delivery {
    let to: Int
    let edge: Int
    let frame: [UInt8]
}
