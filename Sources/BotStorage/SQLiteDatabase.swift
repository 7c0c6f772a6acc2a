import CSQLite

#if canImport(Glibc)
import Glibc
#endif

/// A SQLite failure, keeping the result code, SQLite's message and what we were doing.
public struct SQLiteError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The primary or extended SQLite result code (`SQLITE_FULL` = 13 when the disk is full).
    public let code: Int32
    public let message: String
    public let operation: String

    public var isDiskFull: Bool { code & 0xff == SQLITE_FULL }
    public var isConstraint: Bool { code & 0xff == SQLITE_CONSTRAINT }

    public var description: String { "SQLite \(operation) failed (\(code)): \(message)" }

    public init(code: Int32, message: String, operation: String) {
        self.code = code
        self.message = message
        self.operation = operation
    }
}

/// One SQLite connection. Not thread-safe by design: it is owned by one actor or one thread
/// (the store that uses it), and statements are prepared once and reused.
public final class SQLiteDatabase {
    private var handle: OpaquePointer?
    public let path: String

    /// Opens (creating if needed) the database at `path` (`:memory:` for an in-memory database), with
    /// WAL journaling, `synchronous=NORMAL` (durable across process crashes; a power loss may lose the
    /// last transactions but never corrupts), foreign keys on and a 5 s busy timeout.
    ///
    /// File mode: the database holds who said what (moderation log, identities), so a new file is created
    /// 0600 — SQLite gives its `-wal`/`-shm` files the main file's mode — and an existing file readable by
    /// group or others is tightened to 0600 (the data directory itself is 0700).
    public init(path: String) throws(SQLiteError) {
        self.path = path
        if path != ":memory:" && !path.isEmpty { try Self.ensurePrivateFile(path) }
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw SQLiteError(code: rc, message: message, operation: "open \(path)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5000)
        if path != ":memory:" { try execute("PRAGMA journal_mode=WAL") }
        try execute("PRAGMA synchronous=NORMAL")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit { close() }

    /// Creates the file 0600 if it does not exist, or tightens an existing one to 0600 — by path (`stat` +
    /// `chmod`), never by opening it: closing any descriptor of a file drops every POSIX lock this process
    /// holds on it, including the shared lock each open WAL connection keeps on the database file. With that
    /// lock gone another process's last connection believes it is alone, checkpoints and deletes the WAL
    /// under our feet, and our next read fails (`SQLITE_IOERR_SHORT_READ`, 522: the stop's checkpoint failed
    /// that way about once in 25 stops while a CLI closed its connection). A new file is created with
    /// `O_EXCL`, so no other connection can hold a lock on it yet.
    private static func ensurePrivateFile(_ path: String) throws(SQLiteError) {
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & 0o077 != 0 { _ = chmod(path, 0o600) }
            return
        }
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            Glibc.close(fd)
            return
        }
        let code = errno
        // Created by someone else in between: then it exists, and its mode is tightened like any other.
        if code == EEXIST, stat(path, &info) == 0 {
            if info.st_mode & 0o077 != 0 { _ = chmod(path, 0o600) }
            return
        }
        throw SQLiteError(code: SQLITE_CANTOPEN, message: String(cString: strerror(code)), operation: "create \(path)")
    }

    /// Closes the connection (finalizing nothing: every ``SQLiteStatement`` must be gone first).
    public func close() {
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    var raw: OpaquePointer {
        guard let handle else { preconditionFailure("SQLiteDatabase used after close()") }
        return handle
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(raw, sql, nil, nil, &errorMessage)
        guard rc == SQLITE_OK else {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(raw))
            sqlite3_free(errorMessage)
            throw SQLiteError(code: rc, message: message, operation: "exec")
        }
    }

    /// Prepares a statement for repeated use.
    public func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        try SQLiteStatement(database: self, sql: sql)
    }

    /// Runs `body` in a transaction (`BEGIN IMMEDIATE`), committing on success and rolling back on error.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE.
    public var changes: Int { Int(sqlite3_changes(raw)) }

    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(raw) }

    func error(_ rc: Int32, _ operation: String) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(raw)), operation: operation)
    }
}

/// A value bound to or read from a statement.
public enum SQLiteValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// A prepared statement. Bind with ``bind(_:)``, iterate with ``step()``, read columns, ``reset()``.
public final class SQLiteStatement {
    private let database: SQLiteDatabase
    private var handle: OpaquePointer?
    public let sql: String

    init(database: SQLiteDatabase, sql: String) throws(SQLiteError) {
        self.database = database
        self.sql = sql
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(database.raw, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw database.error(rc, "prepare \(sql)") }
        handle = statement
    }

    deinit { sqlite3_finalize(handle) }

    /// Resets the statement and binds `values` to parameters 1…n.
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .integer(let i): rc = sqlite3_bind_int64(handle, index, i)
            case .real(let d): rc = sqlite3_bind_double(handle, index, d)
            case .text(let s): rc = sqlite3_bind_text(handle, index, s, -1, CSQLite_transient())
            case .blob(let b):
                rc = b.withUnsafeBytes {
                    // A zero-length blob needs a non-null pointer to be stored as a blob, not NULL.
                    sqlite3_bind_blob(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), CSQLite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw database.error(rc, "bind \(index) in \(sql)") }
        }
    }

    /// Advances to the next row; false when done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            sqlite3_reset(handle)
            throw database.error(rc, "step \(sql)")
        }
    }

    /// Binds, runs to completion and resets (for statements without rows).
    public func run(_ values: [SQLiteValue] = []) throws(SQLiteError) {
        try bind(values)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Binds, collects every row with `row`, and resets.
    public func query<T>(_ values: [SQLiteValue] = [], row: (SQLiteStatement) -> T) throws(SQLiteError) -> [T] {
        try bind(values)
        var out: [T] = []
        while try step() { out.append(row(self)) }
        sqlite3_reset(handle)
        return out
    }

    public func reset() { sqlite3_reset(handle) }

    public func isNull(_ column: Int) -> Bool { sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL }

    public func int64(_ column: Int) -> Int64 { sqlite3_column_int64(handle, Int32(column)) }

    public func double(_ column: Int) -> Double { sqlite3_column_double(handle, Int32(column)) }

    public func text(_ column: Int) -> String {
        guard let pointer = sqlite3_column_text(handle, Int32(column)) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, Int32(column)))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    public func blob(_ column: Int) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, Int32(column)))
        guard count > 0, let pointer = sqlite3_column_blob(handle, Int32(column)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
