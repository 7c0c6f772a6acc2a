/// Identifies one link (one BLE connection, one TCP connection to a radio hub, one simulated edge) within a node.
public struct MeshLinkID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "link\(rawValue)" }
    public static func < (lhs: MeshLinkID, rhs: MeshLinkID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What a transport reports to the node that owns it.
public enum MeshTransportEvent: Sendable, Equatable {
    /// A link came up; `mtu` is the largest frame one write may carry (BLE: ATT MTU − 3).
    case linkUp(MeshLinkID, mtu: Int)
    case linkDown(MeshLinkID)
    /// One whole frame (one BLE write or notification's worth) arrived on a link.
    case frame(MeshLinkID, [UInt8])
}

/// A carrier of bitchat frames: BLE (BlueZ), the loopback-TCP virtual radio, or a simulation.
///
/// Contract: one `frame` event = exactly one frame; `send` never splits or joins frames (frames larger
/// than the link's MTU must be fragmented by the caller, MESH-WIRE §6). `events` is a single-consumer
/// stream that finishes when the transport closes.
public protocol MeshTransport: Sendable {
    var events: AsyncStream<MeshTransportEvent> { get }
    /// Queues `frame` on `link`; frames on a link that is gone are dropped and counted by the transport.
    func send(_ frame: [UInt8], on link: MeshLinkID)
    /// Closes every link and finishes `events`.
    func close()
}
