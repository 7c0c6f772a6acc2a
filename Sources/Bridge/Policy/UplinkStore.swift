public import BotStorage
public import Nostr
import BridgeCore

/// Durable queue of the uplinks (mesh → Nostr: deposits, mirrored messages) that no relay has acknowledged
/// yet, in the bridge database, so that a stop — graceful or not — does not lose them; replayed in order at
/// the next start (operations issue §3, "flush pending uplinks to the queue store").
///
/// Decisions where the issue is silent:
/// - **Written when handed to the relays, not only at stop.** Every uplink is written (one small row) just
///   before the pool gets it and deleted at the first relay's `OK true` (a `duplicate:` answer is `true` too).
///   So an uplink the pool still holds for a relay that is down, or that was sent but not yet acknowledged,
///   survives a `kill -9` as well as a SIGTERM; uplinks are rate-limited deposits and mirrors, so the writes
///   are few. The deposits the router holds while *no* relay is connected (≤ 20, ``BridgeLimits``) never
///   reached the pool and are written at graceful stop (``BridgeCoordinator/flushUplinks()``).
/// - **Exactly once.** A row is deleted when a relay acknowledged the event, so a replay never re-sends what
///   a relay confirmed; the only repeat left is an event a relay stored whose `OK` had not arrived before the
///   stop — the relay answers `duplicate:` and phones deduplicate by id. `OK false` keeps the row (`rate-limited`
///   may pass next time; anything else expires below).
/// - **Expiry.** Phones drop events whose `created_at` is more than ``EventRules/Limits/maxEventAgeSeconds``
///   (900 s) from their clock (NOSTR-GEO: freshness), so an older uplink is pointless to publish: it is deleted
///   and counted at load instead of replayed.
/// - **Bound.** ``Limits/maxRows``, the oldest dropped and counted first.
///
/// Schema (component `pending_uplinks`, version 1): `seq` (arrival order), `event_id` (unique), `created_at`,
/// `event_json` (the signed NIP-01 object, re-verified at load so a damaged row is dropped, never sent).
public final class UplinkStore {
    public enum Limits {
        /// Rows kept: what the relay pool queues per relay while it is not connected
        /// (``RelayPoolCore/Limits/maxQueuedEvents``, phones: 200); a larger replay would be dropped there.
        public static let maxRows = 200
        /// Older uplinks are not replayed: phones drop events this far from their clock.
        public static let maxAgeSeconds = EventRules.Limits.maxEventAgeSeconds
    }

    /// What happened to rows besides being replayed.
    public struct Counters: Equatable, Sendable {
        /// Evicted (oldest first) to stay within ``Limits/maxRows``.
        public var dropped = 0
        /// Past ``Limits/maxAgeSeconds`` at load.
        public var expired = 0
        /// Rows whose JSON no longer parses or verifies (damaged file): deleted, never sent.
        public var unreadable = 0

        public init() {}
    }

    static let component = "pending_uplinks"
    static let schemaVersion: Int64 = 1

    private let database: SQLiteDatabase
    private let insert: SQLiteStatement
    private let delete: SQLiteStatement
    private let countRows: SQLiteStatement
    private let dropOldest: SQLiteStatement
    public private(set) var counters = Counters()

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS pending_uplinks(
                seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id BLOB NOT NULL UNIQUE,
                created_at INTEGER NOT NULL, event_json TEXT NOT NULL);
            INSERT OR IGNORE INTO schema_versions VALUES ('pending_uplinks', 1);
            """)
        insert = try database.prepare(
            "INSERT OR IGNORE INTO pending_uplinks(event_id, created_at, event_json) VALUES (?, ?, ?)")
        delete = try database.prepare("DELETE FROM pending_uplinks WHERE event_id = ?")
        countRows = try database.prepare("SELECT count(*) FROM pending_uplinks")
        dropOldest = try database.prepare(
            "DELETE FROM pending_uplinks WHERE seq IN (SELECT seq FROM pending_uplinks ORDER BY seq LIMIT ?)")
    }

    /// Rows waiting now.
    public func count() throws(SQLiteError) -> Int {
        Int(try countRows.query { $0.int64(0) }.first ?? 0)
    }

    /// Appends `event` (a second save of the same id keeps its first place); durable across a process crash
    /// when this returns. Returns how many of the oldest rows were dropped to stay within the bound.
    @discardableResult
    public func save(_ event: NostrEvent) throws(SQLiteError) -> Int {
        try insert.run([.blob(event.id.bytes), .integer(event.createdAt), .text(event.json)])
        let excess = try count() - Limits.maxRows
        guard excess > 0 else { return 0 }
        try dropOldest.run([.integer(Int64(excess))])
        counters.dropped += excess
        return excess
    }

    /// A relay acknowledged `id`: it is no longer pending. Returns whether a row was deleted.
    @discardableResult
    public func remove(_ id: EventID) throws(SQLiteError) -> Bool {
        try delete.run([.blob(id.bytes)])
        return database.changes > 0
    }

    /// Deletes the expired and unreadable rows and returns the rest, oldest first. The rows stay until
    /// ``remove(_:)``: a replay that is stopped again before any relay answers is replayed once more.
    /// - Parameter now: wall-clock seconds since the Unix epoch.
    public func pending(now: Int64) throws(SQLiteError) -> [NostrEvent] {
        let cutoff = now - Limits.maxAgeSeconds
        let expired = try database.prepare("DELETE FROM pending_uplinks WHERE created_at < ?")
        try expired.run([.integer(cutoff)])
        counters.expired += database.changes
        let rows = try database.prepare("SELECT seq, event_json FROM pending_uplinks ORDER BY seq")
            .query { ($0.int64(0), $0.text(1)) }
        var events: [NostrEvent] = []
        var damaged: [Int64] = []
        for (seq, json) in rows {
            if let event = try? UnverifiedEvent(json: json).verified() {
                events.append(event)
            } else {
                damaged.append(seq)
            }
        }
        if !damaged.isEmpty {
            let deleteSeq = try database.prepare("DELETE FROM pending_uplinks WHERE seq = ?")
            for seq in damaged { try deleteSeq.run([.integer(seq)]) }
            counters.unreadable += damaged.count
        }
        return events
    }
}
