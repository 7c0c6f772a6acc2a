public import BotStorage
public import BridgeCore

/// Durable memory of the event ids the bridge published or broadcast (and, at a graceful stop, what its island
/// had: ``RememberedRole``), so that after a restart (even a `kill -9`) relay backfill is not forwarded again. One row per id; bounded by count (oldest pruned).
///
/// Ids are recorded *before* the event is sent: a crash between the write and the send loses that one
/// forward (phones would have deduplicated a repeat anyway), but never forwards twice.
public final class RecentEventStore {
    public typealias Role = RememberedRole

    public enum Limits {
        /// Rows kept: well above what relays backfill (≤ 200 per subscription, 1 h / 15 min look-back), for the
        /// four roles together (the loop guard keeps 3 × 512 ids and 1337 radio copies).
        public static let maxRows = 8192
    }

    static let component = "recent_events"
    static let schemaVersion: Int64 = 1

    private let database: SQLiteDatabase
    private let insert: SQLiteStatement
    private let prune: SQLiteStatement
    private var insertsSincePrune = 0

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS recent_events(
                event_id BLOB NOT NULL, role INTEGER NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT,
                UNIQUE(event_id, role));
            INSERT OR IGNORE INTO schema_versions VALUES ('recent_events', 1);
            """)
        insert = try database.prepare("INSERT OR IGNORE INTO recent_events(event_id, role) VALUES (?, ?)")
        prune = try database.prepare(
            "DELETE FROM recent_events WHERE seq <= (SELECT max(seq) FROM recent_events) - ?")
    }

    /// Records `id` under `role`; durable across a process crash when this returns.
    public func record(_ id: [UInt8], as role: Role) throws(SQLiteError) {
        try insert.run([.blob(id), .integer(role.rawValue)])
        insertsSincePrune += 1
        if insertsSincePrune >= 256 {
            insertsSincePrune = 0
            try prune.run([.integer(Int64(Limits.maxRows))])
        }
    }

    /// Records `ids` under `role` in one transaction (a graceful stop's batch).
    public func record(_ ids: [[UInt8]], as role: Role) throws(SQLiteError) {
        guard !ids.isEmpty else { return }
        do {
            try database.transaction {
                for id in ids { try insert.run([.blob(id), .integer(role.rawValue)]) }
            }
        } catch let error as SQLiteError {
            throw error
        } catch {
            throw SQLiteError(code: 1, message: "\(error)", operation: "record \(Self.component)")
        }
        try prune.run([.integer(Int64(Limits.maxRows))])
    }

    /// Every remembered id of `role`, oldest first (to seed the loop guard at start-up).
    public func load(_ role: Role, limit: Int) throws(SQLiteError) -> [[UInt8]] {
        let rows = try database.prepare("SELECT event_id FROM recent_events WHERE role = ? ORDER BY seq DESC LIMIT ?")
            .query([.integer(role.rawValue), .integer(Int64(limit))]) { $0.blob(0) }
        return rows.reversed()
    }
}
