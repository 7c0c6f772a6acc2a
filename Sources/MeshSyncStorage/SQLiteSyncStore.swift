public import BitchatWire
public import BotStorage
public import MeshSync

/// The sync stores' table in the bridge database (component `sync_packets`, version 1), so that after a
/// `kill -9` the bridge still answers sync with what it held (issue 17).
///
/// Design: the rules live in the pure cores (``GossipStoreCore``, ``BoardStoreCore``, together ``SyncStores``);
/// whoever holds them in memory — the bridge core — persists every change they report here, one transaction
/// per batch (``write(_:)``). At open every row is decoded and re-ingested under today's clock, in arrival
/// order (``restore(now:)``): windows and caps apply again, board posts are re-verified (as iOS does at
/// launch), and rows that no longer qualify or no longer decode are deleted and counted. So the file holds
/// what memory holds: bounded by the cores' caps (≤ 1 000 messages + 600 fragments + 200 files + 1 000
/// announces + 200 posts + 300 tombstones).
///
/// A failed write (disk full) is counted and the owner keeps serving from memory; the next successful write
/// does not repair the lost row, so a restart may forget it — the cost is one resend by a peer.
///
/// Schema: `sync_packets(id BLOB PRIMARY KEY, seq INTEGER UNIQUE, kind TEXT, retain_until INTEGER, frame BLOB)`
/// — `frame` is the unpadded packet as received (``SyncPacket/frame``), `retain_until` (ms) lets a restored
/// tombstone keep the deadline its deleted post gave it.
public final class SQLiteSyncJournal: SyncStoreWriteFailures {
    /// What happened besides ordinary storing.
    public struct Counters: Equatable, Sendable {
        /// Rows restored at open.
        public var restored = 0
        /// Rows dropped at open: past their window, over a cap, or no longer verifying.
        public var expiredAtOpen = 0
        /// Rows whose frame no longer decodes (damaged file): deleted, never served.
        public var unreadable = 0
        /// Writes that failed (the owner kept serving from memory).
        public var writeFailures = 0
        public init() {}
    }

    static let component = "sync_packets"
    static let schemaVersion: Int64 = 1

    private let database: SQLiteDatabase
    private let insert: SQLiteStatement
    private let delete: SQLiteStatement
    private var nextSeq: Int64 = 0
    public private(set) var counters = Counters()
    public private(set) var lastWriteError: SQLiteError?
    public var failedWrites: Int { counters.writeFailures }

