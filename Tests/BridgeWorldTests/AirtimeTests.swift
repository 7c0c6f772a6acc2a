import BotCrypto
import BridgeCore
import BridgeTesting
import Identity
import Nostr
import Testing

/// The airtime machine in the in-process world (issue 34): the whole bridge on a manual clock, what it put on the air
/// read from its own activity (each crossing's machine time).
@Suite("World: airtime")
struct AirtimeTests {
    @Test("a backlog of 60 lines from 60 senders goes on the air at the pace — 2 at once, then one every 2.1 s, no gap over 6 s while lines wait — and a steward's line posted in the middle is on the air within 5 s of reaching the bridge")
    func backlogAtThePaceStaffWithinSeconds() async throws {
        let site = Site(name: "airtime")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge(
            "gateway", relays: [relay], segments: [air], settings: ["BRIDGE_RENDEZVOUS": "off", "BRIDGE_CHANNEL_LEVELS": "none"])
        let steward = site.poster("steward")
        try await bridge.allow(try .nostr(pubkey: steward.key.publicKey.bytes))
        let reader = await site.phone("reader", on: [air])
        #expect(await reader.meets(bridge))

        /// A second at a time, each step waiting on the bridge (a scrape is a call behind its work), so the clock never
        /// runs ahead of what the bridge has done.
        func seconds(_ count: Int) async {
            for _ in 0..<count {
                await site.advance(by: 1_000)
                _ = try? await bridge.metrics()
            }
        }
        let start = site.now
        let posted = try AppBehaviourTests.lines(60, seed: 3_400).enumerated().map { try site.poster("fan \($0)").post($1, to: relay) }
        for event in posted { #expect(await bridge.verdict(on: event.id.hex)?.kind == .passed) }
        await seconds(10)
        let line = try steward.post("the east exit is closed, use the north gate", to: relay)
        #expect(await bridge.verdict(on: line.id.hex)?.kind == .passed)
        await seconds(30)

        let activity = bridge.activity.all
        let aired = activity.filter { $0.kind == .downlinked && $0.at >= start }.map(\.at).sorted()
        // 60 lines are 120 forms (carrier and mirror line): at 28 a minute they wait far past these 40 s.
        #expect(aired.count >= 15 && aired.count <= 2 + 28 * 40 / 60 + 1, "\(aired.count) forms in 40 s")
        let first = try #require(aired.first)
        for (n, at) in aired.enumerated() {
            #expect(Double(n + 1) <= 2 + 28 * (at - first) / 60 + 1e-6, "form \(n + 1) at +\(at - first) s: faster than the pace")
        }
        let gaps = zip(aired.dropFirst(), aired).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 <= 6 }, "gaps while lines wait: \(gaps)")
        let judged = try #require(activity.first { $0.messageID == line.id.hex && $0.kind == .passed })
        let onAir = try #require(activity.first { $0.messageID == line.id.hex && $0.kind == .downlinked && $0.form == "carrier" })
        #expect(onAir.at - judged.at <= 5, "the steward's line waited \(onAir.at - judged.at) s behind the backlog")
        await site.stop()
    }
}
