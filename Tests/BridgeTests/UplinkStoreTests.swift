import BotCrypto
import BotStorage
import Bridge
import Foundation
import Nostr
import Testing

/// The durable uplink queue on a real SQLite file: order, bound, expiry, acknowledgement, damage.
@Suite("UplinkStore (pending uplinks across a stop)")
struct UplinkStoreTests {
    static let now: Int64 = 1_750_000_000
    let key = try! SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))

    func event(_ text: String, at: Int64 = now) throws -> NostrEvent {
        try UnsignedEvent(pubkey: key.publicKey, createdAt: at, kind: 20000, tags: [["g", "u4pruy"]], content: text)
            .signed(with: key)
    }

    func path() -> String { NSTemporaryDirectory() + "uplinks-\(UUID().uuidString).sqlite3" }

    @Test("replayed in arrival order (not created_at order); a second save keeps the first place; survives reopen; file 0600")
    func orderAndReopen() throws {
        let file = path()
        let a = try event("a", at: Self.now - 10), b = try event("b", at: Self.now - 300), c = try event("c", at: Self.now - 5)
        do {
            let store = try UplinkStore(database: SQLiteDatabase(path: file))
            for e in [a, b, c, a] { try store.save(e) }
            #expect(try store.count() == 3)
        }
        let reopened = try UplinkStore(database: SQLiteDatabase(path: file))
        let pending = try reopened.pending(now: Self.now)
        #expect(pending.map(\.id) == [a.id, b.id, c.id])
        #expect(pending == [a, b, c])
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        // Pending does not consume: a stop before any OK replays them again.
        #expect(try reopened.pending(now: Self.now).count == 3)
    }

    @Test("acknowledged (removed) uplinks are not replayed; removing an unknown id is a no-op")
    func acknowledgement() throws {
        let store = try UplinkStore(database: SQLiteDatabase(path: path()))
        let a = try event("a"), b = try event("b")
        try store.save(a)
        try store.save(b)
        #expect(try store.remove(a.id))
        #expect(try !store.remove(a.id))
        #expect(try store.pending(now: Self.now) == [b])
    }

    @Test("bound: maxRows kept, the (maxRows + 1)-th drops the oldest and counts it")
    func bound() throws {
        let store = try UplinkStore(database: SQLiteDatabase(path: path()))
        let events = try (0...UplinkStore.Limits.maxRows).map { try event("message \($0)") }
        var dropped = 0
        for e in events.prefix(UplinkStore.Limits.maxRows) { dropped += try store.save(e) }
        #expect(dropped == 0)
        #expect(try store.count() == UplinkStore.Limits.maxRows)
        #expect(try store.save(events[UplinkStore.Limits.maxRows]) == 1)
        #expect(store.counters.dropped == 1)
        let pending = try store.pending(now: Self.now)
        #expect(pending.count == UplinkStore.Limits.maxRows)
        #expect(pending.first?.id == events[1].id && pending.last?.id == events.last?.id)
    }

    @Test("expiry: created maxAgeSeconds ago is replayed, one second older is deleted and counted")
    func expiry() throws {
        let store = try UplinkStore(database: SQLiteDatabase(path: path()))
        let edge = try event("edge", at: Self.now - UplinkStore.Limits.maxAgeSeconds)
        let stale = try event("stale", at: Self.now - UplinkStore.Limits.maxAgeSeconds - 1)
        try store.save(stale)
        try store.save(edge)
        #expect(try store.pending(now: Self.now) == [edge])
        #expect(store.counters.expired == 1)
        #expect(try store.count() == 1)
    }

    @Test("a damaged row (content changed, signature no longer verifies) is deleted and counted, never returned")
    func damagedRow() throws {
        let file = path()
        let store = try UplinkStore(database: SQLiteDatabase(path: file))
        let good = try event("good"), bad = try event("bad")
        try store.save(bad)
        try store.save(good)
        let database = try SQLiteDatabase(path: file)
        try database.prepare("UPDATE pending_uplinks SET event_json = replace(event_json, '\"bad\"', '\"evil\"')").run()
        try database.prepare("INSERT INTO pending_uplinks(event_id, created_at, event_json) VALUES (x'00', ?, 'not json')")
            .run([.integer(Self.now)])
        #expect(try store.pending(now: Self.now) == [good])
        #expect(store.counters.unreadable == 2)
        #expect(try store.count() == 1)
    }
}
