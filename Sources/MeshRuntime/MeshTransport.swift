public import Mesh
public import BotSupport
/// What a transport reports to the node that owns it.
public enum MeshTransportEvent: Sendable, Equatable {
    /// A link came up; `mtu` is the largest frame one write may carry (BLE: ATT MTU − 3); `kind` says whether it joins
    /// two devices (BLE) or is a shared medium (a radio hub's segment).
    case linkUp(MeshLinkID, mtu: Int, kind: MeshLinkKind = .point)
    case linkDown(MeshLinkID)
    /// One whole frame (one BLE write or notification's worth) arrived on a link.
    case frame(MeshLinkID, [UInt8])
}

/// A carrier of bitchat frames: BLE (BlueZ), the loopback-TCP virtual radio, or a simulation.
///
/// Contract: one `frame` event = exactly one frame; `send` never splits or joins frames (frames larger
/// than the link's MTU must be fragmented by the caller, MESH-WIRE §6). `events` is a single-consumer
/// sequence with a budget per link (``MeshInbound``); it finishes only when the transport is closed (or
/// can never work again, e.g. the D-Bus connection is gone). A lost radio-hub connection or a restarted
/// bluetoothd is reported as links going down and ``status`` going down, not by finishing.
public protocol MeshTransport: Sendable {
    var events: MeshInbound { get }
    /// Queues `frame` on `link`; frames on a link that is gone are dropped and counted by the transport.
    func send(_ frame: [UInt8], on link: MeshLinkID)
    /// Closes every link and finishes `events`.
    func close()
    /// The transport's own state, safe to read from any thread at any time (health checks poll it).
    var status: MeshTransportStatus { get }
}

/// A transport's health as it sees it.
public struct MeshTransportStatus: Sendable, Equatable {
    /// True when the transport can carry frames: every radio-hub connection is up; BlueZ is running, our
    /// adapter is powered and our GATT application and advertisement are registered.
    public var isUp: Bool
    /// One line for operators (`/healthz` prints it), e.g. "1 of 2 hub connections up; link2 127.0.0.1:7001:
    /// connection refused, retrying".
    public var detail: String
    /// Links up now.
    public var linksUp: Int
    public var counters: MeshTransportCounters

    public init(isUp: Bool, detail: String, linksUp: Int = 0, counters: MeshTransportCounters = MeshTransportCounters()) {
        self.isUp = isUp
        self.detail = detail
        self.linksUp = linksUp
        self.counters = counters
    }
}

/// Why an inbound frame was not handed to the node.
public enum MeshInboundDrop: String, CounterKey, CaseIterable {
    /// The link's queue was at its budget (``MeshInbound/Limits``): the consumer fell behind this link.
    case queueFull = "queue_full"
    /// BLE link gate (MESH-WIRE §4.7): before the link's first valid announce only announces cross.
    case beforeAnnounce = "before_announce"
    /// Not a bitchat frame (BLE link gate).
    case malformed
    /// An announce that fails its checks (BLE link gate).
    case invalidAnnounce = "invalid_announce"
    /// A frame for a link the transport no longer knows.
    case unknownLink = "unknown_link"
}

/// Why an outbound frame was not written.
public enum MeshOutboundDrop: String, CounterKey, CaseIterable {
    /// The link is down (a hub connection being re-established, a BLE link gone).
    case linkDown = "link_down"
    /// The link's write queue was at its bound.
    case queueFull = "queue_full"
    /// The frame is larger than the link can carry (virtual-radio framing: 65 535; BLE: the link's MTU).
    case tooLarge = "too_large"
    /// BLE: held for a link that has not announced yet, and that queue was full.
    case heldFull = "held_full"
}

/// Counters of one link.
public struct MeshLinkCounters: Sendable, Equatable {
    /// Frames accepted into the link's queue, and their bytes.
    public var framesIn = 0
    public var bytesIn = 0
    public var inboundDrops = Tally<MeshInboundDrop>()
    public var outboundDrops = Tally<MeshOutboundDrop>()

    public init() {}
}

/// Counters of a transport: totals by reason over its whole life, and each live link's own.
public struct MeshTransportCounters: Sendable, Equatable {
    public var framesIn = 0
    public var inboundDrops = Tally<MeshInboundDrop>()
    public var outboundDrops = Tally<MeshOutboundDrop>()
    /// Links up now, by ID (a link's counters go when it goes down; the totals keep them).
    public var links: [MeshLinkID: MeshLinkCounters] = [:]
    /// Connections re-established after a loss (virtual radio) or registrations redone (BlueZ).
    public var reconnects = 0

    public init() {}
}
