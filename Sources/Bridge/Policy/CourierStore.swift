import BitchatWire
public import BotStorage
public import Courier

/// The courier gateway's durable state in the bridge database (mode 0600): the envelopes phones deposited, the drops
/// waiting for their peer, and the event ids of drops already taken — so a restart, a `kill -9` or a relay sending its
/// backlog again delivers nothing twice and loses no deposit (COURIER.md §3.5, §4.2).
///
/// Rows hold sealed bytes and peer IDs, never plaintext; nothing here is logged. Bounds: the gateway's own (its
/// ``CourierGateway/Configuration`` quotas; the machine removes what it hands over, evicts or sees expire), and at load
/// what expired is left out and deleted.
///
/// Schema (component `courier`, version 1): `courier_held(id, depositor, deposited_ms, published_ms, envelope)`,
/// `courier_pending(event_id, peer, expiry_ms, envelope)`, `courier_seen(event_id, at_ms)`.
public final class CourierStore {
    private let database: SQLiteDatabase
    private let putHeld, deleteHeld, putPending, deletePending, putSeen, expireSeen, trimSeen: SQLiteStatement
    /// Seen ids written since the table was last cut to its capacity: the cut walks the newest `seenCapacity` rows
    /// of the index, so it runs once per ``trimEvery`` writes (the table holds at most that many rows more).
    private var seenSinceTrim = 0
    public static let trimEvery = 500

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS courier_held(
              id TEXT PRIMARY KEY, depositor INTEGER NOT NULL, deposited_ms INTEGER NOT NULL, published_ms INTEGER,
              envelope BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS courier_pending(
              event_id TEXT PRIMARY KEY, peer INTEGER NOT NULL, expiry_ms INTEGER NOT NULL, envelope BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS courier_seen(event_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL);
            CREATE INDEX IF NOT EXISTS courier_seen_at ON courier_seen(at_ms);
            INSERT OR IGNORE INTO schema_versions VALUES ('courier', 1);
            """)
        putHeld = try database.prepare(
            "INSERT OR REPLACE INTO courier_held(id, depositor, deposited_ms, published_ms, envelope) VALUES (?, ?, ?, ?, ?)")
        deleteHeld = try database.prepare("DELETE FROM courier_held WHERE id = ?")
        putPending = try database.prepare("INSERT OR REPLACE INTO courier_pending(event_id, peer, expiry_ms, envelope) VALUES (?, ?, ?, ?)")
        deletePending = try database.prepare("DELETE FROM courier_pending WHERE event_id = ?")
        putSeen = try database.prepare("INSERT OR REPLACE INTO courier_seen(event_id, at_ms) VALUES (?, ?)")
        expireSeen = try database.prepare("DELETE FROM courier_seen WHERE at_ms < ?")
        trimSeen = try database.prepare(
            "DELETE FROM courier_seen WHERE event_id IN (SELECT event_id FROM courier_seen ORDER BY at_ms DESC LIMIT -1 OFFSET ?)")
    }

    /// Performs one of the gateway's store actions (others are not the store's and are ignored).
    public func apply(_ action: CourierGateway.Action, seenLifetimeMs: UInt64, seenCapacity: Int) throws(SQLiteError) {
        switch action {
        case .storeHeld(let held):
            try putHeld.run([
                .text(held.id), .integer(Int64(bitPattern: held.depositor.rawValue)), .integer(Int64(held.depositedMs)),
                held.publishedMs.map { .integer(Int64($0)) } ?? .null, .blob(held.bytes),
            ])
        case .removeHeld(let id): try deleteHeld.run([.text(id)])
        case .storePending(let entry):
            try putPending.run([
                .text(entry.eventID), .integer(Int64(bitPattern: entry.peer.rawValue)), .integer(Int64(entry.expiryMs)), .blob(entry.envelope),
            ])
        case .removePending(let eventID): try deletePending.run([.text(eventID)])
        case .rememberSeen(let eventID, let atMs):
            try putSeen.run([.text(eventID), .integer(Int64(atMs))])
            try expireSeen.run([.integer(Int64(atMs) - Int64(seenLifetimeMs))])
            seenSinceTrim += 1
            if seenSinceTrim >= Self.trimEvery {
                seenSinceTrim = 0
                try trimSeen.run([.integer(Int64(seenCapacity))])
            }
        case .publish, .subscribe, .unsubscribe, .deliver:
            break
        }
    }

    /// What the gateway held, unexpired at `nowMs` (expired rows are deleted; unreadable ones skipped and deleted).
    public func restore(nowMs: UInt64, seenLifetimeMs: UInt64) throws(SQLiteError) -> CourierGateway.Restored {
        let now = Int64(nowMs)
        let heldRows = try database.prepare("SELECT id, depositor, deposited_ms, published_ms, envelope FROM courier_held ORDER BY deposited_ms")
            .query { row in
                (row.text(0), UInt64(bitPattern: row.int64(1)), UInt64(row.int64(2)), row.isNull(3) ? nil : UInt64(row.int64(3)), row.blob(4))
            }
        var restored = CourierGateway.Restored()
        for (id, depositor, deposited, published, bytes) in heldRows {
            guard let envelope = try? CourierEnvelope.decode(bytes), !envelope.isExpired(nowMs: nowMs) else {
                try deleteHeld.run([.text(id)])
                continue
            }
            restored.held.append(CourierGateway.Held(
                id: id, envelope: envelope, depositor: MeshPeerID(rawValue: depositor), depositedMs: deposited, publishedMs: published))
        }
        try database.prepare("DELETE FROM courier_pending WHERE expiry_ms <= ?").run([.integer(now)])
        restored.pending = try database.prepare("SELECT event_id, peer, expiry_ms, envelope FROM courier_pending ORDER BY rowid").query { row in
            CourierGateway.Pending(
                eventID: row.text(0), peer: MeshPeerID(rawValue: UInt64(bitPattern: row.int64(1))), envelope: row.blob(3),
                expiryMs: UInt64(row.int64(2)))
        }
        restored.seen = try database.prepare("SELECT event_id, at_ms FROM courier_seen WHERE at_ms > ? ORDER BY at_ms")
            .query([.integer(now - Int64(seenLifetimeMs))]) { (id: $0.text(0), atMs: UInt64($0.int64(1))) }
        return restored
    }
}
