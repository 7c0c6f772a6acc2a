public import BotStorage
public import Identity
import BotSupport

/// An ``IdentityStore`` in the data directory's SQLite database (WAL): one row per identity in
/// `identity_records`, indexed by peer ID (→ signing key), nickname and retention stamp, so lookups are
/// O(log C) and a write touches one row whatever the cache size.
///
/// Schema changes are forward migrations recorded in the shared `schema_versions` table under the component
/// name `identity`, applied on open inside one transaction. A database from a newer build is refused.
/// Opens its own connection (WAL lets the moderation log and the CLI open theirs).
public final class SQLiteIdentityStore: IdentityStore {
    /// The file name of the bridge's one database inside the data directory.
    public static let databaseFileName = "bridge.sqlite3"
    /// This component's name in `schema_versions`.
    public static let component = "identity"

    /// Forward migrations, in order; index + 1 is the schema version they produce. Never edit a shipped one.
    static let migrations: [String] = [
        """
        CREATE TABLE identity_records(
            kind INTEGER NOT NULL,
            key BLOB NOT NULL,
            noise_key BLOB,
            signing_key BLOB,
            peer_id INTEGER,
            nickname TEXT,
            first_seen_ms INTEGER,
            last_seen_day INTEGER,
            allowed INTEGER NOT NULL DEFAULT 0,
            verified INTEGER NOT NULL DEFAULT 0,
            blocked INTEGER NOT NULL DEFAULT 0,
            trust INTEGER NOT NULL DEFAULT 0,
            petname TEXT,
            notes TEXT,
            stranger INTEGER NOT NULL,
            PRIMARY KEY(kind, key)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX identity_records_peer_id ON identity_records(peer_id) WHERE peer_id IS NOT NULL;
        CREATE INDEX identity_records_nickname ON identity_records(nickname) WHERE nickname IS NOT NULL;
        CREATE INDEX identity_records_stranger_stamp ON identity_records(last_seen_day) WHERE stranger = 1;
        """,
        // v2: the strangers' index covers every column a retention pass reads (stamp, firstSeen and the primary
        // key, which every index carries), so counting strangers, reading them for the cap ranking and finding the
        // unstamped or expired ones never touch the table rows. `stranger` is an indexed column although the
        // index is partial on it: SQLite (3.40) uses a partial index as covering only when every column the query
        // names, including the ones in its WHERE, is in the index.
        """
        DROP INDEX identity_records_stranger_stamp;
        CREATE INDEX identity_records_strangers ON identity_records(stranger, last_seen_day, first_seen_ms) WHERE stranger = 1;
        """,
        // v3: refused announces per pinned identity (a copied Noise key with another signing key), for
        // `identities` and for logging the first refusal of each key once, across restarts.
        """
        ALTER TABLE identity_records ADD COLUMN pin_refusals INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE identity_records ADD COLUMN last_pin_refusal_ms INTEGER;
        """,
    ]

    public static var schemaVersion: Int { migrations.count }

    private let database: SQLiteDatabase
    private var transactionDepth = 0
    private let selectRecord: SQLiteStatement
    private let selectSigningKey: SQLiteStatement
    private let selectByNickname: SQLiteStatement
    private let selectByPrefix: SQLiteStatement
    private let clearPeerID: SQLiteStatement
    private let upsert: SQLiteStatement
    private let updateStamp: SQLiteStatement
    private let deleteRecord: SQLiteStatement
    private let deleteBatch: SQLiteStatement
    private let countAll: SQLiteStatement
    private let countStrangers: SQLiteStatement
    private let selectStrangers: SQLiteStatement
    private let selectStrangersStamped: SQLiteStatement
    private let selectUnstamped: SQLiteStatement

    private static let recordColumns =
        "kind, key, noise_key, signing_key, peer_id, nickname, first_seen_ms, last_seen_day, allowed, verified, blocked, trust, petname, notes, pin_refusals, last_pin_refusal_ms"

