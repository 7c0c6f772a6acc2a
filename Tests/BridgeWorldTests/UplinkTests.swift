import BitchatWire
import BotStorage
import BotSupport
import Bridge
import BridgeApp
import BridgeCore
import BridgeTesting
import Mesh
import Nostr
import Testing

/// Mesh → Nostr in the in-process world: deposits published once, carried to another island, held while no relay is
/// connected and kept across a stop.
@Suite("World: uplink")
struct UplinkTests {
    @Test("a phone's toGateway deposit is published once, its author's signature intact")
    func channelDeposit() async throws {
        let site = Site(name: "deposit")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let phone = await site.phone("phone", on: [air])
        let gateway = await bridge.peerID
        #expect(await phone.knows(gateway))
        let event = try await phone.deposit("said on the mesh", geohash: "u4pruy", to: gateway)
        let published = try #require(await relay.waitForEvent { $0.id == event.id })
        #expect(published == event)
        #expect(relay.published.count { $0.id == event.id } == 1)
        await site.stop()
    }

    @Test("phone → toBridge deposit → relay → the other island's bridge → fromBridge on island 2, once, signature intact; nothing comes back to island 1")
    func depositCrossesIslands() async throws {
        let site = Site(name: "islands")
        let relay = try site.relay()
        let island1 = site.segment(), island2 = site.segment()
        let bridgeA = try await site.bridge("bridge-a", relays: [relay], segments: [island1])
        let bridgeC = try await site.bridge("bridge-c", relays: [relay], segments: [island2])
        let phone = await site.phone("phone", on: [island1])
        let reader1 = await site.phone("reader1", on: [island1])
        let reader2 = await site.phone("reader2", on: [island2])
        #expect(await phone.knows(await bridgeA.peerID))
        #expect(await reader2.knows(await bridgeC.peerID))
        let event = try await phone.deposit("hello from island one", geohash: "u4pruy", to: await bridgeA.peerID, rendezvous: true)
        #expect(await relay.waitForEvent { $0.id == event.id } != nil)
        #expect(await bridgeC.verdict(on: event.id.hex)?.kind == .passed)
        #expect(await site.advance(until: { await reader2.heard(carriers: [event.id]) }))
        let carrier = try #require(await reader2.carrier(of: event.id))
        #expect(carrier.payload.direction == .fromBridge)
        #expect(try UnverifiedEvent(json: String(decoding: carrier.payload.eventJSON, as: UTF8.self)).verified() == event)
        // The barrier: a second deposit made after it crossed too; by then a copy of the first would have.
        let barrier = try await phone.deposit("barrier", geohash: "u4pruy", to: await bridgeA.peerID, rendezvous: true)
        #expect(await bridgeC.verdict(on: barrier.id.hex) != nil)
        #expect(await site.advance(until: { await reader2.heard(carriers: [barrier.id]) }), "the barrier crossed")
        #expect(reader2.carriers(of: event.id).count == 1)
        #expect(reader1.carriers(of: event.id).isEmpty, "island 1 has the radio copy")
        #expect(!reader1.messages("hello from island one").isEmpty)
        await site.stop()
    }

    /// Operations issue §3 (flush pending uplinks at stop) and §2 (relay state on `/metrics`).
    @Test("a deposit held while the relay is down survives a graceful stop and reaches the relay exactly once after the restart; the relay's state and reconnect show on /metrics")
    func heldDepositSurvivesStop() async throws {
        let site = Site(name: "durable")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air])
        let phone = await site.phone("phone", on: [air])
        let gateway = await bridge.peerID
        #expect(await phone.knows(gateway))
        #expect(await bridge.runtime.metricsText().contains("bitchat_bridge_relay_up{relay=\"\(relay.url)\"} 1"))

        relay.goDown()
        #expect(await bridge.logLine("relay disconnected") != nil)
        // The pool's line comes before the bridge's own view: a deposit between the two was published to the relay that
        // had just gone (a flake under load).
        #expect(await site.advance(until: { await bridge.snapshot().connectedRelays == 0 }), "the bridge knows the relay is down")
        let held = try await phone.deposit("said while the relay was down", geohash: "u4pruy", to: gateway)
        #expect(await bridge.verdict(on: held.id.hex)?.kind == .passed)
        let down = await bridge.runtime.metricsText()
        #expect(down.contains("bitchat_bridge_queue_depth{queue=\"uplink\"} 1") && down.contains("bitchat_bridge_relay_up{relay=\"\(relay.url)\"} 0"))

        await bridge.stop()
        #expect(await bridge.logLine("pending uplinks flushed to the queue store") { $0.jsonLine.contains("\"uplinks.held\":1") } != nil)
        #expect(try Self.pendingUplinks(bridge.dataDirectory) == [held.id.hex])

        relay.comeBack()
        try await bridge.restart()
        #expect(await bridge.logLine("replaying pending uplinks") { $0.jsonLine.contains(held.id.hex) } != nil)
        #expect(await relay.waitForEvent { $0.id == held.id } != nil)
        let barrier = try await phone.deposit("said after the restart", geohash: "u4pruy", to: gateway)
        #expect(await bridge.verdict(on: barrier.id.hex)?.kind == .passed, "the restarted bridge verifies the phone by its pin")
        #expect(await relay.waitForEvent { $0.id == barrier.id } != nil)
        #expect(relay.published.count { $0.id == held.id } == 1, "published exactly once")
        #expect(await bridge.logLine("uplink acknowledged") { $0.jsonLine.contains(barrier.id.hex) } != nil)
        #expect(try Self.pendingUplinks(bridge.dataDirectory).isEmpty)

        // The relay goes away under the running bridge and comes back: one reconnect (after the pool's backoff, on
        // real time: the pool's own timers), shown on /metrics.
        let connects = bridge.log.lines.count { $0.message == "relay connected" }
        let mark = bridge.log.lines.all.count
        relay.goDown()
        #expect(await bridge.log.lines.first(after: mark) { $0.message == "relay disconnected" } != nil)
        relay.comeBack()
        #expect(await bridge.log.lines.count(connects + 1) { $0.message == "relay connected" }.count == connects + 1)
        let metrics = await bridge.runtime.metricsText()
        #expect(metrics.contains("bitchat_bridge_relay_reconnects_total{relay=\"\(relay.url)\"} 1") && metrics.contains("bitchat_bridge_relay_up{relay=\"\(relay.url)\"} 1"), "\(metrics)")
        await site.stop()
    }

    /// Rows of the durable uplink queue in a bridge's database, as event-id hex.
    static func pendingUplinks(_ dataDirectory: String) throws -> [String] {
        let database = try SQLiteDatabase(path: "\(dataDirectory)/bridge.sqlite3")
        defer { database.close() }
        return try database.prepare("SELECT event_id FROM pending_uplinks ORDER BY seq").query { Hex.encode($0.blob(0)) }
    }
}
