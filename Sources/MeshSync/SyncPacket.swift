public import BitchatWire
public import BotSupport
import BotCrypto

/// A packet held for gossip sync: the decoded packet, its gossip ID (MESH-WIRE §8.2), the ID's GCS hash
/// (computed once, so answering a request never hashes) and the unpadded frame it is re-served as.
///
/// The frame is the packet as received, re-encoded unpadded with the sender's own DEFLATE body (so the
/// signature still verifies and the packet ID — over the *decoded* payload — is unchanged); a reply is that
/// frame with TTL 0 and RSR set (``MeshPacket/syncReplyFrame(_:)``), nothing else touched (BOARD.md §0.4).
public final class SyncPacket: Sendable, Equatable {
    public let packet: MeshPacket
    /// SHA-256(type ‖ sender ‖ timestamp ‖ payload)[0..16].
    public let id: [UInt8]
    /// ``GCSFilter/h64(_:)`` of ``id``.
    public let h64: UInt64
    /// Unpadded, TTL and flags as received.
    public let frame: [UInt8]

    public init(_ packet: MeshPacket) throws(WireError) {
        self.packet = packet
        self.id = MeshMessageIdentity.packetID(packet)
        self.h64 = GCSFilter.h64(id)
        self.frame = try packet.encode(padding: false, compression: .standard)
    }

    /// From a stored frame (the durable stores keep frames).
    public convenience init(frame: [UInt8]) throws(WireError) {
        try self.init(MeshPacket.decode(frame))
    }

    /// Same ID and same frame (an immutable reference type: replies share one copy of each stored packet).
    public static func == (lhs: SyncPacket, rhs: SyncPacket) -> Bool { lhs === rhs || (lhs.id == rhs.id && lhs.frame == rhs.frame) }

    public var type: MessageType { packet.type }
    public var sender: MeshPeerID { packet.sender }
    public var timestamp: UInt64 { packet.timestamp }

    /// The frame as a sync reply: TTL 0, RSR set.
    public var replyFrame: [UInt8] { MeshPacket.syncReplyFrame(frame) ?? frame }
}

/// The gossip stores' kinds (BOARD.md §9.4: what iOS stores per type; group messages and prekey bundles are
/// not stored by the bridge, so requests for them get the legal empty answer).
public enum SyncStoreKind: String, CounterKey, CaseIterable {
    case announce
    case message
    case fragment
    case fileTransfer = "file_transfer"
    case board

    /// The store a packet type goes to, if any.
    public init?(type: MessageType) {
        switch type {
        case .announce: self = .announce
        case .message: self = .message
        case .fragment: self = .fragment
        case .fileTransfer: self = .fileTransfer
        case .boardPost: self = .board
        default: return nil
        }
    }

    /// The sync-type bit of this kind.
    public var syncType: SyncTypes {
        switch self {
        case .announce: .announce
        case .message: .message
        case .fragment: .fragment
        case .fileTransfer: .fileTransfer
        case .board: .board
        }
    }
}

/// A change a store made, for a durable implementation to write (the in-memory stores ignore them).
public enum SyncStoreChange: Sendable, Equatable {
    /// Keep `packet` until `retainUntil` (ms; for board tombstones the deadline cannot be recomputed later).
    case inserted(SyncPacket, kind: SyncStoreKind, retainUntil: UInt64)
    /// Forget the packet with this ID (evicted, expired, deleted or replaced).
    case removed(id: [UInt8])
}

/// A durable sync store that can fail to write (disk full) while it keeps serving from memory: the owner
/// reports the count with its other store failures.
public protocol SyncStoreWriteFailures: AnyObject {
    /// Writes that failed since the store was opened.
    var failedWrites: Int { get }
}
