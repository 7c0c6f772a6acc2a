public import BotStorage
public import BotSupport
public import SpamFilter
public import Moderation

/// The moderation log's settings (operator config).
public struct ModerationLogConfig: Sendable, Equatable {
    /// Keep the message text; when false only its SHA-256 is stored and logged.
    public var logText = true
    /// Records older than this are deleted, seconds (default 30 days).
    public var retentionSeconds = 30.0 * 86_400
    /// At most this many records are kept; the oldest go first.
    public var maxRecords = 100_000

    public init() {}

    /// Reads `{"log_text": bool, "retention_days": number, "max_records": int}`; missing keys keep defaults.
    public init(json: JSONValue, field: String = "modlog") throws(SpamConfigError) {
        self.init()
        guard let members = json.objectValue else { throw .notAnObject(field: field) }
        for (key, value) in members {
            let path = field + "." + key
            switch key {
            case "log_text":
                guard let b = value.boolValue else { throw .wrongType(field: path, expected: "true or false") }
                logText = b
            case "retention_days":
                guard let d = value.numberValue, d.isFinite else { throw .wrongType(field: path, expected: "a number") }
                guard d > 0, d <= 3650 else { throw .outOfRange(field: path, reason: "must be more than 0 and at most 3650") }
                retentionSeconds = d * 86_400
            case "max_records":
                guard let i = value.integerValue else { throw .wrongType(field: path, expected: "an integer") }
                guard i >= 1, i <= Int64(ModerationLog.Limits.maxRecordsCap) else {
                    throw .outOfRange(field: path, reason: "must be between 1 and \(ModerationLog.Limits.maxRecordsCap)")
                }
                maxRecords = Int(i)
            default: throw .unknownField(field: path)
            }
        }
    }
}

/// Filters for reading the log back (`bitchat-bridge modlog`).
public struct ModerationQuery: Sendable, Equatable {
    /// Only records judged at or after this Unix time.
    public var since: Double?
    /// Only records judged before this Unix time.
    public var until: Double?
    public var rule: HideRule?
    public var direction: SpamDirection?
    public var senderKey: String?
    /// Only this channel (a geohash, or `mesh`).
    public var channel: String?
    /// Only records whose text or display name contains this (case-insensitive for ASCII, SQLite's LIKE).
    public var search: String?
    /// Paging: only records with a smaller row id (the last id of the previous page).
    public var beforeID: Int64?
    /// Newest first, at most this many.
    public var limit: Int

    public init(since: Double? = nil, rule: HideRule? = nil, direction: SpamDirection? = nil, senderKey: String? = nil, limit: Int = 100) {
        self.since = since
        self.rule = rule
        self.direction = direction
        self.senderKey = senderKey
        self.limit = limit
    }
}

/// Why the moderation log failed.
public enum ModerationLogError: Error, Equatable, Sendable, CustomStringConvertible {
    case storage(SQLiteError)
    /// The database was written by a newer bitchat-bridge.
    case newerSchema(found: Int64, supported: Int64)
    /// A stored row no longer decodes (edited by hand, or a newer writer).
    case corruptRow(id: Int64, field: String)
    /// The schema migration failed for another reason.
    case migration(String)

    public var description: String {
        switch self {
        case .storage(let e): "moderation log: \(e)"
        case .newerSchema(let found, let supported):
            "moderation log: schema version \(found) is newer than this build supports (\(supported))"
        case .corruptRow(let id, let field): "moderation log: record \(id) has an unreadable '\(field)'"
        case .migration(let reason): "moderation log: schema migration failed: \(reason)"
        }
    }
}

/// The durable, bounded moderation log: one SQLite table (`modlog_records`) in the bridge database,
/// and one JSON line per record on the log stream.
///
/// Owned by one actor (the bridge coordinator) or one command; not thread-safe. Retention runs on
/// ``prune(now:)`` and, by count and by the new record's time, every ``Limits/pruneInterval`` appends.
public final class ModerationLog {
    public enum Limits {
        /// Count and age pruning run every this many appends: a DELETE per record would double the write cost.
        public static let pruneInterval = 256
        /// A larger table makes `modlog` queries slow on small boards; 10 M rows is about 5 GB.
        public static let maxRecordsCap = 10_000_000
        /// A query never returns more rows than this (the CLI's `--limit` is checked against it).
        public static let maxQueryLimit = 1_000_000
        /// An export reads this many rows per query: a few MB of records at a time, whatever the range.
        public static let exportPageSize = 1_000
    }

