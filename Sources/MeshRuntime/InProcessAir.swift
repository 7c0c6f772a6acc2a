public import Mesh
import BotSupport
import Synchronization

/// An in-process radio segment for tests of code that consumes a ``MeshTransport`` (such as ``MeshNode``):
/// every frame one joined transport sends reaches every other joined transport, unless it exceeds the
/// segment's MTU or is lost (probability `loss`, from a seeded generator). Each transport sees the segment as
/// one link, `MeshLinkID(1)` — the same shape as one virtual-radio hub connection.
///
/// For deterministic, clock-free tests of the engine itself use ``SimulatedMesh`` instead.
public final class InProcessAir: Sendable {
    public struct Stats: Sendable, Equatable {
        public var deliveries = 0
        public var droppedOverMTU = 0
        public var droppedLoss = 0
    }

    private struct State {
        var members: [UInt64: MeshInbound] = [:]
        var nextID: UInt64 = 1
        var random: SeededRandom
        var stats = Stats()
    }

    public let mtu: Int
    public let loss: Double
    private let state: Mutex<State>

    public init(mtu: Int = 512, loss: Double = 0, seed: UInt64 = 1) {
        self.mtu = mtu
        self.loss = loss
        state = Mutex(State(random: SeededRandom(seed: seed)))
    }

    public var stats: Stats { state.withLock { $0.stats } }

    /// A new transport on this segment; its link comes up at once.
    public func join() -> Transport {
        let inbound = MeshInbound()
        inbound.linkUp(Transport.link, mtu: mtu, kind: .shared)
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.members[state.nextID] = inbound
            return state.nextID
        }
        return Transport(air: self, id: id, events: inbound)
    }

    fileprivate func broadcast(_ frame: [UInt8], from sender: UInt64) {
        state.withLock { state in
            guard state.members[sender] != nil else { return }
            guard frame.count <= mtu else {
                state.stats.droppedOverMTU += 1
                return
            }
            for (id, member) in state.members where id != sender {
                if loss > 0, Double.random(in: 0..<1, using: &state.random) < loss {
                    state.stats.droppedLoss += 1
                    continue
                }
                if member.frame(Transport.link, frame) { state.stats.deliveries += 1 }
            }
        }
    }

    fileprivate func leave(_ id: UInt64) {
        let inbound = state.withLock { $0.members.removeValue(forKey: id) }
        inbound?.linkDown(Transport.link)
        inbound?.finish()
    }

    fileprivate func isMember(_ id: UInt64) -> Bool { state.withLock { $0.members[id] != nil } }

    /// One member's view of the segment.
    public final class Transport: MeshTransport, Sendable {
        static let link = MeshLinkID(1)
        private let air: InProcessAir
        private let id: UInt64
        public let events: MeshInbound

        fileprivate init(air: InProcessAir, id: UInt64, events: MeshInbound) {
            self.air = air
            self.id = id
            self.events = events
        }

        public func send(_ frame: [UInt8], on link: MeshLinkID) {
            guard link == Self.link else {
                events.countOutboundDrop(.linkDown, on: link)
                return
            }
            air.broadcast(frame, from: id)
        }

        public var status: MeshTransportStatus {
            let joined = air.isMember(id)
            return MeshTransportStatus(
                isUp: joined, detail: joined ? "joined the in-process segment" : "left the segment",
                linksUp: events.linksUp, counters: events.counters)
        }

        public func close() { air.leave(id) }
    }
}
