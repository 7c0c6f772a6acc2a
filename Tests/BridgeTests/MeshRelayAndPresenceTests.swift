import BitchatWire
import BotCrypto
import BotSupport
import Bridge
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import Nostr
import SpamFilter
import Testing
import Identity
import Moderation
import BridgeCore

/// The router's answers to the mesh relay gate, and the gateway's channel presence (NOSTR-GEO §5.3).
@Suite("Bridge router: mesh relay verdicts and channel presence")
struct MeshRelayAndPresenceTests {
    static let now = 1_750_000_000.0
    let channelKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))
    let sender = MeshPeerID(rawValue: 0x0011_2233_4455_6677)

    func router(gateway: Bool = true, mirrorUplink: Bool = false, seed: UInt64 = 42, judge: BridgeJudge = .passAll) -> BridgeRouter {
        BridgeRouter(
            settings: .init(channel: gateway ? try! GeohashCell("u4pruy") : nil, rendezvousCell: nil, mirrorUplink: mirrorUplink),
            ownKeys: [channelKey.publicKey], rendezvousKey: nil, channelKey: channelKey, presenceSeed: seed, judge: judge,
            clockOrigin: .now)
    }

    func message(_ text: String) -> MeshPublicMessage {
        let ts = UInt64(Self.now * 1000)
        return MeshPublicMessage(
            sender: sender, nickname: "n", text: text, timestamp: ts,
            stableID: MeshMessageIdentity.stableID(senderHex: sender.hex, timestampMs: ts, content: text), ttl: 7)
    }

    func presences(_ actions: [BridgeRouter.Action]) -> [NostrEvent] {
        actions.compactMap { if case .publish(let e) = $0, e.kind == 20001 { e } else { nil } }
    }

    @Test("every mesh message is judged and answers the relay gate, with the mirror off and on")
    func meshVerdicts() throws {
        let blocked = try IdentityKey.mesh(noiseKey: [UInt8](repeating: 9, count: 32))
        for mirror in [false, true] {
            var judge = BridgeJudge(settings: .init(channel: "u4pruy"), policy: AdmissionPolicy(config: SpamFilterConfig()))
            judge.setBlocked([blocked])
            var r = router(mirrorUplink: mirror, judge: judge)
            let passed = message("hello")
            let actions = r.meshMessage(passed, senderKey: "fp", now: Self.now)
            #expect(actions.first == .meshRelay(stableID: passed.stableID, relay: true))
            #expect(actions.count == (mirror ? 2 : 1))
            #expect(r.judge.spamStats.judged == 1, "the spam filter saw it")
            let hidden = message("BUY NOW")
            let hiddenActions = r.meshMessage(hidden, senderKey: "fp2", identity: blocked, now: Self.now)
            #expect(hiddenActions.last == .meshRelay(stableID: hidden.stableID, relay: false))
            guard case .recordHidden(let report)? = hiddenActions.first else {
                Issue.record("no hidden report: \(hiddenActions)")
                continue
            }
            #expect(report.rule == .blocked && report.candidate.messageID == hidden.stableID)
            #expect(r.counters.hidden[.init(direction: .meshToNostr, rule: .blocked)] == 1)
        }
    }

    @Test("channel presence: exact shape, sent on connect, then every 40–80 s at random, only while a relay is up")
    func channelPresenceCadence() throws {
        var r = router()
        #expect(presences(r.tick(now: Self.now)).isEmpty, "no relay yet")
        let first = try #require(presences(r.relaysConnected(true, now: Self.now)).first)
        #expect(first.kind == 20001 && first.content == "" && first.tags == [["g", "u4pruy"]])
        #expect(first.pubkey == channelKey.publicKey && first.createdAt == Int64(Self.now))
        #expect(try UnverifiedEvent(json: first.json).verified() == first)
        // Step a manual clock through 20 intervals; each gap is within [40, 80] s and they differ.
        var last = Self.now
        var gaps: [Double] = []
        var t = Self.now
        while gaps.count < 20 {
            t += 0.5
            if presences(r.tick(now: t)).count == 1 {
                gaps.append(t - last)
                last = t
            }
        }
        #expect(gaps.allSatisfy { (40...80.5).contains($0) }, "\(gaps)")
        #expect(Set(gaps).count > 5, "randomised, not a fixed period: \(gaps)")
        #expect(r.counters.presenceSent[.channel] == 21)
        // Relays down: nothing; back up within 30 s of the last presence: no burst; later: at once.
        _ = r.relaysConnected(false, now: t)
        #expect(presences(r.tick(now: t + 100)).isEmpty)
        #expect(presences(r.relaysConnected(true, now: t + 10)).isEmpty)
        _ = r.relaysConnected(false, now: t + 11)
        #expect(presences(r.relaysConnected(true, now: t + 30)).count == 1)
    }

    @Test("the same seed draws the same intervals (randomness is injected)")
    func seeded() {
        func schedule(_ seed: UInt64) -> [Double] {
            var r = router(seed: seed)
            _ = r.relaysConnected(true, now: Self.now)
            return stride(from: Self.now, to: Self.now + 400, by: 0.25).filter { !presences(r.tick(now: $0)).isEmpty }
        }
        #expect(schedule(1) == schedule(1))
        #expect(schedule(1) != schedule(2))
    }

    @Test("no channel presence when the gateway role is off")
    func gatewayOff() {
        var r = router(gateway: false)
        #expect(presences(r.relaysConnected(true, now: Self.now)).isEmpty)
        #expect(presences(r.tick(now: Self.now + 200)).isEmpty)
    }

    @Test("BRIDGE_MESH takes several radio-hub segments; only tcp URLs combine")
    func meshSegments() throws {
        let setting = try MeshSetting(parsing: "tcp://127.0.0.1:9000,tcp://127.0.0.1:9001")
        #expect(setting == .tcpSegments(["tcp://127.0.0.1:9000", "tcp://127.0.0.1:9001"]))
        #expect(setting.description == "tcp://127.0.0.1:9000,tcp://127.0.0.1:9001")
        #expect(throws: ConfigurationError.self) { try MeshSetting(parsing: "tcp://127.0.0.1:9000,bluez") }
        #expect(throws: ConfigurationError.self) { try MeshSetting(parsing: "tcp://127.0.0.1:9000,") }
    }
}