    static let component = "modlog"
    /// 1: the records; 2: release marks (`released_at`, `released_by`) and an index by message id.
    static let schemaVersion: Int64 = 2

    public let config: ModerationLogConfig
    private let database: SQLiteDatabase
    private let logger: Logger?
    private let insert: SQLiteStatement
    private var appendsSincePrune = 0

    /// Opens (creating or migrating) the log in the database at `path` (`<data-dir>/bridge.sqlite3`), on a
    /// connection of its own (the CLI's `modlog`).
    public convenience init(path: String, config: ModerationLogConfig, logger: Logger?) throws(ModerationLogError) {
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: path)
        } catch {
            throw .storage(error)
        }
        try self.init(database: database, config: config, logger: logger)
    }

    /// The log on an open connection (the bridge shares one connection per database file between its stores).
    public init(database: SQLiteDatabase, config: ModerationLogConfig, logger: Logger?) throws(ModerationLogError) {
        self.config = config
        self.logger = logger
        self.database = database
        try Self.migrate(database)
        do {
            insert = try database.prepare(
                """
                INSERT INTO modlog_records(judged_at, direction, channel, sender, display_name, message_id, message_ts,
                  rule, shadow, figures, text, text_sha256) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
                """)
        } catch {
            throw .storage(error)
        }
    }

    private static func migrate(_ database: SQLiteDatabase) throws(ModerationLogError) {
        do {
            try database.transaction { () throws -> Void in
                try database.execute(
                    "CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
                let versions = try database.prepare("SELECT version FROM schema_versions WHERE component = ?")
                let found = try versions.query([.text(component)]) { $0.int64(0) }.first ?? 0
                if found > schemaVersion { throw ModerationLogError.newerSchema(found: found, supported: schemaVersion) }
                if found < 1 {
                    try database.execute(
                        """
                        CREATE TABLE modlog_records(
                          id INTEGER PRIMARY KEY AUTOINCREMENT,
                          judged_at REAL NOT NULL,
                          direction TEXT NOT NULL,
                          channel TEXT NOT NULL,
                          sender TEXT NOT NULL,
                          display_name TEXT,
                          message_id TEXT NOT NULL,
                          message_ts REAL NOT NULL,
                          rule TEXT NOT NULL,
                          shadow INTEGER NOT NULL,
                          figures TEXT NOT NULL,
                          text TEXT,
                          text_sha256 TEXT NOT NULL);
                        CREATE INDEX modlog_records_judged_at ON modlog_records(judged_at);
                        CREATE INDEX modlog_records_sender ON modlog_records(sender, judged_at);
                        """)
                }
                if found < 2 {
                    try database.execute(
                        """
                        ALTER TABLE modlog_records ADD COLUMN released_at REAL;
                        ALTER TABLE modlog_records ADD COLUMN released_by TEXT;
                        CREATE INDEX modlog_records_message ON modlog_records(message_id);
                        """)
                }
                if found < schemaVersion {
                    try database.prepare("INSERT OR REPLACE INTO schema_versions(component, version) VALUES (?, ?)")
                        .run([.text(component), .integer(schemaVersion)])
                }
            }
        } catch let error as ModerationLogError {
            throw error
        } catch let error as SQLiteError {
            throw .storage(error)
        } catch {
            throw .migration("\(error)")
        }
    }

    /// Stores a record (returns its row id) and writes its JSON line to the log stream.
    @discardableResult
    public func append(_ record: ModerationRecord) throws(ModerationLogError) -> Int64 {
        var record = record
        if !config.logText { record.text = nil }
        do {
            try insert.run([
                .real(record.judgedAt), .text(record.direction.rawValue), .text(record.channel), .text(record.senderKey),
                record.displayName.map { .text($0) } ?? .null, .text(record.messageID), .real(record.messageTimestamp),
                .text(record.rule.label), .integer(record.shadow ? 1 : 0), .text(JSONWriter.compact(record.figures)),
                record.text.map { .text($0) } ?? .null, .text(record.textSHA256),
            ])
        } catch {
            throw .storage(error)
        }
        record.id = database.lastInsertRowID
        logger?.info(
            record.shadow ? "spam would be hidden (shadow mode)" : "spam hidden",
            (record.jsonValue.objectValue ?? []).map { ("modlog." + $0.0, $0.1) })
        appendsSincePrune += 1
        if appendsSincePrune >= Limits.pruneInterval { _ = try prune(now: record.judgedAt) }
        return record.id ?? 0
    }

    /// Deletes records older than the retention and beyond the count cap; returns how many went.
    @discardableResult
    public func prune(now: Double) throws(ModerationLogError) -> Int {
        appendsSincePrune = 0
        do {
            try database.prepare("DELETE FROM modlog_records WHERE judged_at < ?").run([.real(now - config.retentionSeconds)])
            var removed = database.changes
            try database.prepare(
                "DELETE FROM modlog_records WHERE id <= (SELECT id FROM modlog_records ORDER BY id DESC LIMIT 1 OFFSET ?)"
            ).run([.integer(Int64(config.maxRecords))])
            removed += database.changes
            return removed
        } catch {
            throw .storage(error)
        }
    }

    public func count() throws(ModerationLogError) -> Int {
        do {
            return try database.prepare("SELECT COUNT(*) FROM modlog_records").query { Int($0.int64(0)) }.first ?? 0
        } catch {
            throw .storage(error)
        }
    }

    /// The distinct senders whose key starts with `hexPrefix` (lowercase hex), at most `limit`, in key order: the
    /// prefix a table shows names the sender (`modlog --sender 834c59a1`); `direction` narrows to one side (a Nostr
    /// key or a mesh fingerprint). A range on the sender index.
    public func senders(hexPrefix: String, direction: SpamDirection? = nil, limit: Int) throws(ModerationLogError) -> [String] {
        try distinct("sender", hexPrefix: hexPrefix, direction: direction, limit: limit)
    }

    /// The message ids that start with `hexPrefix` (lowercase hex), in order, at most `limit`: `modlog release` takes the
    /// 16 hex the table shows.
    public func messageIDs(hexPrefix: String, limit: Int) throws(ModerationLogError) -> [String] {
        try distinct("message_id", hexPrefix: hexPrefix, direction: nil, limit: limit)
    }

    /// The distinct values of `column` (an indexed hex column) that start with `hexPrefix`: lowercase hex sorts below
    /// "g", so [prefix, prefix + "g") holds exactly them.
    private func distinct(_ column: String, hexPrefix: String, direction: SpamDirection?, limit: Int) throws(ModerationLogError) -> [String] {
        var values: [SQLiteValue] = [.text(hexPrefix), .text(hexPrefix + "g")]
        if let direction { values.append(.text(direction.rawValue)) }
        values.append(.integer(Int64(max(0, limit))))
        do {
            return try database.prepare(
                "SELECT DISTINCT \(column) FROM modlog_records WHERE \(column) >= ? AND \(column) < ?"
                    + (direction == nil ? "" : " AND direction = ?") + " ORDER BY \(column) LIMIT ?"
            ).query(values) { $0.text(0) }
        } catch {
            throw .storage(error)
        }
    }

    /// Marks the rows of `messageID` released (when, by whom: `console`, `cli`) unless they are already; how many.
    @discardableResult
    public func markReleased(messageID: String, at: Double, by: String) throws(ModerationLogError) -> Int {
        do {
            try database.prepare(
                "UPDATE modlog_records SET released_at = ?, released_by = ? WHERE message_id = ? AND released_at IS NULL"
            ).run([.real(at), .text(by), .text(messageID)])
            return database.changes
        } catch {
            throw .storage(error)
        }
    }

    /// Records matching `query`, newest first.
    public func records(_ query: ModerationQuery) throws(ModerationLogError) -> [ModerationRecord] {
        var conditions: [String] = []
        var values: [SQLiteValue] = []
        if let since = query.since { conditions.append("judged_at >= ?"); values.append(.real(since)) }
        if let rule = query.rule { conditions.append("rule = ?"); values.append(.text(rule.label)) }
        if let direction = query.direction { conditions.append("direction = ?"); values.append(.text(direction.rawValue)) }
        if let sender = query.senderKey { conditions.append("sender = ?"); values.append(.text(sender)) }
        if let until = query.until { conditions.append("judged_at < ?"); values.append(.real(until)) }
        if let channel = query.channel { conditions.append("channel = ?"); values.append(.text(channel)) }
        if let before = query.beforeID { conditions.append("id < ?"); values.append(.integer(before)) }
        if let search = query.search, !search.isEmpty {
            let pattern = "%" + Self.likeEscaped(search) + "%"
            conditions.append("(text LIKE ? ESCAPE '\\' OR display_name LIKE ? ESCAPE '\\')")
            values += [.text(pattern), .text(pattern)]
        }
        let whereClause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        values.append(.integer(Int64(max(0, min(query.limit, Limits.maxQueryLimit)))))
        let sql = """
            SELECT id, judged_at, direction, channel, sender, display_name, message_id, message_ts, rule, shadow, figures,
              text, text_sha256, released_at, released_by FROM modlog_records\(whereClause) ORDER BY id DESC LIMIT ?
            """
        let rows: [Result<ModerationRecord, ModerationLogError>]
        do {
            rows = try database.prepare(sql).query(values) { row in Self.decode(row) }
        } catch {
            throw .storage(error)
        }
        return try rows.map { (result) throws(ModerationLogError) -> ModerationRecord in try result.get() }
    }

    /// `text` with LIKE's wildcards (`%`, `_`) and the escape character taken literally.
    static func likeEscaped(_ text: String) -> String {
        var out = ""
        for c in text {
            if c == "%" || c == "_" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out
    }

    /// Records judged in `[since, until)`, oldest first, handed to `body` one page of `pageSize` rows at a time
    /// (an export of a million records never holds them all). Returns how many were visited.
    @discardableResult
    public func forEachRecord(
        since: Double, until: Double, pageSize: Int = Limits.exportPageSize,
        _ body: (ModerationRecord) throws(ModerationLogError) -> Void
    ) throws(ModerationLogError) -> Int {
        let statement: SQLiteStatement
        do {
            statement = try database.prepare(
                """
                SELECT id, judged_at, direction, channel, sender, display_name, message_id, message_ts, rule, shadow, figures,
                  text, text_sha256, released_at, released_by FROM modlog_records WHERE judged_at >= ? AND judged_at < ? AND id > ?
                  ORDER BY id LIMIT ?
                """)
        } catch {
            throw .storage(error)
        }
        var after: Int64 = 0
        var visited = 0
        while true {
            let rows: [Result<ModerationRecord, ModerationLogError>]
            do {
                rows = try statement.query([.real(since), .real(until), .integer(after), .integer(Int64(max(1, pageSize)))]) {
                    Self.decode($0)
                }
            } catch {
                throw .storage(error)
            }
            for row in rows {
                let record = try row.get()
                after = record.id ?? after
                visited += 1
                try body(record)
            }
            if rows.count < max(1, pageSize) { return visited }
        }
    }

    private static func decode(_ row: SQLiteStatement) -> Result<ModerationRecord, ModerationLogError> {
        let id = row.int64(0)
        guard let direction = SpamDirection(rawValue: row.text(2)) else { return .failure(.corruptRow(id: id, field: "direction")) }
        guard let rule = HideRule(label: row.text(8)) else { return .failure(.corruptRow(id: id, field: "rule")) }
        guard let figures = try? JSONParser().parse(row.text(10)) else { return .failure(.corruptRow(id: id, field: "figures")) }
        var record = ModerationRecord(
            id: id, judgedAt: row.double(1), direction: direction, channel: row.text(3), senderKey: row.text(4),
            displayName: row.isNull(5) ? nil : row.text(5), messageID: row.text(6), messageTimestamp: row.double(7),
            rule: rule, shadow: row.int64(9) != 0, figures: figures, text: row.isNull(11) ? nil : row.text(11),
            textSHA256: row.text(12))
        record.releasedAt = row.isNull(13) ? nil : row.double(13)
        record.releasedBy = row.isNull(14) ? nil : row.text(14)
        return .success(record)
    }
}
