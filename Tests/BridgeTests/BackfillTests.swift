import BotCrypto
import BotSupport
import Bridge
import Geohash
import IdentityCache
import Nostr
import SpamFilter
import Testing

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

    func pipeline() -> (BridgeRouter, ModerationJudgement) {
        let router = BridgeRouter(settings: .init(channel: try! GeohashCell("u4pruy"), rendezvousCell: nil), ownKeys: [], rendezvousKey: nil)
        let judgement = ModerationJudgement(
            identities: PeerIdentityCache(store: InMemoryIdentityStore(), logger: Logger(label: "t", level: .error)),
            policy: AdmissionPolicy(config: SpamFilterConfig()), moderationLog: nil, channel: "u4pruy", logText: false,
            logger: Logger(label: "t", level: .error))
        return (router, judgement)
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
        var (router, judgement) = pipeline()
        for event in batch {
            _ = router.relayEvent(event, now: Self.now, random: 0, judge: { judgement.judge($0, now: Self.now) })
        }
        return router.counters["relay.accepted.channel"] ?? 0
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
