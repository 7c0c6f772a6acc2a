import BitchatWire
import BotStorage
import Bridge
import BridgeCore
import Mesh
import Testing

/// Hidden messages kept for a release across a restart: 24 hours and 1,000 messages, damaged rows dropped.
@Suite("Held message store")
struct HeldMessageStoreTests {
    static let now = 1_750_000_000.0

    func line(_ i: Int) -> HeldMessages.Held {
        .meshMessage(
            MeshPublicMessage(
                sender: MeshPeerID(bytes: [UInt8](repeating: UInt8(i % 256), count: 8)), nickname: "n\(i)", text: "line \(i)",
                timestamp: 1_750_000_000_000 + UInt64(i), stableID: "id\(i)", ttl: 7, noisePublicKey: [UInt8](repeating: 1, count: 32)),
            senderKey: "key\(i)")
    }

    @Test("kept rows read back equal; past 1,000 the oldest go; past 24 h a row goes; a released or damaged row is not returned")
    func bounds() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        let store = try HeldMessageStore(database: database)
        try store.keep(line(0), at: Self.now - 25 * 3600)
        for i in 1...1_005 { try store.keep(line(i), at: Self.now + Double(i)) }
        let held = try store.held(now: Self.now + 2_000)
        #expect(held.count == 1_000 && held.first == line(6) && held.last == line(1_005))
        try store.remove("id6")
        try database.execute("UPDATE held_messages SET body = '{\"kind\":\"mesh_message\"}' WHERE message_id = 'id7'")
        #expect(try store.held(now: Self.now + 2_000).first == line(8))
    }
}
