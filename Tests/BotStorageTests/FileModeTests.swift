import BotStorage
import Foundation
import Testing

@Suite("SQLite file modes")
struct FileModeTests {
    func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? Int) ?? -1
    }

    @Test("a new database and its -wal/-shm files are 0600 whatever the umask")
    func newFilesPrivate() throws {
        let path = NSTemporaryDirectory() + "mode-\(UUID().uuidString).sqlite3"
        let old = umask(0o022)
        defer { umask(old) }
        let db = try SQLiteDatabase(path: path)
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        #expect(try mode(path) == 0o600)
        #expect(try mode(path + "-wal") == 0o600)
        #expect(try mode(path + "-shm") == 0o600)
        db.close()
    }

    @Test("an existing world-readable database is tightened to 0600; an unwritable path is a named error")
    func existingTightened() throws {
        let path = NSTemporaryDirectory() + "mode-\(UUID().uuidString).sqlite3"
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        #expect(try mode(path) == 0o644)
        let db = try SQLiteDatabase(path: path)
        #expect(try mode(path) == 0o600)
        db.close()
        #expect(throws: SQLiteError.self) { try SQLiteDatabase(path: "/nonexistent-dir-\(UUID().uuidString)/x.sqlite3") }
    }
}
