import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
import Testing

/// Issue 14, mesh side: replays after junk, fragments we reject, and a fragment bomb, at the engine.
@Suite("Hostile traffic at the engine: replays, rejected fragments, fragment bombs")
struct HostileTrafficTests {
    static let second = RelayGateTests.second

    /// An engine on two links with `phone` announced directly on the first (established: a bound link).
    static func engine(gated: Bool, phone: Phone) throws -> EngineHarness {
        try RelayGateTests.gated(phone, gate: gated)
    }

    static func relayed(_ actions: [MeshAction], type: MessageType) -> Int {
        actions.filter {
            if case .transmit(let link, let frame, _) = $0 { link == second && (try? MeshPacket.decode(frame))?.type == type } else { false }
        }.count
    }

    /// 10,000 frames of every kind of junk: undecodable bytes, messages under the phone's ID with a wrong
    /// signature, messages from senders nobody announced, announces that fail their checks, stranger
    /// fragments, traffic between others.
    static func junk(_ count: Int, impersonating phone: Phone, at now: UInt64, seed: UInt64) throws -> [[UInt8]] {
        var random = SeededRandom(seed: 77 &+ seed)
        let strangerKey = Ed25519PrivateKey.generate()
        let stranger = Phone()
        var frames: [[UInt8]] = []
        for i in 0..<count {
            let text = Array("junk \(seed).\(i)".utf8)
            switch i % 6 {
            case 0:
                frames.append((0..<40).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            case 1:
                frames.append(try MeshPacket(type: .message, timestamp: now, sender: phone.id, payload: text).signed(with: strangerKey).encode())
            case 2:
                frames.append(try MeshPacket(type: .message, timestamp: now, sender: MeshPeerID(rawValue: random.next()), payload: text).encode())
            case 3:
                var announce = try stranger.announce(at: now + seed * 1_000 + UInt64(i), ttl: 3)
                announce[announce.count - 1] ^= 0x55
                frames.append(announce)
            case 4:
                let fragment = FragmentPayload(fragmentID: random.next(), index: 0, total: 3, originalType: .message, chunk: text)
                frames.append(try MeshPacket(type: .fragment, ttl: 3, timestamp: now, sender: MeshPeerID(rawValue: random.next()),
                                             payload: fragment.encode()).encode())
            default:
                frames.append(try MeshPacket(type: .message, timestamp: now, sender: MeshPeerID(rawValue: random.next()),
                                             recipient: MeshPeerID(rawValue: random.next()), payload: text).encode())
            }
        }
        return frames
    }

    /// The issue: a signed message replayed after 1,100 junk frames was relayed again (61 copies, none judged
    /// again): the old 1,000-key set was flushed by junk. Junk now has a pool of its own.
    @Test(arguments: [true, false])
    func aReplayAfter10000JunkFramesIsNotRelayedAgain(gated: Bool) async throws {
        let phone = Phone()
        var h = try Self.engine(gated: gated, phone: phone)
        let message = try phone.message("meet at the stage", at: h.now)
        let first = h.feed(message)
        var relayed = Self.relayed(first, type: .message)
        if gated {
            let id = try #require(first.lazy.compactMap { if case .publicMessage(let m) = $0 { m.stableID } else { nil } }.first)
            relayed += Self.relayed(h.engine.handle(.relayVerdict(stableID: id, relay: true), now: h.now, random: &h.random), type: .message)
        }
        #expect(relayed == 1, "relayed once")
        for round in 0..<40 {
            // In rounds, yielding between them (suites run in parallel on a small cooperative pool).
            await Task.yield()
            for frame in try Self.junk(250, impersonating: phone, at: h.now, seed: UInt64(round)) { _ = h.feed(frame) }
        }
        #expect(h.engine.counters.dedup[MeshDedupEvent(.evicted, .unverified)] > 0, "the junk did overflow its own pool")
        h.now += 60_000
        let replay = h.feed(message)
        #expect(replay.isEmpty, "the replay is neither delivered nor relayed")
        #expect(h.engine.counters.dedup[MeshDedupEvent(.duplicate, .established)] == 1)
        #expect(h.engine.counters.relayGate[.cachedRelay] == 0)
        print("replay after 10,000 junk frames (gated: \(gated)): relayed \(Self.relayed(replay, type: .message)) times; "
            + "junk pool evictions \(h.engine.counters.dedup[MeshDedupEvent(.evicted, .unverified)])")
    }

    /// Issue 14: fragments the bridge's own decoder rejects (total = 65,535) were still relayed to the other
    /// segments. Nothing we reject is relayed; what we merely cannot use is.
    @Test func rejectedFragmentsAndAnnouncesAreNotRelayed() throws {
        let phone = Phone()
        var h = try Self.engine(gated: true, phone: phone)
        func fragment(_ id: UInt64, index: UInt16, total: UInt16, type: MessageType = .message, chunk: [UInt8] = [1, 2, 3],
                      recipient: MeshPeerID? = nil) throws -> [UInt8] {
            // The header written by hand, so values the decoder refuses can be sent.
            func bigEndian(_ value: UInt64, _ size: Int) -> [UInt8] {
                (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> UInt64(8 * $0)) }
            }
            var payload = bigEndian(id, 8) + bigEndian(UInt64(index), 2) + bigEndian(UInt64(total), 2)
            payload.append(type.rawValue)
            payload += chunk
            return try MeshPacket(type: .fragment, ttl: 5, timestamp: h.now, sender: phone.id, recipient: recipient, payload: payload).encode()
        }
        var forged = try Phone().announce(at: h.now, ttl: 5)
        forged[forged.count - 1] ^= 1
        let cases: [(String, [UInt8], Bool)] = [
            ("total 65 535", try fragment(1, index: 0, total: 65_535), false),
            ("index ≥ total", try fragment(2, index: 3, total: 3), false),
            ("empty chunk", try fragment(3, index: 0, total: 2, chunk: []), false),
            ("a fine first fragment", try fragment(4, index: 0, total: 2), true),
            ("its set's total changed", try fragment(4, index: 1, total: 3), false),
            ("a file-transfer fragment (not ours to rebuild)", try fragment(5, index: 0, total: 2, type: .fileTransfer), true),
            ("an announce with a bad signature", forged, false),
            ("an announce with a malformed TLV", try MeshPacket(type: .announce, ttl: 5, timestamp: h.now, sender: phone.id, payload: [1, 200, 65]).encode(), false),
        ]
        for (name, frame, relays) in cases {
            let actions = h.feed(frame)
            let sent = actions.contains { if case .transmit(let link, _, _) = $0 { link == Self.second } else { false } }
            #expect(sent == relays, "\(name): relayed \(sent)")
        }
        #expect(h.engine.counters.decode[MeshDecodeRejection(.fragment, .invalidValue(field: .fragmentTotal, value: 0))] == 1)
        #expect(h.engine.counters.fragment[.mismatch] == 1 && h.engine.counters.fragment[.emptyChunk] == 1)
        #expect(h.engine.counters.fragment[.notForUs] == 1)
        #expect(h.engine.counters.relay[.refusedRejected] == 6)
    }

