import BotStorage
import Foundation
import Testing

@Suite("SQLite wrapper")
struct SQLiteTests {
    @Test("WAL on disk; prepared statements bind and read every value type")
    func roundTrip() throws {
        let path = NSTemporaryDirectory() + "sqlite-\(UUID().uuidString).db"
        let db = try SQLiteDatabase(path: path)
        let mode = try db.prepare("PRAGMA journal_mode").query { $0.text(0) }
        #expect(mode == ["wal"])
        try db.execute("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let insert = try db.prepare("INSERT INTO t VALUES (?,?,?,?,?)")
        try insert.run([.integer(42), .real(1.5), .text("é😀"), .blob([0, 1, 2]), .null])
        try insert.run([.integer(-1), .real(0), .text(""), .blob([]), .null])
        let rows = try db.prepare("SELECT i, r, s, b, n FROM t ORDER BY i DESC").query {
            ($0.int64(0), $0.double(1), $0.text(2), $0.blob(3), $0.isNull(4))
        }
        #expect(rows.count == 2)
        #expect(rows[0].0 == 42 && rows[0].1 == 1.5 && rows[0].2 == "é😀" && rows[0].3 == [0, 1, 2] && rows[0].4)
        #expect(rows[1].3 == [])
    }

    @Test("transactions roll back on error; constraint errors keep their code")
    func transactions() throws {
        let db = try SQLiteDatabase(path: ":memory:")
        try db.execute("CREATE TABLE k(id INTEGER PRIMARY KEY)")
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try db.transaction {
                try db.execute("INSERT INTO k VALUES (1)")
                throw Abort()
            }
        }
        #expect(try db.prepare("SELECT count(*) FROM k").query { $0.int64(0) } == [0])
        try db.execute("INSERT INTO k VALUES (1)")
        do {
            try db.execute("INSERT INTO k VALUES (1)")
            Issue.record("duplicate key accepted")
        } catch {
            #expect(error.isConstraint)
        }
        #expect(throws: SQLiteError.self) { try db.prepare("SELECT nonsense FROM nowhere") }
    }
}
