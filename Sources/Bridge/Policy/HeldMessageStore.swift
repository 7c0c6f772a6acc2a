public import BotStorage
import BotSupport
public import BridgeCore

/// The hidden messages kept for a release across a restart (issue 23: release both ways, also after a restart), in
/// the bridge database beside the moderation log.
///
/// Decisions where the issue is silent:
/// - **Bounds: 24 hours and 1,000 messages** (``Limits``), whichever comes first — a festival day of moderation, and
///   the same 1,000 the bridge holds in memory (``HeldMessages/Limits/maxHeld``), a few MB. Older and excess rows
///   are deleted as new ones come; what is past them can no longer be released (its moderation-log row stays).
/// - A channel event past the ±900 s window is still kept: a release then says the window refuses it, which is
///   what the operator needs to know, rather than "not held".
/// - Rows are read back through ``HeldMessages/Held/init(json:)``: a channel event is verified again, a damaged row
///   dropped. A released message's row is deleted.
///
/// Schema (component `held_messages`, version 1): `message_id` (primary key), `held_at` (Unix seconds), `body` (JSON).
public final class HeldMessageStore {
    public enum Limits {
        public static let maxAgeSeconds: Double = 24 * 3600
        public static let maxRows = HeldMessages.Limits.maxHeld
    }

    private let insert: SQLiteStatement
    private let delete: SQLiteStatement
    private let prune: SQLiteStatement
    private let load: SQLiteStatement

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS held_messages(message_id TEXT PRIMARY KEY, held_at REAL NOT NULL, body TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS held_messages_at ON held_messages(held_at);
            INSERT OR IGNORE INTO schema_versions VALUES ('held_messages', 1);
            """)
        insert = try database.prepare("INSERT OR IGNORE INTO held_messages(message_id, held_at, body) VALUES (?, ?, ?)")
        delete = try database.prepare("DELETE FROM held_messages WHERE message_id = ?")
        prune = try database.prepare(
            """
            DELETE FROM held_messages WHERE held_at < ?
              OR message_id IN (SELECT message_id FROM held_messages ORDER BY held_at DESC LIMIT -1 OFFSET ?)
            """)
        load = try database.prepare("SELECT body FROM held_messages WHERE held_at >= ? ORDER BY held_at LIMIT ?")
    }

    /// Keeps `item` (held at `at`, Unix seconds), then deletes what is past the bounds.
    public func keep(_ item: HeldMessages.Held, at: Double) throws(SQLiteError) {
        try insert.run([.text(item.id), .real(at), .text(JSONWriter.compact(item.jsonValue))])
        try prune.run([.real(at - Limits.maxAgeSeconds), .integer(Int64(Limits.maxRows))])
    }

    /// A released message is no longer kept.
    public func remove(_ id: String) throws(SQLiteError) { try delete.run([.text(id)]) }

    /// What is kept and still inside the bounds at `now`, oldest first (unreadable rows skipped).
    public func held(now: Double) throws(SQLiteError) -> [HeldMessages.Held] {
        let bodies = try load.query([.real(now - Limits.maxAgeSeconds), .integer(Int64(Limits.maxRows))]) { $0.text(0) }
        return bodies.compactMap { body in (try? JSONParser().parse(body)).flatMap(HeldMessages.Held.init(json:)) }
    }
}
