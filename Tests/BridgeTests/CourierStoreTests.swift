import BitchatWire
import BotStorage
import Bridge
import Courier
import Testing

/// The courier gateway's rows across a restart (COURIER.md §3.5, §4.2): what was stored reads back equal, what
/// expired is left out and deleted, and the seen ids stay within their lifetime and capacity.
@Suite("Courier store")
struct CourierStoreTests {
    static let t0: UInt64 = 1_750_000_000_000
    static let lifetime: UInt64 = 86_400_000

    static func envelope(_ i: Int, expiryMs: UInt64) -> CourierEnvelope {
        CourierEnvelope(recipientTag: [UInt8](repeating: UInt8(i), count: 16), expiryMs: expiryMs, ciphertext: [UInt8](repeating: 0xAB, count: 40 + i))
    }

    @Test("held and pending mail read back equal after a restart; expired rows are left out and deleted; removed rows stay gone")
    func roundTrip() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        let store = try CourierStore(database: database)
        func apply(_ action: CourierGateway.Action) throws { try store.apply(action, seenLifetimeMs: Self.lifetime, seenCapacity: 100) }
        let kept = CourierGateway.Held(
            id: "h1", envelope: Self.envelope(1, expiryMs: Self.t0 + 3_600_000), depositor: MeshPeerID(rawValue: 7), depositedMs: Self.t0,
            publishedMs: Self.t0 + 500)
        let stale = CourierGateway.Held(id: "h2", envelope: Self.envelope(2, expiryMs: Self.t0 + 1_000), depositor: MeshPeerID(rawValue: 7), depositedMs: Self.t0)
        let gone = CourierGateway.Held(id: "h3", envelope: Self.envelope(3, expiryMs: Self.t0 + 3_600_000), depositor: MeshPeerID(rawValue: 8), depositedMs: Self.t0)
        let waiting = CourierGateway.Pending(
            eventID: "e1", peer: MeshPeerID(rawValue: 9), envelope: try Self.envelope(4, expiryMs: Self.t0 + 3_600_000).encode(), expiryMs: Self.t0 + 3_600_000)
        let late = CourierGateway.Pending(
            eventID: "e2", peer: MeshPeerID(rawValue: 9), envelope: try Self.envelope(5, expiryMs: Self.t0 + 1_000).encode(), expiryMs: Self.t0 + 1_000)
        for action: CourierGateway.Action in [.storeHeld(kept), .storeHeld(stale), .storeHeld(gone), .storePending(waiting), .storePending(late), .removeHeld("h3")] {
            try apply(action)
        }
        try apply(.rememberSeen(eventID: "s1", atMs: Self.t0))

        let restored = try store.restore(nowMs: Self.t0 + 2_000, seenLifetimeMs: Self.lifetime)
        #expect(restored.held.map(\.id) == ["h1"])
        #expect(restored.held.first?.envelope == kept.envelope && restored.held.first?.publishedMs == kept.publishedMs)
        #expect(restored.held.first?.depositor == kept.depositor)
        #expect(restored.pending.map(\.eventID) == ["e1"] && restored.pending.first?.envelope == waiting.envelope)
        #expect(restored.seen.map(\.id) == ["s1"])
        let rows = try database.prepare("SELECT (SELECT count(*) FROM courier_held), (SELECT count(*) FROM courier_pending)")
            .query { [$0.int64(0), $0.int64(1)] }
        #expect(rows == [[1, 1]])
    }

    @Test("seen ids older than their lifetime go at the next write; past the capacity the oldest go within one trim period")
    func seenBounds() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        let store = try CourierStore(database: database)
        let capacity = 100
        func remember(_ i: Int, at atMs: UInt64) throws {
            try store.apply(.rememberSeen(eventID: "s\(i)", atMs: atMs), seenLifetimeMs: Self.lifetime, seenCapacity: capacity)
        }
        func count() throws -> Int64 { try database.prepare("SELECT count(*) FROM courier_seen").query { $0.int64(0) }.first ?? -1 }
        try remember(0, at: Self.t0)
        try remember(1, at: Self.t0 + Self.lifetime + 1)
        #expect(try count() == 1)
        let writes = CourierStore.trimEvery + capacity
        for i in 2..<(2 + writes) { try remember(i, at: Self.t0 + Self.lifetime + UInt64(i)) }
        // Never more than capacity + trimEvery rows; after the trim the newest `capacity` stay.
        #expect(try count() <= Int64(capacity + CourierStore.trimEvery))
        let restored = try store.restore(nowMs: Self.t0 + Self.lifetime + UInt64(writes + 2), seenLifetimeMs: Self.lifetime)
        #expect(restored.seen.last?.id == "s\(writes + 1)")
        #expect(restored.seen.count >= capacity)
        let oldest = try #require(restored.seen.first)
        #expect(oldest.id != "s1", "the oldest id is cut once the table passed its capacity")
    }
}
