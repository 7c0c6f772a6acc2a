import BotCrypto
import BotSupport
import Bridge
import Geohash
import Nostr
import SpamFilter
import Testing
import BridgeCore

/// Relay backfill after a reconnect: stored events arrive at once with their real timestamps. The spam
/// filter's buckets run on message time (clamped to the last hour), so an ordinary pace is not a flood.
@Suite("Backfill through the router and the real filter")
struct BackfillTests {
    static let now = 1_750_000_000.0
    /// 50 different ordinary lines (no two near-copies, so only the rate rules could fire).
    static let sentences: [String] = {
        let words = ["stage", "water", "friends", "tent", "north", "gate", "music", "tonight", "charger", "lost", "found",
                     "beer", "queue", "toilets", "rain", "sunset", "drums", "crowd", "meet", "camp", "shuttle", "food",
                     "vegan", "tickets", "bracelet", "medic", "blanket", "lights", "bass", "dance", "river", "field"]
        return (0..<50).map { i in
            (0..<6).map { j in words[(i * 7 + j * (i % 5 + 3) + j * j) % words.count] }.joined(separator: " ") + " \(i)"
        }
    }()
    let sender = try! SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))

    func router() -> BridgeRouter {
        let judge = BridgeJudge(settings: .init(channel: "u4pruy", logText: false), policy: AdmissionPolicy(config: SpamFilterConfig()))
        return BridgeRouter(
            settings: .init(channel: try! GeohashCell("u4pruy"), rendezvousCell: nil), ownKeys: [], rendezvousKey: nil, judge: judge,
            clockOrigin: .now)
    }

    func events(stampedOver seconds: Double) -> [NostrEvent] {
        (0..<50).map { i in
            let at = Self.now - seconds + seconds * Double(i) / 50
            return try! UnsignedEvent(
                pubkey: sender.publicKey, createdAt: Int64(at), kind: 20000, tags: [["g", "u4pruy"]],
                content: Self.sentences[i]
            ).signed(with: sender)
        }
    }

    func accepted(_ batch: [NostrEvent]) -> Int {
        var router = router()
        for event in batch { _ = router.relayEvent(event, now: Self.now, random: 0) }
        return router.counters.relayAccepted[.channel]
    }

    @Test("50 messages stamped over the last 14 minutes, arriving at once: all accepted")
    func backfill() {
        #expect(accepted(events(stampedOver: 14 * 60)) == 50)
    }

    @Test("the same 50 stamped now: limited to the burst of 6")
    func burst() {
        #expect(accepted(events(stampedOver: 0)) == 6)
    }
}
