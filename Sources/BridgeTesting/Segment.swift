import BitchatWire
import BotCrypto
import BotSupport
public import Mesh
public import MeshRuntime
import Synchronization

/// One radio segment of the in-process world: a shared medium, as a `radio-hub` is — every frame one member sends
/// reaches every other member, unless it is larger than the segment's MTU (a BLE write would be refused) or lost
/// (probability `loss`, from a seeded generator, per delivery). A segment can go away and come back
/// (``goDown()``, ``comeBack()``): its members' links go down and up, as when a hub dies and restarts.
public final class Segment: Sendable {
    public struct Stats: Sendable, Equatable {
        public var deliveries = 0
        public var droppedOverMTU = 0
        public var droppedLoss = 0
    }

    private struct Member {
        let inbound: MeshInbound
        let link: MeshLinkID
    }

    private struct State {
        var members: [UInt64: Member] = [:]
        var nextID: UInt64 = 1
        var random: SeededRandom
        var stats = Stats()
        var up = true
    }

    public let mtu: Int
    public let loss: Double
    /// ``MeshLinkKind/shared`` (a radio hub: any number of members), or ``MeshLinkKind/point``: a BLE link, which joins
    /// two devices — the bridge and one phone (a flooder writing to it is the phone's side of that link).
    public let kind: MeshLinkKind
    private let state: Mutex<State>

    public init(mtu: Int = 512, loss: Double = 0, seed: UInt64 = 1, kind: MeshLinkKind = .shared) {
        self.mtu = mtu
        self.loss = loss
        self.kind = kind
        state = Mutex(State(random: SeededRandom(seed: seed)))
    }

    public var stats: Stats { state.withLock { $0.stats } }
    public var isUp: Bool { state.withLock { $0.up } }

    /// A new member whose frames arrive on `inbound` as `link`; its link comes up now (or when the segment does).
    func attach(_ inbound: MeshInbound, link: MeshLinkID) -> UInt64 {
        let (id, up) = state.withLock { state -> (UInt64, Bool) in
            defer { state.nextID += 1 }
            state.members[state.nextID] = Member(inbound: inbound, link: link)
            return (state.nextID, state.up)
        }
        if up { inbound.linkUp(link, mtu: mtu, kind: kind) }
        return id
    }

    func detach(_ id: UInt64) {
        guard let member = state.withLock({ $0.members.removeValue(forKey: id) }) else { return }
        member.inbound.linkDown(member.link)
    }

    /// False when the sender is not a member or the segment is down (the frame went nowhere).
    func send(_ frame: [UInt8], from sender: UInt64) -> Bool {
        state.withLock { state in
            guard state.up, state.members[sender] != nil else { return false }
            Self.deliver(frame, from: sender, to: nil, in: &state, mtu: mtu, loss: loss)
            return true
        }
    }

    private static func deliver(_ frame: [UInt8], from sender: UInt64?, to recipient: UInt64?, in state: inout State, mtu: Int, loss: Double) {
        guard frame.count <= mtu else {
            state.stats.droppedOverMTU += 1
            return
        }
        for (id, member) in state.members where id != sender && (recipient == nil || id == recipient) {
            if loss > 0, Double.random(in: 0..<1, using: &state.random) < loss {
                state.stats.droppedLoss += 1
                continue
            }
            if member.inbound.frame(member.link, frame) { state.stats.deliveries += 1 }
        }
    }

    /// A radio that is no member sends `frames` (a flooder writing raw frames to a hub): each reaches every member,
    /// with the segment's MTU and loss, as a member's frame does — or, with `only`, that node alone (a flooder in
    /// range of the bridge only, as a BLE flooder connects to one device: the phones' engines, which share this
    /// process's cores, are spared work real phones do on their own).
    public func transmit(_ frames: [[UInt8]], only node: SegmentTransport? = nil) {
        let member = node?.member(on: self)
        state.withLock { state in
            guard state.up else { return }
            for frame in frames { Self.deliver(frame, from: nil, to: member, in: &state, mtu: mtu, loss: loss) }
        }
    }

    /// The segment goes away (a hub killed): every member's link goes down; frames go nowhere.
    public func goDown() {
        let members = state.withLock { state -> [Member] in
            state.up = false
            return Array(state.members.values)
        }
        for member in members { member.inbound.linkDown(member.link) }
    }

    /// The segment is back: every member's link comes up again.
    public func comeBack() {
        let members = state.withLock { state -> [Member] in
            state.up = true
            return Array(state.members.values)
        }
        for member in members { member.inbound.linkUp(member.link, mtu: mtu, kind: kind) }
    }
}

/// A node's view of the segments it is on: one link per segment (link 1 for the first), one inbound queue for all —
/// as a bridge with `BRIDGE_MESH=tcp://…,tcp://…` has one hub connection per segment.
public final class SegmentTransport: MeshTransport, Sendable {
    public let events = MeshInbound()
    private let memberships: [(segment: Segment, link: MeshLinkID, member: UInt64)]
    private let closed = Atomic<Bool>(false)

    public init(_ segments: [Segment]) {
        var memberships: [(Segment, MeshLinkID, UInt64)] = []
        for (index, segment) in segments.enumerated() {
            let link = MeshLinkID(UInt64(index + 1))
            memberships.append((segment, link, segment.attach(events, link: link)))
        }
        self.memberships = memberships
    }

    /// This node's member ID on `segment` (nil when it is not on it).
    func member(on segment: Segment) -> UInt64? { memberships.first { $0.segment === segment }?.member }

    /// The transport's links, their MTUs and kinds.
    public var links: [(link: MeshLinkID, mtu: Int, kind: MeshLinkKind)] { memberships.map { ($0.link, $0.segment.mtu, $0.segment.kind) } }

    public func send(_ frame: [UInt8], on link: MeshLinkID) {
        guard let membership = memberships.first(where: { $0.link == link }), membership.segment.send(frame, from: membership.member) else {
            events.countOutboundDrop(.linkDown, on: link)
            return
        }
    }

    public var status: MeshTransportStatus {
        let up = memberships.filter { $0.segment.isUp }.count
        let isUp = !closed.load(ordering: .relaxed) && up == memberships.count
        return MeshTransportStatus(
            isUp: isUp, detail: "\(up) of \(memberships.count) in-process segments up", linksUp: events.linksUp, counters: events.counters)
    }

    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for membership in memberships { membership.segment.detach(membership.member) }
        events.finish()
    }
}

extension Segment {
    /// A flooder's announce: a fresh identity (random Noise key, fresh Ed25519 key), validly signed, TTL 1 as if
    /// relayed by a neighbour, or 7 as if each identity were on the link itself (a claim on the link: issue 33): it
    /// passes every check of MESH-WIRE §4.7.4; only the number of them is hostile.
    public static func floodAnnounce(_ index: Int, at time: UInt64, ttl: UInt8 = 1) throws -> [UInt8] {
        let noise = X25519PrivateKey.generate().publicKey
        let signing = Ed25519PrivateKey.generate()
        let payload = try AnnouncePayload(
            nickname: "flood\(index)", noisePublicKey: noise, signingPublicKey: signing.publicKey.rawRepresentation).encode()
        var packet = try MeshPacket(type: .announce, timestamp: time, sender: MeshPeerID(noisePublicKey: noise), payload: payload)
            .signed(with: signing)
        packet.ttl = ttl
        return try packet.encode()
    }
}
