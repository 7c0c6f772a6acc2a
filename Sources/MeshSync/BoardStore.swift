public import BitchatWire
public import BotSupport

/// Board posts and tombstones (BOARD.md §5, §6): what the bridge carries, serves in board sync and shows.
public protocol BoardPacketStore: AnyObject {
    /// Decodes, verifies (the inner signature under the inner key, §4) and ingests a 0x23 packet.
    @discardableResult
    func ingest(_ packet: SyncPacket, now: UInt64) -> BoardIngestOutcome
    /// Live posts and live tombstones, as held (BOARD.md §8: no freshness window; they sync until their own
    /// expiry or retention).
    func syncCandidates(now: UInt64) -> [SyncPacket]
    /// Live posts, newest `createdAt` first.
    func livePosts(now: UInt64) -> [BoardPost]
    /// The live candidates for which `wanted(timestamp, h64)` holds, in ``syncCandidates(now:)`` order, and how
    /// many live ones it declined (the responder's fast path, as ``GossipPacketStore/select(_:now:where:)``).
    func selectCandidates(now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int)
}

/// What ingesting a board packet did (iOS `BoardIngestResult` with the rejection reasons named).
public enum BoardIngestOutcome: Equatable, Sendable {
    /// A new post or tombstone (also when the post itself lost the eviction race: it stays valid mesh-wide).
    /// `deletedPost` is the post a tombstone removed.
    case accepted(deletedPost: BoardPost?)
    /// Same postID already held (a post), or a tombstone for that postID already held.
    case duplicate
    case rejected(BoardRejection)

    public var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }
}

/// Why a board packet was not taken (BOARD.md §3–§6). Counted; such packets are never relayed (§7).
public enum BoardRejection: String, CounterKey, CaseIterable, Sendable {
    /// The payload does not decode (`BoardPayload.decode` threw).
    case undecodable
    /// The inner signature does not verify under the inner key.
    case badSignature = "bad_signature"
    /// `expiresAt ≤ now`.
    case expired
    /// `createdAt > now + 1 h`.
    case createdInFuture = "created_in_future"
    /// `expiresAt > now + 7 d + 1 h`.
    case expiresTooLate = "expires_too_late"
    /// A tombstone with this postID and author key is held.
    case deleted
    /// A tombstone whose key is not the held post's author key (only the author deletes, §5).
    case notAuthor = "not_author"
    /// A tombstone whose retention is already over.
    case tombstoneExpired = "tombstone_expired"
}

/// The board's rules as a value (iOS `BoardStore`, BOARD.md §5–§6), reporting changes for persistence.
public struct BoardStoreCore: Sendable {
    public enum Limits {
        /// Live posts in total; the oldest `createdAt` evicted first (iOS `maxPosts`).
        public static let maxPosts = 200
        /// Live posts per author key, evicted first (iOS `maxPostsPerAuthor`).
        public static let maxPostsPerAuthor = 5
        /// Tombstones for posts never seen: their volume is sender-controlled (iOS caps).
        public static let maxOrphanTombstones = 100
        public static let maxOrphanTombstonesPerAuthor = 5
        /// Ours: tombstones that deleted a held post. iOS does not cap them, but an author can post and delete
        /// in a loop; one per live-post slot keeps the table bounded (oldest received evicted first).
        public static let maxAppliedTombstones = 200
        /// Clock skew allowed on received times (iOS `clockSkewMs`).
        public static let clockSkewMs: UInt64 = 3_600_000
        /// An orphan tombstone's retention (the longest a post can live).
        public static let orphanLifetimeMs = BoardPayload.Limits.maxLifetimeMs
    }

    struct HeldPost: Sendable {
        let post: BoardPost
        let packet: SyncPacket
    }

    struct HeldTombstone: Sendable {
        let tombstone: BoardTombstone
        let packet: SyncPacket
        let retainUntil: UInt64
        let isOrphan: Bool
    }

    private(set) var posts: [HeldPost] = [] { didSet { index = nil } }
    private(set) var tombstones: [HeldTombstone] = [] { didSet { index = nil } }
    /// Columns of the sync candidates (posts then tombstones), rebuilt after a change: reads far outnumber writes.
    private var index: CandidateIndex?

    struct CandidateIndex: Sendable {
        var packets: [SyncPacket] = []
        var stamps: [UInt64] = []
        var hashes: [UInt64] = []
        var liveUntil: [UInt64] = []
    }

    public init() {}