    /// A carrier deposit from `phone` to the engine, cut into fragments of at most `mtu` bytes.
    static func deposit(_ phone: Phone, to recipient: MeshPeerID, at now: UInt64, index: Int, mtu: Int = 512) throws -> [[UInt8]] {
        let event = #"{"content":"deposit \#(index) \#(String(repeating: "x", count: 1_800))"}"#
        let payload = try NostrCarrierPayload(direction: .toBridge, geohash: "u4pruy", eventJSON: Array(event.utf8)).encode()
        let packet = try MeshPacket(type: .nostrCarrier, timestamp: now, sender: phone.id, recipient: recipient, payload: payload)
            .signed(with: phone.signing)
        let cutter = MeshPeerEngine(identity: makeIdentity("cutter-\(index)"))
        return try #require(cutter.fragmentFrames(of: packet, frame: try packet.encode(compression: .none), mtu: mtu))
    }

    /// The issue's bomb — 128 incomplete trains of ≈ 1 MiB from strangers — interleaved with fragmented
    /// deposits of a verified phone: the reassembler stays within its byte budget and every deposit arrives
    /// (4–9 of 12–17 arrived with the old 128 slots).
    @Test func aFragmentBombStaysInItsBudgetAndVerifiedDepositsStillComplete() async throws {
        let phone = Phone()
        var h = try Self.engine(gated: true, phone: phone)
        var random = SeededRandom(seed: 5)
        let chunk = [UInt8](repeating: 0x42, count: 60_000)
        var deposits = 0
        var peak = 0
        for train in 0..<128 {
            await Task.yield()
            let sender = MeshPeerID(rawValue: random.next())
            let id = random.next()
            // 17 × 60 000 bytes ≈ 1 MiB; the last fragment never comes.
            for index in 0..<16 {
                let payload = FragmentPayload(fragmentID: id, index: UInt16(index), total: 17, originalType: .message, chunk: chunk).encode()
                _ = h.feed(try MeshPacket(type: .fragment, ttl: 1, timestamp: h.now, sender: sender, payload: payload).encode(compression: .none))
                peak = max(peak, h.engine.reassemblyBytes)
            }
            if train % 8 == 0 {
                for frame in try Self.deposit(phone, to: h.engine.identity.peerID, at: h.now, index: train) {
                    for case .carrier in h.feed(frame) { deposits += 1 }
                }
            }
            h.now += 100
        }
        #expect(peak <= Reassembler.Limits.totalBudget, "peak \(peak) accounted bytes")
        #expect(deposits == 16, "\(deposits) of 16 fragmented deposits arrived during the bomb")
        #expect(h.engine.counters.fragment[.evictedBytes] > 0)
        print("fragment bomb: 128 trains × 16 × 60 000 bytes, reassembly peak \(peak) accounted bytes "
            + "(budget \(Reassembler.Limits.totalBudget)), deposits \(deposits) of 16")
    }
}
