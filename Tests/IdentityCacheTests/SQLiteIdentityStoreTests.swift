import BotStorage
import Foundation
import IdentityCache
import Testing

/// What only the SQLite store has: a file that survives restarts and crashes, and schema migrations.
@Suite("SQLite identity store")
struct SQLiteIdentityStoreTests {
    static let childVariable = "IDENTITY_CRASH_CHILD_DIR"

    private func record(_ i: Int) throws -> IdentityRecord {
        IdentityRecord(
            key: try meshKey(i), pins: try MeshPins(noiseKey: bytes32(i, salt: 0x4d), signingKey: bytes32(i, salt: 0x53)),
            peerID: UInt64(0x1000_0000 + i), nickname: "n\(i)", firstSeen: at(0, ms: Int64(i)), lastSeen: nil)
    }

    @Test func recordsAndMigrationsSurviveReopening() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/bridge.sqlite3"
        do {
            let store = try SQLiteIdentityStore(path: path)
            try store.put(try record(1))
        }
        let store = try SQLiteIdentityStore(path: path)
        #expect(try store.record(try meshKey(1)) == (try record(1)))
        #expect(try store.signingKey(peerID: 0x1000_0001) == bytes32(1, salt: 0x53))
        let database = try SQLiteDatabase(path: path)
        let versions = try database.prepare("SELECT component, version FROM schema_versions").query { ($0.text(0), $0.int64(1)) }
        #expect(versions.count == 1)
        #expect(versions.first?.0 == "identity")
        #expect(versions.first?.1 == Int64(SQLiteIdentityStore.schemaVersion))
        let mode = try database.prepare("PRAGMA journal_mode").query { $0.text(0) }
        #expect(mode == ["wal"])
    }

    @Test func sharesTheDatabaseWithOtherComponents() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/bridge.sqlite3"
        let other = try SQLiteDatabase(path: path)
        try other.execute("CREATE TABLE IF NOT EXISTS schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        try other.execute("INSERT INTO schema_versions VALUES('modlog', 3)")
        let store = try SQLiteIdentityStore(path: path)
        try store.put(try record(1))
        let rows = try other.prepare("SELECT component, version FROM schema_versions ORDER BY component").query { "\($0.text(0))=\($0.int64(1))" }
        #expect(rows == ["identity=\(SQLiteIdentityStore.schemaVersion)", "modlog=3"])
    }

    @Test func aNewerSchemaIsRefusedNotOverwritten() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/bridge.sqlite3"
        _ = try SQLiteIdentityStore(path: path)
        let database = try SQLiteDatabase(path: path)
        try database.execute("UPDATE schema_versions SET version = 99 WHERE component = 'identity'")
        #expect(throws: IdentityStoreError.schemaTooNew(found: 99, known: SQLiteIdentityStore.schemaVersion)) {
            _ = try SQLiteIdentityStore(path: path)
        }
    }

    @Test func aCorruptRowIsANamedErrorNotACrash() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/bridge.sqlite3"
        let store = try SQLiteIdentityStore(path: path)
        try store.put(try record(1))
        let database = try SQLiteDatabase(path: path)
        try database.execute("UPDATE identity_records SET signing_key = x'0102'")
        #expect(throws: IdentityStoreError.self) { _ = try store.record(try meshKey(1)) }
        try database.execute("UPDATE identity_records SET kind = 7")
        #expect(throws: IdentityStoreError.self) { _ = try store.strangerRows(stampedAtOrBefore: nil) }
    }

    /// The child half of the crash test: writes sightings in transactions until the parent kills it.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[Self.childVariable] != nil))
    func crashChildWriter() throws {
        let directory = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
        let store = try SQLiteIdentityStore(path: directory + "/bridge.sqlite3")
        for i in 0..<2_000_000 {
            try store.transaction { () throws(IdentityStoreError) in
                try store.put(try! record(i))
                // A second statement in the same transaction: a torn write would leave a row without its stamp.
                try store.setLastSeen(day(i % 1000), keys: [try! meshKey(i)])
            }
            if i == 200 { print("CHILD-READY") }
        }
    }

    @Test func killedBetweenWritesTheDatabaseOpensWithNothingHalfWritten() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["--testing-library", "swift-testing", "--filter", "crashChildWriter"]
        child.environment = ProcessInfo.processInfo.environment.merging([Self.childVariable: directory]) { $1 }
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        try child.run()
        var seen = ""
        while !seen.contains("CHILD-READY") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        #expect(seen.contains("CHILD-READY"), "the child wrote its first 200 transactions")
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(child.terminationReason == .uncaughtSignal)

        let store = try SQLiteIdentityStore(path: directory + "/bridge.sqlite3")
        #expect(try store.integrityCheck() == ["ok"])
        let count = try store.count()
        #expect(count > 200)
        var after: IdentityKey?
        var checked = 0
        while true {
            let page = try store.records(.all, limit: 1_000, after: after)
            guard let last = page.last else { break }
            after = last.key
            for row in page {
                guard let nickname = row.nickname, let i = Int(nickname.dropFirst()) else {
                    Issue.record("row without its nickname")
                    continue
                }
                #expect(row == (try record(i).with(lastSeen: day(i % 1000))), "row \(i) is whole")
                checked += 1
            }
        }
        #expect(checked == count)
        // And the store is writable again.
        try store.put(try record(count + 10))
    }
}

extension IdentityRecord {
    fileprivate func with(lastSeen: UTCDay?) -> IdentityRecord {
        var copy = self
        copy.lastSeen = lastSeen
        return copy
    }
}