    /// Opens (creating) the table in `database`.
    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS sync_packets(
                id BLOB PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, kind TEXT NOT NULL,
                retain_until INTEGER NOT NULL, frame BLOB NOT NULL);
            INSERT OR IGNORE INTO schema_versions VALUES ('sync_packets', 1);
            """)
        insert = try database.prepare(
            "INSERT OR REPLACE INTO sync_packets(id, seq, kind, retain_until, frame) VALUES (?, ?, ?, ?, ?)")
        delete = try database.prepare("DELETE FROM sync_packets WHERE id = ?")
    }

    /// What the table holds as of `now` (ms), re-ingested under the cores' rules; rows that no longer qualify
    /// are deleted.
    public func restore(now: UInt64) throws(SQLiteError) -> SyncStores {
        let rows = try database.prepare("SELECT id, seq, kind, retain_until, frame FROM sync_packets ORDER BY seq")
            .query { ($0.blob(0), $0.int64(1), $0.text(2), $0.int64(3), $0.blob(4)) }
        nextSeq = (rows.last?.1 ?? 0) + 1
        var stores = SyncStores()
        var unreadable: [[UInt8]] = []
        // Announces first: a sender's latest announce is often written after its messages, which are kept only with
        // it (``GossipStoreCore``).
        let ordered = rows.filter { $0.2 == SyncStoreKind.announce.rawValue } + rows.filter { $0.2 != SyncStoreKind.announce.rawValue }
        for (id, _, kindName, retainUntil, frame) in ordered {
            guard let kind = SyncStoreKind(rawValue: kindName), let packet = try? SyncPacket(frame: frame), packet.id == id else {
                unreadable.append(id)
                continue
            }
            if kind == .board {
                _ = stores.ingest(packet, now: now, retainUntilOverride: UInt64(max(0, retainUntil)))
            } else {
                _ = stores.record(packet, now: now)
            }
        }
        // What the cores hold after replay is what stays; everything else goes.
        var keep = Set<[UInt8]>()
        for kind in SyncStoreKind.allCases {
            for packet in stores.packets(kind, now: now) { keep.insert(packet.id) }
        }
        let dropped = rows.map(\.0).filter { !keep.contains($0) }
        counters.unreadable += unreadable.count
        counters.expiredAtOpen += dropped.count - unreadable.count
        counters.restored += keep.count
        guard !dropped.isEmpty else { return stores }
        do {
            try database.transaction {
                for id in dropped { try delete.run([.blob(id)]) }
            }
        } catch let error as SQLiteError {
            throw error
        } catch {
            throw SQLiteError(code: 1, message: "\(error)", operation: "restore \(Self.component)")
        }
        return stores
    }

    /// Writes `changes` in one transaction; a failure is counted, never thrown.
    public func write(_ changes: [SyncStoreChange]) {
        guard !changes.isEmpty else { return }
        do {
            try database.transaction {
                for change in changes {
                    switch change {
                    case .inserted(let packet, let kind, let retainUntil):
                        try insert.run([
                            .blob(packet.id), .integer(nextSeq), .text(kind.rawValue),
                            .integer(Int64(clamping: retainUntil)), .blob(packet.frame),
                        ])
                        nextSeq += 1
                    case .removed(let id):
                        try delete.run([.blob(id)])
                    }
                }
            }
        } catch {
            counters.writeFailures += 1
            lastWriteError = error as? SQLiteError
        }
    }

    /// Rows in the file now (for tests and status).
    public func rowCount() throws(SQLiteError) -> Int {
        Int(try database.prepare("SELECT count(*) FROM sync_packets").query { $0.int64(0) }.first ?? 0)
    }
}

/// The gossip and board stores, durable: ``SyncStores`` in memory (requests are answered from memory), every
/// change written through to a ``SQLiteSyncJournal`` (for tools and tests that want the class stores).
public final class SQLiteSyncStore: GossipPacketStore, BoardPacketStore, SyncStoreWriteFailures {
    public let journal: SQLiteSyncJournal
    private var stores: SyncStores
    public var counters: SQLiteSyncJournal.Counters { journal.counters }
    public var lastWriteError: SQLiteError? { journal.lastWriteError }
    public var failedWrites: Int { journal.failedWrites }

    /// Opens (creating) the table in `database` and restores what it holds as of `now` (ms).
    public init(database: SQLiteDatabase, now: UInt64) throws(SQLiteError) {
        journal = try SQLiteSyncJournal(database: database)
        stores = try journal.restore(now: now)
    }

    // MARK: GossipPacketStore

    @discardableResult
    public func record(_ packet: SyncPacket, now: UInt64) -> GossipRecordOutcome {
        let (outcome, changes) = stores.record(packet, now: now)
        journal.write(changes)
        return outcome
    }

    public func packets(_ kind: SyncStoreKind, now: UInt64) -> [SyncPacket] { stores.packets(kind, now: now) }

    public func prune(now: UInt64) { journal.write(stores.prune(now: now)) }

    public func count(_ kind: SyncStoreKind) -> Int { stores.count(kind) }

    /// Rows in the file now (for tests and status).
    public func rowCount() throws(SQLiteError) -> Int { try journal.rowCount() }

    // MARK: BoardPacketStore

    @discardableResult
    public func ingest(_ packet: SyncPacket, now: UInt64) -> BoardIngestOutcome {
        let (outcome, changes) = stores.ingest(packet, now: now)
        journal.write(changes)
        return outcome
    }

    public func syncCandidates(now: UInt64) -> [SyncPacket] { stores.packets(.board, now: now) }
    public func livePosts(now: UInt64) -> [BoardPost] { stores.livePosts(now: now) }

    public func selectCandidates(now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        stores.select(.board, now: now, where: wanted)
    }

    public func select(_ kind: SyncStoreKind, now: UInt64, where wanted: (UInt64, UInt64) -> Bool) -> (selected: [SyncPacket], declined: Int) {
        stores.select(kind, now: now, where: wanted)
    }
}

/// postID → the Nostr event id of the bridge's kind-1 copy of a board post (BOARD.md §11 "Ours": persist the
/// map, so a tombstone that arrives after a restart still deletes the copy with a NIP-09 kind 5). Component
/// `board_nostr_ledger`, version 1. Rows live until the post's expiry (after it the relay's NIP-40 handling
/// has removed the copy anyway); bounded by ``Limits/maxRows``, the soonest-expiring dropped first.
public final class BoardNostrLedger {
    public enum Limits {
        /// Live posts the board holds (200) plus as many again for copies of posts since evicted locally
        /// whose tombstone may still come.
        public static let maxRows = 400
    }

    private let database: SQLiteDatabase
    private let upsert: SQLiteStatement
    private let lookup: SQLiteStatement
    private let remove: SQLiteStatement

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS board_nostr_ledger(
                post_id BLOB PRIMARY KEY, event_id BLOB NOT NULL, expires_at INTEGER NOT NULL);
            INSERT OR IGNORE INTO schema_versions VALUES ('board_nostr_ledger', 1);
            """)
        upsert = try database.prepare("INSERT OR REPLACE INTO board_nostr_ledger(post_id, event_id, expires_at) VALUES (?, ?, ?)")
        lookup = try database.prepare("SELECT event_id FROM board_nostr_ledger WHERE post_id = ? AND expires_at > ?")
        remove = try database.prepare("DELETE FROM board_nostr_ledger WHERE post_id = ?")
    }

    /// Records that `postID`'s copy was published as `eventID` (32 bytes); `expiresAt` is the post's (ms).
    public func record(postID: [UInt8], eventID: [UInt8], expiresAt: UInt64, now: UInt64) throws(SQLiteError) {
        try database.prepare("DELETE FROM board_nostr_ledger WHERE expires_at <= ?").run([.integer(Int64(clamping: now))])
        try upsert.run([.blob(postID), .blob(eventID), .integer(Int64(clamping: expiresAt))])
        try database.prepare(
            """
            DELETE FROM board_nostr_ledger WHERE post_id IN (
                SELECT post_id FROM board_nostr_ledger ORDER BY expires_at DESC LIMIT -1 OFFSET ?)
            """
        ).run([.integer(Int64(Limits.maxRows))])
    }

    /// The copy's event id, if one was published and the post has not expired.
    public func eventID(forPost postID: [UInt8], now: UInt64) throws(SQLiteError) -> [UInt8]? {
        try lookup.query([.blob(postID), .integer(Int64(clamping: now))]) { $0.blob(0) }.first
    }

    /// Forgets `postID` (after its kind 5 was sent). Returns whether a row was removed.
    @discardableResult
    public func forget(postID: [UInt8]) throws(SQLiteError) -> Bool {
        try remove.run([.blob(postID)])
        return database.changes > 0
    }

    public func count() throws(SQLiteError) -> Int {
        Int(try database.prepare("SELECT count(*) FROM board_nostr_ledger").query { $0.int64(0) }.first ?? 0)
    }

    /// Every row whose post has not expired at `now` (ms): what the bridge core holds in memory at start.
    public func all(now: UInt64) throws(SQLiteError) -> [(postID: [UInt8], eventID: [UInt8], expiresAt: UInt64)] {
        try database.prepare("SELECT post_id, event_id, expires_at FROM board_nostr_ledger WHERE expires_at > ?")
            .query([.integer(Int64(clamping: now))]) { ($0.blob(0), $0.blob(1), UInt64(max(0, $0.int64(2)))) }
    }
}
