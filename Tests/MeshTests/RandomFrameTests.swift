import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
import Testing

/// "Throws or decodes, never traps": random and mutated frames through the decoder and the peer engine.
@Suite("Random and mutated frames")
struct RandomFrameTests {
    /// Valid frames of every shape the engine handles, to mutate.
    static func corpus(now: UInt64) throws -> [[UInt8]] {
        let phone = Phone()
        let announce = try phone.announce(at: now)
        let message = try phone.message("hello mesh", at: now)
        let long = try phone.message(String(repeating: "compress me please ", count: 20), at: now)
        let leave = try MeshPacket(type: .leave, timestamp: now, sender: phone.id, payload: []).signed(with: phone.signing).encode()
        let fragment = try MeshPacket(
            type: .fragment, timestamp: now, sender: phone.id,
            payload: FragmentPayload(fragmentID: 7, index: 0, total: 2, originalType: .message, chunk: Array(message.prefix(40))).encode()
        ).encode()
        let carrier = try MeshPacket(
            type: .nostrCarrier, timestamp: now, sender: phone.id,
            payload: NostrCarrierPayload(direction: .fromBridge, geohash: "u4pruy", eventJSON: Array(#"{"id":"x"}"#.utf8)).encode()
        ).encode()
        let sync = try MeshPacket(type: .requestSync, ttl: 0, timestamp: now, sender: phone.id,
                                  payload: RequestSyncPayload(p: 7, m: 100, data: [1, 2, 3]).encode()).signed(with: phone.signing).encode()
        let routed = try MeshPacket(
            version: 2, type: .noiseEncrypted, timestamp: now, sender: phone.id, recipient: MeshPeerID(rawValue: 3),
            route: [MeshPeerID(rawValue: 4)], payload: Array(repeating: 0xab, count: 150)
        ).encode(padding: true)
        return [announce, message, long, leave, fragment, carrier, sync, routed]
    }

    /// 250,000 frames in the suite (~10 s in a debug build); the million runs as `scripts/fuzz mesh-decoder`
    /// (libFuzzer, coverage-guided) in CI, and through the relay path in `scripts/check-flood`.
    @Test func randomAndMutatedFramesNeverTrapAndEveryFailureIsNamed() throws {
        let total = 250_000
        let now = start
        let corpus = try Self.corpus(now: now)
        var random = SeededRandom(seed: 0xB17C4A7)
        var engine = MeshPeerEngine(identity: makeIdentity("fuzz"))
        var engineRandom = SeededRandom(seed: 1)
        _ = engine.handle(.linkUp(MeshLinkID(1), mtu: 512), now: now, random: &engineRandom)
        // Teach the engine the corpus sender so mutated messages reach signature checks.
        _ = engine.handle(.frame(MeshLinkID(1), corpus[0]), now: now, random: &engineRandom)

        var decoded = 0
        var reasons: [String: Int] = [:]
        for _ in 0..<total {
            var frame: [UInt8]
            switch random.next() % 8 {
            case 0:
                frame = (0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1:
                frame = corpus[Int(random.next() % UInt64(corpus.count))]
                frame = Array(frame.prefix(Int(random.next() % UInt64(frame.count + 1))))
            default:
                frame = corpus[Int(random.next() % UInt64(corpus.count))]
                for _ in 0...(random.next() % 3) where !frame.isEmpty {
                    // Favour the header and TLV starts, where lengths live.
                    let span = random.next() % 4 == 0 ? frame.count : min(frame.count, 40)
                    frame[Int(random.next() % UInt64(span))] = UInt8(truncatingIfNeeded: random.next())
                }
                if random.next() % 16 == 0 { frame += (0..<Int(random.next() % 32)).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
            }
            do {
                _ = try MeshPacket.decode(frame)
                decoded += 1
            } catch {
                reasons[error.name, default: 0] += 1
            }
            // Every frame also goes through the whole engine (decode, gates, payload decoders, verify, relay).
            do {
                _ = engine.handle(.frame(MeshLinkID(1), frame), now: now, random: &engineRandom)
            }
        }
        #expect(decoded + reasons.values.reduce(0, +) == total)
        #expect(decoded > 0 && !reasons.isEmpty)
        #expect(reasons.keys.allSatisfy { !$0.isEmpty })
        let c = engine.counters
        let engineSeen = c.decode.counts.filter { $0.key.stage == .frame }.values.reduce(0, +) + c.received.total + c.ingress.total
            + c.duplicates
        #expect(engineSeen >= total, "every frame fed to the engine was decoded-and-counted or dropped-and-counted")
        print("random frames: \(total), decoded \(decoded), rejections by reason: \(reasons.sorted { $0.key < $1.key })")
        print("engine counters: \(engine.counters.named.count) names, e.g. \(engine.counters.named.prefix(12))")
    }
}
