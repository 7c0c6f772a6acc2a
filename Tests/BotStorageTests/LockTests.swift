import BotProcess
import BotStorage
import Foundation
import Testing

/// A second connection must not drop the locks the first one holds (issue 14: "database checkpoint at stop
/// failed (522)"). A WAL connection keeps a shared lock on SQLite's SHARED byte range of the database file
/// for as long as it is open; another process closing its last connection takes that range exclusively to
/// learn whether it is alone, and if it is, checkpoints and deletes the WAL. POSIX drops every lock a process
/// holds on a file when the process closes *any* descriptor of it — so opening a connection must never open
/// and close the database file itself.
@Suite("SQLite locks across connections")
struct LockTests {
    /// A separate process (python3's fcntl) asks whether the SHARED range is free to lock exclusively.
    static let probe = """
        import fcntl, os, sys
        fd = os.open(sys.argv[1], os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000000 + 2, 0)
            print("free")
        except OSError:
            print("held")
        """

    func sharedRange(_ path: String) throws -> String {
        let result = try ChildProcess.run("/usr/bin/python3", ["-c", Self.probe, path])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("opening a second connection keeps the first connection's shared lock on the database file")
    func secondConnectionKeepsLocks() throws {
        let path = NSTemporaryDirectory() + "locks-\(UUID().uuidString).sqlite3"
        let first = try SQLiteDatabase(path: path)
        try first.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        #expect(try sharedRange(path) == "held")
        let second = try SQLiteDatabase(path: path)
        #expect(try sharedRange(path) == "held", "the second open dropped the first connection's lock")
        // An existing world-readable file is still tightened without opening it.
        chmod(path, 0o644)
        let third = try SQLiteDatabase(path: path)
        #expect(try sharedRange(path) == "held")
        #expect(((try FileManager.default.attributesOfItem(atPath: path))[.posixPermissions] as? Int) == 0o600)
        third.close()
        second.close()
        first.close()
    }
}
