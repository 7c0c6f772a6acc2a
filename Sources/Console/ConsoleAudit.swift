public import BotStorage
public import BotSupport
public import Bridge
public import BridgeCore
public import ModerationLog

/// One console action: when, what, on what, from where, and whether it was done.
public struct ConsoleAuditEntry: Sendable, Equatable {
    public var id: Int64?
    /// Unix seconds.
    public var at: Double
    /// `block`, `unblock`, `login`, `settings`, … (or `METHOD /path` for a refused request to no known action).
    public var action: String
    /// The key or setting acted on; empty when none.
    public var target: String
    /// The peer address the request came from.
    public var remote: String
    /// `ok`, or `refused: <reason>` / `failed: <reason>`.
    public var outcome: String
    /// How the request proved itself (`bearer`, `session`, or `none` when refused before that).
    public var principal: String

    public init(id: Int64? = nil, at: Double, action: String, target: String, remote: String, outcome: String, principal: String) {
        self.id = id
        self.at = at
        self.action = action
        self.target = target
        self.remote = remote
        self.outcome = outcome
        self.principal = principal
    }

    public var jsonValue: JSONValue {
        .object([
            ("id", id.map(JSONValue.integer) ?? .null), ("at", .double(at)), ("action", .string(action)), ("target", .string(target)),
            ("remote", .string(remote)), ("outcome", .string(outcome)), ("principal", .string(principal)),
        ])
    }
}

extension ConsoleAuditEntry {
    /// The row as an action of an export (`modlog export`), when it is one: done (`ok`), and not a sign-in or
    /// sign-out. `bridge` names this stage; another stage's row (`remote` `stage:NAME`) names its own.
    public func exportAction(bridge: String) -> ModerationExportAction? {
        guard outcome == "ok", !["login", "logout"].contains(action) else { return nil }
        let stage = remote.hasPrefix("stage:") ? String(remote.dropFirst("stage:".count)) : bridge
        return ModerationExportAction(at: at, bridge: stage, action: action, target: target, by: principal)
    }
}

/// Another stage's moderation action as a row here (issue 35: the audit is visible site-wide): the action and target
/// as the console names them, `remote` the stage that made it (`stage:NAME`), `principal` who acted there, `at` when.
extension ConsoleAudit: SiteAuditing {
    public func record(_ record: SiteRecord) throws(SQLiteError) {
        let (action, target) = record.audit
        try append(ConsoleAuditEntry(
            at: Double(record.createdAt), action: action, target: target, remote: "stage:\(record.bridge)", outcome: "ok", principal: record.by))
    }
}

/// The console's audit table (`console_audit`) in the bridge database: every state-changing request, done or
/// refused. Bounded by count (``Limits/maxEntries``). One owner thread; not thread-safe.
public final class ConsoleAudit {
    public enum Limits {
        /// Rows kept; the oldest go first. A refused-request flood must not fill the disk.
        public static let maxEntries = 50_000
        /// Pruning runs every this many appends (a DELETE per row would double the cost).
        public static let pruneInterval = 128
        /// Longest action/target/outcome text stored (a hostile path or reason is cut, not stored whole).
        public static let maxFieldBytes = 512
    }

    static let component = "console_audit"
    static let schemaVersion: Int64 = 1
    private let database: SQLiteDatabase
    private let insert: SQLiteStatement
    private var appends = 0

    public init(database: SQLiteDatabase) throws(SQLiteError) {
        self.database = database
        try database.execute("CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS console_audit(
              id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
              remote TEXT NOT NULL, outcome TEXT NOT NULL, principal TEXT NOT NULL)
            """)
        try database.prepare("INSERT OR IGNORE INTO schema_versions(component, version) VALUES (?, ?)")
            .run([.text(Self.component), .integer(Self.schemaVersion)])
        insert = try database.prepare("INSERT INTO console_audit(at, action, target, remote, outcome, principal) VALUES (?,?,?,?,?,?)")
    }

    @discardableResult
    public func append(_ entry: ConsoleAuditEntry) throws(SQLiteError) -> Int64 {
        func cut(_ s: String) -> String { s.utf8.count <= Limits.maxFieldBytes ? s : String(decoding: s.utf8.prefix(Limits.maxFieldBytes), as: UTF8.self) }
        try insert.run([
            .real(entry.at), .text(cut(entry.action)), .text(cut(entry.target)), .text(cut(entry.remote)), .text(cut(entry.outcome)),
            .text(entry.principal),
        ])
        let id = database.lastInsertRowID
        appends += 1
        if appends >= Limits.pruneInterval {
            appends = 0
            try database.prepare("DELETE FROM console_audit WHERE id <= ?").run([.integer(id - Int64(Limits.maxEntries))])
        }
        return id
    }

    /// The rows made in `[since, until)`, oldest first (at most ``Limits/maxEntries`` are kept).
    public func entries(since: Double, until: Double) throws(SQLiteError) -> [ConsoleAuditEntry] {
        try database.prepare(
            "SELECT id, at, action, target, remote, outcome, principal FROM console_audit WHERE at >= ? AND at < ? ORDER BY at, id"
        ).query([.real(since), .real(until)], row: Self.entry)
    }

    static func entry(_ row: SQLiteStatement) -> ConsoleAuditEntry {
        ConsoleAuditEntry(
            id: row.int64(0), at: row.double(1), action: row.text(2), target: row.text(3), remote: row.text(4), outcome: row.text(5),
            principal: row.text(6))
    }

    /// Newest first, at most `limit`, optionally before row `beforeID` (paging).
    public func recent(limit: Int, beforeID: Int64? = nil) throws(SQLiteError) -> [ConsoleAuditEntry] {
        try database.prepare(
            "SELECT id, at, action, target, remote, outcome, principal FROM console_audit WHERE id < ? ORDER BY id DESC LIMIT ?"
        ).query([.integer(beforeID ?? Int64.max), .integer(Int64(max(0, min(limit, 1000))))], row: Self.entry)
    }
}