    public var postCount: Int { posts.count }
    public var tombstoneCount: Int { tombstones.count }

    /// Ingests `packet` (type 0x23). `retainUntilOverride` is a durable store's restore of a tombstone whose
    /// post is gone (iOS restores the recorded deadline, capped like any other).
    public mutating func ingest(
        _ packet: SyncPacket, now: UInt64, retainUntilOverride: UInt64? = nil, changes: inout [SyncStoreChange]
    ) -> BoardIngestOutcome {
        guard let payload = try? BoardPayload.decode(packet.packet.payload) else { return .rejected(.undecodable) }
        guard payload.isSignatureValid else { return .rejected(.badSignature) }
        prune(now: now, changes: &changes)
        switch payload {
        case .post(let post): return ingestPost(post, packet, now: now, changes: &changes)
        case .tombstone(let tombstone):
            return ingestTombstone(tombstone, packet, now: now, retainUntilOverride: retainUntilOverride, changes: &changes)
        }
    }

    private mutating func ingestPost(_ post: BoardPost, _ packet: SyncPacket, now: UInt64, changes: inout [SyncStoreChange]) -> BoardIngestOutcome {
        guard post.expiresAt > now else { return .rejected(.expired) }
        guard post.createdAt <= now &+ Limits.clockSkewMs else { return .rejected(.createdInFuture) }
        guard post.expiresAt <= now &+ BoardPayload.Limits.maxLifetimeMs &+ Limits.clockSkewMs else { return .rejected(.expiresTooLate) }
        if tombstones.contains(where: { $0.tombstone.postID == post.postID && $0.tombstone.authorKey == post.authorKey }) {
            return .rejected(.deleted)
        }
        guard !posts.contains(where: { $0.post.postID == post.postID }) else { return .duplicate }
        posts.append(HeldPost(post: post, packet: packet))
        changes.append(.inserted(packet, kind: .board, retainUntil: post.expiresAt))
        let byAuthor = posts.filter { $0.post.authorKey == post.authorKey }
        if byAuthor.count > Limits.maxPostsPerAuthor { evictOldest(byAuthor, keep: Limits.maxPostsPerAuthor, changes: &changes) }
        if posts.count > Limits.maxPosts { evictOldest(posts, keep: Limits.maxPosts, changes: &changes) }
        return .accepted(deletedPost: nil)
    }

    private mutating func ingestTombstone(
        _ tombstone: BoardTombstone, _ packet: SyncPacket, now: UInt64, retainUntilOverride: UInt64?,
        changes: inout [SyncStoreChange]
    ) -> BoardIngestOutcome {
        // iOS compares the postID only (BOARD.md §14.1).
        guard !tombstones.contains(where: { $0.tombstone.postID == tombstone.postID }) else { return .duplicate }
        let maxRetain = min(tombstone.deletedAt &+ Limits.orphanLifetimeMs, now &+ Limits.orphanLifetimeMs &+ Limits.clockSkewMs)
        let retainUntil: UInt64
        let isOrphan: Bool
        var deleted: BoardPost?
        if let index = posts.firstIndex(where: { $0.post.postID == tombstone.postID }) {
            let target = posts[index]
            guard target.post.authorKey == tombstone.authorKey else { return .rejected(.notAuthor) }
            retainUntil = target.post.expiresAt
            isOrphan = false
            // iOS removes the post before the retention check below; a post whose expiry is ≤ now was pruned.
            posts.remove(at: index)
            changes.append(.removed(id: target.packet.id))
            deleted = target.post
        } else if let retainUntilOverride {
            retainUntil = min(retainUntilOverride, maxRetain)
            isOrphan = false
        } else {
            retainUntil = maxRetain
            isOrphan = true
        }
        guard retainUntil > now else { return .rejected(.tombstoneExpired) }
        tombstones.append(HeldTombstone(tombstone: tombstone, packet: packet, retainUntil: retainUntil, isOrphan: isOrphan))
        changes.append(.inserted(packet, kind: .board, retainUntil: retainUntil))
        if isOrphan {
            let byAuthor = tombstones.filter { $0.isOrphan && $0.tombstone.authorKey == tombstone.authorKey }
            removeTombstones(byAuthor.prefix(max(0, byAuthor.count - Limits.maxOrphanTombstonesPerAuthor)), changes: &changes)
            let orphans = tombstones.filter(\.isOrphan)
            removeTombstones(orphans.prefix(max(0, orphans.count - Limits.maxOrphanTombstones)), changes: &changes)
        } else {
            let applied = tombstones.filter { !$0.isOrphan }
            removeTombstones(applied.prefix(max(0, applied.count - Limits.maxAppliedTombstones)), changes: &changes)
        }
        return .accepted(deletedPost: deleted)
    }

