import BotProcess
import BotStorage
import Foundation
import IdentityCache
import Testing
import Identity

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

    /// The identity tables exactly as schema version 1 shipped them (frozen here: the migration must read this).
    static let schemaV1 = """
        CREATE TABLE identity_records(
            kind INTEGER NOT NULL, key BLOB NOT NULL, noise_key BLOB, signing_key BLOB, peer_id INTEGER, nickname TEXT,
            first_seen_ms INTEGER, last_seen_day INTEGER, allowed INTEGER NOT NULL DEFAULT 0,
            verified INTEGER NOT NULL DEFAULT 0, blocked INTEGER NOT NULL DEFAULT 0, trust INTEGER NOT NULL DEFAULT 0,
            petname TEXT, notes TEXT, stranger INTEGER NOT NULL, PRIMARY KEY(kind, key)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX identity_records_peer_id ON identity_records(peer_id) WHERE peer_id IS NOT NULL;
        CREATE INDEX identity_records_nickname ON identity_records(nickname) WHERE nickname IS NOT NULL;
        CREATE INDEX identity_records_stranger_stamp ON identity_records(last_seen_day) WHERE stranger = 1;
        """

    @Test func aVersion1DatabaseMigratesWithItsDataIntact() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/bridge.sqlite3"
        let stranger = try record(1)
        let unstamped = try record(2)
        var annotated = try record(3)
        annotated.annotations = Annotations(blocked: true, trust: .casual, petname: "pet", notes: "note")
        do {
            let old = try SQLiteDatabase(path: path)
            try old.execute("CREATE TABLE schema_versions(component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
            try old.execute(Self.schemaV1)
            try old.execute("INSERT INTO schema_versions VALUES('identity', 1)")
            let insert = try old.prepare(
                """
                INSERT INTO identity_records(kind, key, noise_key, signing_key, peer_id, nickname, first_seen_ms, last_seen_day,
                    allowed, verified, blocked, trust, petname, notes, stranger)
                VALUES(?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?)
                """)
            for (item, stamp) in [(stranger, Optional(day(3))), (unstamped, nil), (annotated, nil)] {
                let a = item.annotations
                try insert.run([
                    .integer(Int64(item.key.kind.rawValue)), .blob(item.key.bytes), .blob(item.pins?.noiseKey ?? []),
                    .blob(item.pins?.signingKey ?? []), .integer(Int64(item.peerID ?? 0)), .text(item.nickname ?? ""),
                    .integer(item.firstSeen?.millisecondsSince1970 ?? 0), stamp.map { .integer(Int64($0.number)) } ?? .null,
                    .integer(a.blocked ? 1 : 0), .integer(Int64(a.trust.rawValue)), a.petname.map { .text($0) } ?? .null,
                    a.notes.map { .text($0) } ?? .null, .integer(item.isStranger ? 1 : 0),
                ])
            }
        }
        let store = try SQLiteIdentityStore(path: path)
        var stamped = stranger
        stamped.lastSeen = day(3)
        #expect(try store.record(try meshKey(1)) == stamped)
        #expect(try store.record(try meshKey(2)) == unstamped)
        #expect(try store.record(try meshKey(3)) == annotated)
        #expect(try store.signingKey(peerID: 0x1000_0003) == bytes32(3, salt: 0x53))
        #expect(try store.keys(nickname: "n2", limit: 5) == [try meshKey(2)])
        #expect(try store.strangerCount() == 2)
        #expect(try store.strangerRows(stampedAtOrBefore: nil).sorted { $0.key < $1.key } == [
            RetentionRow(key: try meshKey(1), lastSeen: day(3), firstSeen: stranger.firstSeen),
            RetentionRow(key: try meshKey(2), lastSeen: nil, firstSeen: unstamped.firstSeen),
        ].sorted { $0.key < $1.key })
        #expect(try store.strangerRows(stampedAtOrBefore: day(3)).map(\.key) == [try meshKey(1)])
        #expect(try store.unstampedStrangerKeys() == [try meshKey(2)])
        #expect(try store.integrityCheck() == ["ok"])
        // v3's refusal columns take writes and read back after a reopen.
        var refused = stamped
        refused.pinRefusals = 3
        refused.lastPinRefusal = at(4)
        try store.put(refused)
        #expect(try SQLiteIdentityStore(path: path).record(try meshKey(1)) == refused)
        let database = try SQLiteDatabase(path: path)
        let version = try database.prepare("SELECT version FROM schema_versions WHERE component = 'identity'").query { $0.int64(0) }
        #expect(version == [Int64(SQLiteIdentityStore.schemaVersion)])
        let indexes = try database.prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'identity_records' AND sql IS NOT NULL ORDER BY name"
        ).query { $0.text(0) }
        #expect(indexes == ["identity_records_nickname", "identity_records_peer_id", "identity_records_strangers"])
        // The retention reads are answered from the strangers' index alone (no row of the table is visited).
        for sql in [
            "SELECT kind, key, last_seen_day, first_seen_ms FROM identity_records WHERE stranger = 1",
            "SELECT COUNT(*) FROM identity_records WHERE stranger = 1",
        ] {
            let plan = try database.prepare("EXPLAIN QUERY PLAN " + sql).query { $0.text(3) }
            #expect(plan.contains { $0.contains("COVERING INDEX identity_records_strangers") }, "\(sql): \(plan)")
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

    @Test func killedBetweenWritesTheDatabaseOpensWithNothingHalfWritten() async throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let child = try ChildProcess(
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path,
            ["--testing-library", "swift-testing", "--filter", "crashChildWriter"],
            environment: [Self.childVariable: directory], name: "crash-child")
        // Generous: in a full test run (every suite in parallel, 2 cores, fsync-heavy neighbours) the child
        // has needed ~80 s to get here; alone it takes well under a second.
        try await child.waitForLine(timeout: .seconds(300), "the child wrote its first 200 transactions") { $0.contains("CHILD-READY") }
        child.stop(signal: SIGKILL)
        #expect(try await child.waitForExit() == SIGKILL)

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
