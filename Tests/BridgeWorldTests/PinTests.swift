import BotCrypto
import BotSupport
import BridgeApp
import BridgeCore
import BridgeTesting
import Identity
import IdentityCache
import Mesh
import Nostr
import Testing

/// Trust through the stranger cache (the reach issue) in the in-process world: the bridge on two islands, so
/// whatever the reader on island B hears from island A, the bridge relayed; with the text mirror up, what the bridge
/// judged and carried shows on the channel. The bridge's live table keeps a silent peer only 5 s here
/// (`BRIDGE_MESH_PEER_TIMEOUT`), so seconds of silence stand for the minutes of the issue.
@Suite("World: pins")
struct PinTests {
    /// The channel's copies of `text` (the bridge's text mirror up).
    static func mirrored(_ relay: LoopbackRelay, _ text: String) -> Int { relay.events.filter { $0.kind == 20000 && $0.content == text }.count }

    @Test("""
        a phone that announced once is carried every time it speaks after the table forgot it; a copied-Noise-key \
        impostor is refused after the real phone's silence and after a bridge restart, counted and kept in the identity record
        """)
    func slowAnnouncerAndImpostor() async throws {
        let site = Site(name: "pins")
        let relay = try site.relay()
        let islandA = site.segment(), islandB = site.segment()
        let bridge = try await site.bridge(
            "bridge", relays: [relay], segments: [islandA, islandB], settings: ["BRIDGE_TEXT_MIRROR": "up", "BRIDGE_MESH_PEER_TIMEOUT": "5"])
        let reader = await site.phone("reader", on: [islandB])
        #expect(await reader.meets(bridge))

        // An Android phone on a low battery: it announces when its link comes up, then not for 300 s; it speaks every
        // 7 s, each time after more than the table's 5 s.
        let slow = await site.phone("slow", on: [islandA], app: .androidLowBattery)
        #expect(await slow.meets(bridge))
        // The bridge relays the announce to island B after its jitter.
        #expect(await site.advance(until: { await reader.knows(slow.id, within: 0.05) }), "the reader learns the phone first, so a relayed line is shown")
        for text in ["slow one", "slow two", "slow three"] {
            await site.advance(by: 7_000)
            let id = await slow.say(text)
            #expect(await bridge.verdict(on: id)?.kind == .passed, "\(text) judged")
            #expect(await site.advance(until: { await reader.heard(messages: [id]) }), "\(text) relayed to island B")
            #expect(await relay.waitForEvent { $0.content == text } != nil, "\(text) carried to the channel")
            #expect(Self.mirrored(relay, text) == 1 && reader.count(of: id) == 1, "\(text) once each way")
        }
        await slow.leave()
        await site.advance(by: 6_000)

        // An impostor: the same Noise key, another signing key. Refused, counted, kept in the record; logged once.
        let record = try IdentityKey.mesh(noiseKey: slow.noiseKey.publicKey)
        try await Self.impostorIsRefused(site, slow, bridge: bridge, relay: relay, reader: reader, text: "impostor before restart")
        let refusedOnce = try #require(try bridge.identity(record)).pinRefusals
        #expect(refusedOnce >= 1)
        let metrics = try await bridge.metrics()
        #expect(metrics.total("bitchat_bridge_identity_pin_refusals_total") > 0, "the refusal on /metrics")
        for event in ["verified_by_pin", "refused"] {
            #expect(metrics.total("bitchat_bridge_mesh_pins_total") { $0["event"] == event } >= 1, "\(event)")
        }
        #expect(bridge.log.lines.all.filter { $0.message.hasPrefix("announce refused") }.count == 1)

        // After a restart the pin comes from the cache alone; the refusal is not logged again for this identity.
        let mark = bridge.log.lines.all.count
        try await bridge.restart()
        try await Self.impostorIsRefused(site, slow, bridge: bridge, relay: relay, reader: reader, text: "impostor after restart")
        #expect(try #require(try bridge.identity(record)).pinRefusals > refusedOnce)
        #expect(bridge.log.lines.all[mark...].filter { $0.message.hasPrefix("announce refused") }.isEmpty)
        await site.stop()
    }

    /// An impostor of `real` announces and speaks; a barrier from another phone crosses after it. The impostor's line
    /// is neither carried nor relayed, and no announce with its name reaches island B.
    static func impostorIsRefused(
        _ site: Site, _ real: TestPhone, bridge: TestBridge, relay: LoopbackRelay, reader: TestPhone, text: String
    ) async throws {
        let impostor = await site.phone("impostor", on: real.segments, noiseKey: real.noiseKey, signingKey: .generate())
        let id = await impostor.say(text)
        let organiser = await site.phone("organiser-\(text.count)-\(site.now)", on: real.segments)
        #expect(await organiser.meets(bridge))
        // The reader learns the organiser first (the bridge relays its announce after a jitter): a line from a peer
        // it does not know yet is not shown, and its relayed copy is then a duplicate.
        #expect(await site.advance(until: { await reader.knows(organiser.id, within: 0.05) }), "the reader knows the organiser")
        let barrier = await organiser.say("barrier after \(text)")
        #expect(await bridge.verdict(on: barrier)?.kind == .passed)
        #expect(await site.advance(until: { await reader.heard(messages: [barrier]) }), "the barrier crossed")
        await impostor.leave()
        await organiser.leave()
        #expect(Self.mirrored(relay, text) == 0, "the impostor's line was carried")
        #expect(reader.count(of: id) == 0, "the impostor's line was relayed")
        #expect(!reader.heard.all.contains { if case .peerVerified(let peer) = $0 { peer.nickname == "impostor" } else { false } },
                "the impostor's announce was relayed")
    }
}
