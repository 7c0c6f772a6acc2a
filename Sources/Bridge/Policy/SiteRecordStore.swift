public import BotStorage
import BotSupport
public import BridgeCore
public import Nostr

/// The site's records as this stage knows them (issue 35), in the bridge database: one row per target — the record
/// in force, replaced by a newer one — and whether a relay acknowledged it. At start every row is offered again
/// (verified like a relay's event), and those no relay acknowledged are published again: an action made during a
/// relay outage, or just before a stop, reaches the site when a relay returns.
///
/// Rows are keyed by the record's address (`d` tag: the target's keyed hash, never the target itself), so the file
/// names no blocked key, staff key or word in the clear either. Bound: ``SiteLedger/Limits/maxRecords`` rows (the
/// ledger makes and applies no more).
///
/// Schema (component `site_records`, version 1): `address` (primary key), `created_at`, `acknowledged` (0/1),
/// `event_json` (the signed NIP-01 object).
public final class SiteRecordStore {
    private let upsert: SQLiteStatement
    private let acknowledge: SQLiteStatement
    private let load: SQLiteStatement

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS site_records(address TEXT PRIMARY KEY, event_id BLOB NOT NULL, created_at INTEGER NOT NULL,
                acknowledged INTEGER NOT NULL, event_json TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS site_records_event ON site_records(event_id);
            INSERT OR IGNORE INTO schema_versions VALUES ('site_records', 1);
            """)
        upsert = try database.prepare(
            """
            INSERT INTO site_records(address, event_id, created_at, acknowledged, event_json) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(address) DO UPDATE SET event_id = excluded.event_id, created_at = excluded.created_at,
                acknowledged = excluded.acknowledged, event_json = excluded.event_json
            """)
        acknowledge = try database.prepare("UPDATE site_records SET acknowledged = 1 WHERE event_id = ?")
        load = try database.prepare("SELECT event_json, acknowledged FROM site_records ORDER BY created_at, address")
    }

    /// Keeps `event` as its target's record (the ledger applied it, so it is the newest).
    public func keep(_ event: NostrEvent, acknowledged: Bool) throws(SQLiteError) {
        let address = event.firstTag(SiteRecord.Tag.address).flatMap { $0.count > 1 ? $0[1] : nil } ?? event.id.hex
        try upsert.run([.text(address), .blob(event.id.bytes), .integer(event.createdAt), .integer(acknowledged ? 1 : 0), .text(event.json)])
    }

    public func acknowledged(_ id: EventID) throws(SQLiteError) { try acknowledge.run([.blob(id.bytes)]) }

    /// Every row, oldest first; a row whose event no longer verifies (a damaged file) is skipped.
    public func records() throws(SQLiteError) -> [BridgeMachine.Restored.SiteRecordRow] {
        let rows = try load.query([]) { ($0.text(0), $0.int64(1)) }
        return rows.compactMap { json, acknowledged in
            (try? UnverifiedEvent(json: json).verified()).map { .init(event: $0, acknowledged: acknowledged != 0) }
        }
    }
}
