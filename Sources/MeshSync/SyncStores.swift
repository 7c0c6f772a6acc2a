public import BitchatWire

/// What a sync answer or a request filter is chosen from: the stored packets by kind (``SyncStoreKind/board``
/// means the board's live posts and tombstones). ``SyncStores`` is the value form the bridge core holds;
/// ``StoreReplySource`` adapts the class stores (``GossipPacketStore``, ``BoardPacketStore``).
public protocol SyncReplySource {
    /// The live packets of `kind` for which `wanted(timestamp, h64)` holds, and how many live ones it declined.
    mutating func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int)
    /// The live packets of `kind`, in store order.
    func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket]
}

/// The gossip and board stores as one value (the pure cores, no persistence): every change they make is
/// returned as ``SyncStoreChange``s for the owner to persist (``SQLiteSyncJournal`` in the bridge).
public struct SyncStores: Sendable, SyncReplySource {
    public private(set) var gossip: GossipStoreCore
    public private(set) var board: BoardStoreCore

    public init(gossip: GossipStoreCore = GossipStoreCore(), board: BoardStoreCore = BoardStoreCore()) {
        self.gossip = gossip
        self.board = board
    }

    /// Records a verified announce, message, fragment or file.
    public mutating func record(_ packet: SyncPacket, now: UInt64) -> (outcome: GossipRecordOutcome, changes: [SyncStoreChange]) {
        var changes: [SyncStoreChange] = []
        let outcome = gossip.record(packet, now: now, changes: &changes)
        return (outcome, changes)
    }

    /// Decodes, verifies and ingests a board packet (``BoardStoreCore/ingest(_:now:retainUntilOverride:changes:)``).
    public mutating func ingest(
        _ packet: SyncPacket, now: UInt64, retainUntilOverride: UInt64? = nil
    ) -> (outcome: BoardIngestOutcome, changes: [SyncStoreChange]) {
        var changes: [SyncStoreChange] = []
        let outcome = board.ingest(packet, now: now, retainUntilOverride: retainUntilOverride, changes: &changes)
        return (outcome, changes)
    }

    /// Drops everything past its window.
    public mutating func prune(now: UInt64) -> [SyncStoreChange] {
        var changes: [SyncStoreChange] = []
        gossip.prune(now: now, changes: &changes)
        board.prune(now: now, changes: &changes)
        return changes
    }

    public func livePosts(now: UInt64) -> [BoardPost] { board.livePosts(now: now) }

    public func count(_ kind: SyncStoreKind) -> Int {
        kind == .board ? board.postCount + board.tombstoneCount : gossip.count(kind)
    }

    public mutating func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        kind == .board ? board.selectCandidates(now: now, where: wanted) : gossip.select(kind, now: now, where: wanted)
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] {
        kind == .board ? board.syncCandidates(now: now) : gossip.packets(kind, now: now)
    }
}

/// The class stores as a ``SyncReplySource``.
public struct StoreReplySource: SyncReplySource {
    public let gossip: any GossipPacketStore
    public let board: any BoardPacketStore

    public init(gossip: any GossipPacketStore, board: any BoardPacketStore) {
        self.gossip = gossip
        self.board = board
    }

    public func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        kind == .board ? board.selectCandidates(now: now, where: wanted) : gossip.select(kind, now: now, where: wanted)
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] {
        kind == .board ? board.syncCandidates(now: now) : gossip.packets(kind, now: now)
    }
}