    /// Opens (creating and migrating if needed) the database at `path` (`:memory:` for a private in-memory one).
    public convenience init(path: String) throws(IdentityStoreError) {
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: path)
        } catch {
            throw .sqlite(error)
        }
        try self.init(database: database)
    }

    /// Uses an open connection that this store then owns.
    public init(database: SQLiteDatabase) throws(IdentityStoreError) {
        self.database = database
        do {
            try Self.migrate(database)
            selectRecord = try database.prepare("SELECT \(Self.recordColumns) FROM identity_records WHERE kind = ? AND key = ?")
            selectSigningKey = try database.prepare("SELECT signing_key FROM identity_records WHERE peer_id = ?")
            selectByNickname = try database.prepare(
                "SELECT kind, key FROM identity_records WHERE nickname = ? ORDER BY kind, key LIMIT ?")
            selectByPrefix = try database.prepare(
                "SELECT kind, key FROM identity_records WHERE kind = ? AND key BETWEEN ? AND ? ORDER BY key LIMIT ?")
            clearPeerID = try database.prepare(
                "UPDATE identity_records SET peer_id = NULL WHERE peer_id = ? AND NOT (kind = ? AND key = ?)")
            upsert = try database.prepare(
                """
                INSERT OR REPLACE INTO identity_records(\(Self.recordColumns), stranger)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            updateStamp = try database.prepare("UPDATE identity_records SET last_seen_day = ? WHERE kind = ? AND key = ?")
            deleteRecord = try database.prepare("DELETE FROM identity_records WHERE kind = ? AND key = ?")
            deleteBatch = try database.prepare(
                "DELETE FROM identity_records WHERE kind = ? AND key IN (\(Array(repeating: "?", count: Self.deleteBatch).joined(separator: ",")))")
            countAll = try database.prepare("SELECT COUNT(*) FROM identity_records")
            countStrangers = try database.prepare("SELECT COUNT(*) FROM identity_records WHERE stranger = 1")
            selectStrangers = try database.prepare(
                "SELECT kind, key, last_seen_day, first_seen_ms FROM identity_records WHERE stranger = 1")
            selectStrangersStamped = try database.prepare(
                """
                SELECT kind, key, last_seen_day, first_seen_ms FROM identity_records
                WHERE stranger = 1 AND last_seen_day <= ?
                """)
            selectUnstamped = try database.prepare(
                "SELECT kind, key FROM identity_records WHERE stranger = 1 AND last_seen_day IS NULL ORDER BY kind, key")
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Creates `schema_versions` if needed and applies every migration newer than the stored version, in one
    /// transaction (a crash mid-migration leaves the old version intact).
    static func migrate(_ database: SQLiteDatabase) throws(IdentityStoreError) {
        do {
            try database.execute("CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            try database.execute("BEGIN IMMEDIATE")
            do {
                let current = try database.prepare("SELECT version FROM schema_versions WHERE component = ?")
                    .query([.text(component)]) { Int($0.int64(0)) }.first ?? 0
                guard current <= migrations.count else {
                    throw IdentityStoreError.schemaTooNew(found: current, known: migrations.count)
                }
                for version in current..<migrations.count {
                    try database.execute(migrations[version])
                }
                if current < migrations.count {
                    try database.prepare("INSERT OR REPLACE INTO schema_versions(component, version) VALUES(?, ?)")
                        .run([.text(component), .integer(Int64(migrations.count))])
                }
                try database.execute("COMMIT")
            } catch {
                try? database.execute("ROLLBACK")
                throw error
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Runs `PRAGMA integrity_check`; returns SQLite's verdict (`["ok"]` when sound).
    public func integrityCheck() throws(IdentityStoreError) -> [String] {
        try sqlite { () throws(SQLiteError) in try database.prepare("PRAGMA integrity_check").query { $0.text(0) } }
    }

    /// The one mapping of an untyped error from a block that mixes store and SQLite calls: a store error as it is,
    /// a SQLite error wrapped, anything else (a decoder's reason) as a corrupt row.
    private static func storeError(_ error: any Error) -> IdentityStoreError {
        switch error {
        case let error as IdentityStoreError: error
        case let error as SQLiteError: .sqlite(error)
        default: .corruptRow("\(error)")
        }
    }

    private func sqlite<T>(_ body: () throws(SQLiteError) -> T) throws(IdentityStoreError) -> T {
        do {
            return try body()
        } catch {
            throw .sqlite(error)
        }
    }

    /// Keys per execution of the cached batch DELETE (one kind per batch): enough to share the statement's fixed
    /// cost, few enough parameters to keep its one preparation cheap.
    static let deleteBatch = 64

    private static func keyValues(_ key: IdentityKey) -> [SQLiteValue] {
        [.integer(Int64(key.kind.rawValue)), .blob(key.bytes)]
    }

    private static func decodeKey(_ row: SQLiteStatement, kindColumn: Int) throws(IdentityStoreError) -> IdentityKey {
        guard let kind = IdentityKind(rawValue: Int(row.int64(kindColumn))) else {
            throw .corruptRow("unknown kind \(row.int64(kindColumn))")
        }
        do {
            return try IdentityKey(kind: kind, bytes: row.blob(kindColumn + 1))
        } catch {
            throw .corruptRow("key: \(error)")
        }
    }

    /// Collects rows with a decoder that may throw a named reason.
    private func rows<T>(
        _ statement: SQLiteStatement, _ values: [SQLiteValue], _ decode: (SQLiteStatement) throws(IdentityStoreError) -> T
    ) throws(IdentityStoreError) -> [T] {
        do {
            try statement.bind(values)
            defer { statement.reset() }
            var out: [T] = []
            while try statement.step() { out.append(try decode(statement)) }
            return out
        } catch {
            throw Self.storeError(error)
        }
    }

    private static func decodeRecord(_ row: SQLiteStatement) throws(IdentityStoreError) -> IdentityRecord {
        let key = try decodeKey(row, kindColumn: 0)
        var pins: MeshPins?
        if !row.isNull(2) || !row.isNull(3) {
            do {
                pins = try MeshPins(noiseKey: row.blob(2), signingKey: row.blob(3))
            } catch {
                throw .corruptRow("pins of \(key): \(error)")
            }
        }
        guard let trust = TrustLevel(rawValue: Int(row.int64(11))) else {
            throw .corruptRow("trust level \(row.int64(11)) of \(key)")
        }
        let annotations = Annotations(
            allowed: row.int64(8) != 0, verified: row.int64(9) != 0, blocked: row.int64(10) != 0, trust: trust,
            petname: row.isNull(12) ? nil : row.text(12), notes: row.isNull(13) ? nil : row.text(13))
        return IdentityRecord(
            key: key, pins: pins, peerID: row.isNull(4) ? nil : UInt64(bitPattern: row.int64(4)),
            nickname: row.isNull(5) ? nil : row.text(5),
            firstSeen: row.isNull(6) ? nil : UTCTime(millisecondsSince1970: row.int64(6)),
            lastSeen: row.isNull(7) ? nil : UTCDay(Int(row.int64(7))), annotations: annotations,
            pinRefusals: Int(row.int64(14)),
            lastPinRefusal: row.isNull(15) ? nil : UTCTime(millisecondsSince1970: row.int64(15)))
    }

    private static func decodeRetentionRow(_ row: SQLiteStatement) throws(IdentityStoreError) -> RetentionRow {
        RetentionRow(
            key: try decodeKey(row, kindColumn: 0), lastSeen: row.isNull(2) ? nil : UTCDay(Int(row.int64(2))),
            firstSeen: row.isNull(3) ? nil : UTCTime(millisecondsSince1970: row.int64(3)))
    }

    public func record(_ key: IdentityKey) throws(IdentityStoreError) -> IdentityRecord? {
        try rows(selectRecord, Self.keyValues(key), Self.decodeRecord).first
    }

    public func signingKey(peerID: UInt64) throws(IdentityStoreError) -> [UInt8]? {
        try rows(selectSigningKey, [.integer(Int64(bitPattern: peerID))]) { row throws(IdentityStoreError) -> [UInt8]? in
            row.isNull(0) ? nil : row.blob(0)
        }.first ?? nil
    }

    public func keys(nickname: String, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        try rows(selectByNickname, [.text(nickname), .integer(Int64(max(0, limit)))]) { row throws(IdentityStoreError) in
            try Self.decodeKey(row, kindColumn: 0)
        }
    }

    public func keys(hexPrefix: String, kind: IdentityKind, limit: Int) throws(IdentityStoreError) -> [IdentityKey] {
        // The range of 32-byte keys the prefix covers: the prefix padded with 0s, then with fs.
        let width = IdentityKey.Limits.keyBytes * 2
        guard hexPrefix.count <= width,
            let low = try? Hex.decode(hexPrefix + String(repeating: "0", count: width - hexPrefix.count)),
            let high = try? Hex.decode(hexPrefix + String(repeating: "f", count: width - hexPrefix.count))
        else { return [] }
        let values: [SQLiteValue] = [.integer(Int64(kind.rawValue)), .blob(low), .blob(high), .integer(Int64(max(0, limit)))]
        return try rows(selectByPrefix, values) { row throws(IdentityStoreError) in try Self.decodeKey(row, kindColumn: 0) }
    }

    public func put(_ record: IdentityRecord) throws(IdentityStoreError) {
        try transaction { () throws(IdentityStoreError) in
            try sqlite { () throws(SQLiteError) in
                let key = Self.keyValues(record.key)
                if let peerID = record.peerID {
                    try clearPeerID.run([.integer(Int64(bitPattern: peerID))] + key)
                }
                let a = record.annotations
                try upsert.run(
                    key + [
                        record.pins.map { .blob($0.noiseKey) } ?? .null,
                        record.pins.map { .blob($0.signingKey) } ?? .null,
                        record.peerID.map { .integer(Int64(bitPattern: $0)) } ?? .null,
                        record.nickname.map { .text($0) } ?? .null,
                        record.firstSeen.map { .integer($0.millisecondsSince1970) } ?? .null,
                        record.lastSeen.map { .integer(Int64($0.number)) } ?? .null,
                        .integer(a.allowed ? 1 : 0), .integer(a.verified ? 1 : 0), .integer(a.blocked ? 1 : 0),
                        .integer(Int64(a.trust.rawValue)),
                        a.petname.map { .text($0) } ?? .null,
                        a.notes.map { .text($0) } ?? .null,
                        .integer(Int64(record.pinRefusals)),
                        record.lastPinRefusal.map { .integer($0.millisecondsSince1970) } ?? .null,
                        .integer(record.isStranger ? 1 : 0),
                    ])
            }
        }
    }

    public func setLastSeen(_ day: UTCDay?, keys: [IdentityKey]) throws(IdentityStoreError) {
        try transaction { () throws(IdentityStoreError) in
            try sqlite { () throws(SQLiteError) in
                for key in keys {
                    try updateStamp.run([day.map { .integer(Int64($0.number)) } ?? .null] + Self.keyValues(key))
                }
            }
        }
    }

    @discardableResult
    public func delete(_ keys: [IdentityKey]) throws(IdentityStoreError) -> Int {
        try transaction { () throws(IdentityStoreError) in
            try sqlite { () throws(SQLiteError) in
                // Full batches of one kind go through the cached `kind = ? AND key IN (…)` statement (a primary-key
                // seek per key, in one statement execution); the rest one cached single-key statement each.
                // Measured with callgrind on a 501-key cap pass: the batches cost about 30% fewer instructions than
                // one statement per key (whose fixed cost per execution is ~4k instructions), and about a third of
                // a multi-row `IN (VALUES …)` built per pass (parsed each time, deleted through an ephemeral table).
                var removed = 0
                for kind in IdentityKind.allCases {
                    let ofKind = keys.filter { $0.kind == kind }
                    var start = 0
                    while ofKind.count - start >= Self.deleteBatch {
                        let batch = ofKind[start..<start + Self.deleteBatch]
                        try deleteBatch.run([.integer(Int64(kind.rawValue))] + batch.map { .blob($0.bytes) })
                        removed += database.changes
                        start += Self.deleteBatch
                    }
                    for key in ofKind[start...] {
                        try deleteRecord.run(Self.keyValues(key))
                        removed += database.changes
                    }
                }
                return removed
            }
        }
    }

    public func count() throws(IdentityStoreError) -> Int {
        try sqlite { () throws(SQLiteError) in try countAll.query { Int($0.int64(0)) }.first ?? 0 }
    }

    public func strangerCount() throws(IdentityStoreError) -> Int {
        try sqlite { () throws(SQLiteError) in try countStrangers.query { Int($0.int64(0)) }.first ?? 0 }
    }

    public func strangerRows(stampedAtOrBefore: UTCDay?) throws(IdentityStoreError) -> [RetentionRow] {
        if let cutoff = stampedAtOrBefore {
            return try rows(selectStrangersStamped, [.integer(Int64(cutoff.number))], Self.decodeRetentionRow)
        }
        return try rows(selectStrangers, [], Self.decodeRetentionRow)
    }

    public func unstampedStrangerKeys() throws(IdentityStoreError) -> [IdentityKey] {
        try rows(selectUnstamped, []) { row throws(IdentityStoreError) in try Self.decodeKey(row, kindColumn: 0) }
    }

    public func records(_ filter: IdentityListFilter, limit: Int, after: IdentityKey?) throws(IdentityStoreError) -> [IdentityRecord] {
        var conditions: [String] = []
        var values: [SQLiteValue] = []
        switch filter {
        case .all: break
        case .strangers: conditions.append("stranger = 1")
        case .annotated: conditions.append("stranger = 0")
        }
        if let after {
            conditions.append("(kind > ? OR (kind = ? AND key > ?))")
            values += [.integer(Int64(after.kind.rawValue)), .integer(Int64(after.kind.rawValue)), .blob(after.bytes)]
        }
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        values.append(.integer(Int64(max(0, limit))))
        let statement = try sqlite { () throws(SQLiteError) in
            try database.prepare("SELECT \(Self.recordColumns) FROM identity_records \(whereClause) ORDER BY kind, key LIMIT ?")
        }
        return try rows(statement, values, Self.decodeRecord)
    }

    public func transaction<T>(_ body: () throws(IdentityStoreError) -> T) throws(IdentityStoreError) -> T {
        if transactionDepth > 0 { return try body() }
        try sqlite { () throws(SQLiteError) in try database.execute("BEGIN IMMEDIATE") }
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        do {
            let result = try body()
            try sqlite { () throws(SQLiteError) in try database.execute("COMMIT") }
            return result
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }
}