    private mutating func evictOldest(_ candidates: [HeldPost], keep: Int, changes: inout [SyncStoreChange]) {
        let victims = candidates.sorted { $0.post.createdAt < $1.post.createdAt }.prefix(max(0, candidates.count - keep))
        let ids = Set(victims.map(\.post.postID))
        posts.removeAll { ids.contains($0.post.postID) }
        for victim in victims { changes.append(.removed(id: victim.packet.id)) }
    }

    private mutating func removeTombstones(_ victims: ArraySlice<HeldTombstone>, changes: inout [SyncStoreChange]) {
        guard !victims.isEmpty else { return }
        let ids = Set(victims.map(\.tombstone.postID))
        tombstones.removeAll { ids.contains($0.tombstone.postID) }
        for victim in victims { changes.append(.removed(id: victim.packet.id)) }
    }

    /// Drops posts with `expiresAt ≤ now` and tombstones with `retainUntil ≤ now` (done on every ingest and read).
    public mutating func prune(now: UInt64, changes: inout [SyncStoreChange]) {
        for held in posts where held.post.expiresAt <= now { changes.append(.removed(id: held.packet.id)) }
        posts.removeAll { $0.post.expiresAt <= now }
        for held in tombstones where held.retainUntil <= now { changes.append(.removed(id: held.packet.id)) }
        tombstones.removeAll { $0.retainUntil <= now }
    }

    /// Posts then tombstones, as iOS `syncCandidates()`, live at `now`.
    public func syncCandidates(now: UInt64) -> [SyncPacket] {
        posts.filter { $0.post.expiresAt > now }.map(\.packet) + tombstones.filter { $0.retainUntil > now }.map(\.packet)
    }

    /// See ``BoardPacketStore/selectCandidates(now:where:)``.
    public mutating func selectCandidates(now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        if index == nil {
            var built = CandidateIndex()
            for held in posts {
                built.packets.append(held.packet)
                built.liveUntil.append(held.post.expiresAt)
            }
            for held in tombstones {
                built.packets.append(held.packet)
                built.liveUntil.append(held.retainUntil)
            }
            built.stamps = built.packets.map(\.timestamp)
            built.hashes = built.packets.map(\.h64)
            index = built
        }
        guard let index else { return ([], 0) }
        var selected: [SyncPacket] = []
        var declined = 0
        for i in 0..<index.stamps.count where index.liveUntil[i] > now {
            if wanted(index.stamps[i], index.hashes[i]) { selected.append(index.packets[i]) } else { declined += 1 }
        }
        return (selected, declined)
    }

    public func livePosts(now: UInt64) -> [BoardPost] {
        posts.filter { $0.post.expiresAt > now }.map(\.post).sorted { $0.createdAt > $1.createdAt }
    }
}

/// The in-memory board store: ``BoardStoreCore`` and nothing else.
public final class MemoryBoardStore: BoardPacketStore {
    private var core = BoardStoreCore()
    public init() {}

    @discardableResult
    public func ingest(_ packet: SyncPacket, now: UInt64) -> BoardIngestOutcome {
        var changes: [SyncStoreChange] = []
        return core.ingest(packet, now: now, changes: &changes)
    }

    public func syncCandidates(now: UInt64) -> [SyncPacket] { core.syncCandidates(now: now) }
    public func livePosts(now: UInt64) -> [BoardPost] { core.livePosts(now: now) }
    public func selectCandidates(now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        core.selectCandidates(now: now, where: wanted)
    }
    public var postCount: Int { core.postCount }
    public var tombstoneCount: Int { core.tombstoneCount }
}

/// A board packet's outcome as a counter key (`accepted`, `duplicate`, `rejected.<reason>`).
public enum SyncBoardOutcome: CounterKey {
    case accepted
    case duplicate
    case rejected(BoardRejection)
    /// Hidden by the owner's judgement (block list, spam filter) before the store saw it.
    case hidden

    public var label: String {
        switch self {
        case .accepted: "accepted"
        case .duplicate: "duplicate"
        case .hidden: "hidden"
        case .rejected(let reason): "rejected." + reason.rawValue
        }
    }
}
