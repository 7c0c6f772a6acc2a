import BitchatWire
import BotStorage
import Foundation
import MeshSync
import MeshSyncStorage
import Testing

@Suite("MeshSyncStorage: the stores survive a restart, bounded and pruned; the postID → Nostr event ledger")
struct DurableStoreTests {
    static func temporaryFile() -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("meshsync-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent("bridge.sqlite").path
    }

    static func answer(_ store: SQLiteSyncStore, types: SyncTypes, now: UInt64) -> [[UInt8]] {
        let request = RequestSyncPayload(p: 7, m: 1, data: [], types: types.rawValue)
        return SyncResponder.replySet(request, gossip: store, board: store, now: now).packets.map(\.replyFrame)
    }

    @Test("reopen the file: the same answer; expired rows pruned at open; damaged rows dropped")
    func reopen() throws {
        let path = Self.temporaryFile()
        let alice = Phone(1), bob = Phone(2)
        let now = t0 + 100_000
        let before: [[UInt8]]
        do {
            let store = try SQLiteSyncStore(database: SQLiteDatabase(path: path), now: now)
            store.record(alice.announce(at: now - 2000), now: now)
            for i in 0..<30 { store.record(alice.message("m\(i)", at: t0 + UInt64(i) * 1000), now: now) }
            // Written after her messages: the replay at open takes announces first.
            store.record(alice.announce(at: now - 1500), now: now)
            store.record(bob.announce(at: now - 1000), now: now)
            for i in 0..<4 { store.ingest(alice.post("post \(i)", id: UInt8(i), createdAt: t0 + UInt64(i), lifetime: 3_600_000), now: now) }
            store.ingest(alice.tombstone(id: 0, at: now), now: now)
            store.ingest(bob.tombstone(id: 77, at: now), now: now)
            before = Self.answer(store, types: [.announce, .message, .board], now: now)
            #expect(before.count == 2 + 30 + 3 + 2)
            #expect(try store.rowCount() == before.count)
        }
        // Restart moments later: the same frames, in the same order.
        let reopened = try SQLiteSyncStore(database: SQLiteDatabase(path: path), now: now + 1)
        #expect(Self.answer(reopened, types: [.announce, .message, .board], now: now + 1) == before)
        #expect(reopened.counters.restored == before.count)
        // The deleted post stays deleted after the restart.
        #expect(reopened.ingest(alice.post("post 0", id: 0, createdAt: t0, lifetime: 3_600_000), now: now + 2) == .rejected(.deleted))
        // Two hours later: the announces (10 min) are gone, and alice's messages with hers (a phone that never met her
        // would drop them), and the posts (1 h); bob's orphan tombstone stays (up to 7 d).
        let later = try SQLiteSyncStore(database: SQLiteDatabase(path: path), now: t0 + 2 * 3_600_000)
        let after = Self.answer(later, types: [.announce, .message, .board], now: t0 + 2 * 3_600_000)
        #expect(after.count == 1, "bob's orphan tombstone")
        #expect(try later.rowCount() == 1)
        #expect(later.counters.expiredAtOpen == before.count - 1)
    }

    @Test("bounded: 1 500 messages keep 1 000 rows; a damaged row is deleted and counted")
    func bounded() throws {
        let path = Self.temporaryFile()
        let alice = Phone(1)
        let now = t0 + 10_000_000
        do {
            let store = try SQLiteSyncStore(database: SQLiteDatabase(path: path), now: now)
            store.record(alice.announce(at: now), now: now)
            for i in 0..<1500 { store.record(alice.message("m\(i)", at: t0 + UInt64(i)), now: now) }
            #expect(try store.rowCount() == 1001)
            #expect(store.counters.writeFailures == 0)
        }
        let database = try SQLiteDatabase(path: path)
        try database.prepare("UPDATE sync_packets SET frame = x'0102' WHERE seq = (SELECT min(seq) FROM sync_packets WHERE kind = 'message')").run()
        let reopened = try SQLiteSyncStore(database: database, now: now)
        #expect(reopened.counters.unreadable == 1)
        #expect(reopened.packets(.message, now: now).count == 999)
        #expect(try reopened.rowCount() == 1000)
        #expect(reopened.packets(.message, now: now).last.map { String(decoding: $0.packet.payload, as: UTF8.self) } == "m1499")
    }

    @Test("ledger: postID → event id survives reopening, expires with the post, bounded")
    func ledger() throws {
        let path = Self.temporaryFile()
        let postID = [UInt8](repeating: 1, count: 16)
        let eventID = [UInt8](repeating: 0xEE, count: 32)
        do {
            let ledger = try BoardNostrLedger(database: SQLiteDatabase(path: path))
            try ledger.record(postID: postID, eventID: eventID, expiresAt: t0 + 1000, now: t0)
        }
        let ledger = try BoardNostrLedger(database: SQLiteDatabase(path: path))
        #expect(try ledger.eventID(forPost: postID, now: t0 + 999) == eventID)
        #expect(try ledger.eventID(forPost: postID, now: t0 + 1000) == nil)
        #expect(try ledger.forget(postID: postID))
        #expect(try !ledger.forget(postID: postID))
        for i in 0..<(BoardNostrLedger.Limits.maxRows + 50) {
            try ledger.record(postID: [UInt8(i & 0xff), UInt8(i >> 8)] + [UInt8](repeating: 0, count: 14), eventID: eventID,
                              expiresAt: t0 + 10_000 + UInt64(i), now: t0)
        }
        #expect(try ledger.count() == BoardNostrLedger.Limits.maxRows)
        #expect(try ledger.eventID(forPost: [0, 0] + [UInt8](repeating: 0, count: 14), now: t0) == nil, "the soonest-expiring went first")
    }
}
