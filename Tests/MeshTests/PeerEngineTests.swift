import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
import Testing

struct EngineHarness {
    var engine: MeshPeerEngine
    var random = SeededRandom(seed: 9)
    var now = start
    let link = MeshLinkID(1)

    init(identity: MeshIdentity = makeIdentity("bridge")) {
        engine = MeshPeerEngine(identity: identity)
        _ = engine.handle(.linkUp(link, mtu: 512), now: now, random: &random)
    }

    mutating func feed(_ frame: [UInt8], on link: MeshLinkID? = nil) -> [MeshAction] {
        engine.handle(.frame(link ?? self.link, frame), now: now, random: &random)
    }
}

struct Phone {
    let noise: X25519PrivateKey
    let signing: Ed25519PrivateKey

    init(noise: X25519PrivateKey = .generate(), signing: Ed25519PrivateKey = .generate()) {
        self.noise = noise
        self.signing = signing
    }
    var id: MeshPeerID { MeshPeerID(noisePublicKey: noise.publicKey) }

    func announce(at time: UInt64, ttl: UInt8 = 7, nickname: String = "phone") throws -> [UInt8] {
        let payload = try AnnouncePayload(
            nickname: nickname, noisePublicKey: noise.publicKey, signingPublicKey: signing.publicKey.rawRepresentation
        ).encode()
        var packet = MeshPacket(type: .announce, timestamp: time, sender: id, payload: payload)
        packet = try packet.signed(with: signing)
        packet.ttl = ttl
        return try packet.encode()
    }

    func message(_ text: String, at time: UInt64, key: Ed25519PrivateKey? = nil) throws -> [UInt8] {
        try MeshPacket(type: .message, timestamp: time, sender: id, payload: Array(text.utf8))
            .signed(with: key ?? signing).encode()
    }
}

@Suite("Peer engine policies")
struct PeerEngineTests {
    @Test func linkUpSendsASignedDirectAnnounce() throws {
        let identity = makeIdentity("bridge")
        var engine = MeshPeerEngine(identity: identity)
        var random = SeededRandom(seed: 1)
        let actions = engine.handle(.linkUp(MeshLinkID(3), mtu: 512), now: start, random: &random)
        guard case .transmit(let link, let frame, _) = try #require(actions.first) else {
            Issue.record("expected a transmit")
            return
        }
        #expect(link == MeshLinkID(3))
        let packet = try MeshPacket.decode(frame)
        #expect(packet.type == .announce && packet.ttl == 7 && packet.sender == identity.peerID)
        #expect(packet.verifySignature(identity.signingKey.publicKey) == .valid(.asReceived))
        #expect(frame.count < 14 + 8 + 100 + 64, "own announce stays under the compression threshold")
    }

    @Test func verifiedAnnounceBindsLinkAndAddsPeer() throws {
        var h = EngineHarness()
        let phone = Phone()
        let actions = h.feed(try phone.announce(at: h.now))
        #expect(h.engine.boundPeer(of: h.link) == phone.id)
        #expect(h.engine.peers[phone.id]?.isDirect == true)
        #expect(actions.contains { if case .peerVerified(let p) = $0 { p.id == phone.id } else { false } })
        let message = h.feed(try phone.message("hi", at: h.now + 1))
        #expect(message.contains { if case .publicMessage(let m) = $0 { m.text == "hi" } else { false } })
    }

    @Test func announceRejections() throws {
        var h = EngineHarness()
        let phone = Phone()
        // Sender ID not derived from the noise key.
        var frame = try phone.announce(at: h.now)
        frame[14] ^= 0xff
        _ = h.feed(frame)
        #expect(h.engine.counters["announce.peerIDMismatch"] == 1)
        // Bad signature.
        frame = try phone.announce(at: h.now + 1)
        frame[frame.count - 1] ^= 1
        _ = h.feed(frame)
        #expect(h.engine.counters["announce.badSignature"] == 1)
        #expect(h.engine.peers.isEmpty)
        // Key rotation for a pinned peer ID is refused (same noise key, new signing key).
        _ = h.feed(try phone.announce(at: h.now + 2))
        let impostor = Phone(noiseCopy: phone)
        _ = h.feed(try impostor.announce(at: h.now + 3))
        #expect(h.engine.counters["announce.keyChanged"] == 1)
    }

    @Test func freshnessGateAtBoundary() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now - 120_000))
        #expect(h.engine.peers.count == 1, "exactly 120 s old passes")
        let late = Phone()
        _ = h.feed(try late.announce(at: h.now + 120_001))
        #expect(h.engine.counters["drop.clockSkew"] == 1, "120 001 ms ahead is dropped")
    }

    @Test func messageFromUnverifiedOrForgedSenderIsNotDeliveredButRelayed() throws {
        var h = EngineHarness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let phone = Phone()
        var actions = h.feed(try phone.message("who am i", at: h.now))
        #expect(h.engine.counters["message.unknownSender"] == 1)
        #expect(actions.contains { if case .transmit(let link, _, _) = $0 { link == MeshLinkID(2) } else { false } })
        _ = h.feed(try phone.announce(at: h.now))
        actions = h.feed(try phone.message("forged", at: h.now + 5, key: .generate()))
        #expect(h.engine.counters["message.badSignature"] == 1)
        #expect(!actions.contains { if case .publicMessage = $0 { true } else { false } })
    }

    @Test func forgedLeaveIsNotAppliedNorRelayed() throws {
        var h = EngineHarness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        let forged = try MeshPacket(type: .leave, timestamp: h.now + 1, sender: phone.id, payload: []).signed(with: .generate()).encode()
        let actions = h.feed(forged)
        #expect(h.engine.peers[phone.id] != nil)
        #expect(!actions.contains { if case .transmit = $0 { true } else { false } })
        let real = try MeshPacket(type: .leave, timestamp: h.now + 2, sender: phone.id, payload: []).signed(with: phone.signing).encode()
        let leave = h.feed(real)
        #expect(h.engine.peers[phone.id] == nil)
        #expect(leave.contains { if case .peerLost(_, "leave") = $0 { true } else { false } })
    }

    @Test func ownEchoAndUnsolicitedRSRAreDropped() throws {
        var h = EngineHarness()
        let actions = h.engine.handle(.sendPublicMessage("mine"), now: h.now, random: &h.random)
        guard case .transmit(_, let frame, _) = try #require(actions.first) else { return }
        _ = h.feed(frame)
        #expect(h.engine.counters["drop.ownEcho"] == 1)
        let phone = Phone()
        var packet = try MeshPacket.decode(try phone.message("old", at: h.now - 1_000_000))
        packet.isRSR = true
        packet.ttl = 0
        _ = h.feed(try packet.encode())
        #expect(h.engine.counters["drop.unsolicitedRSR"] == 1)
    }

    @Test func relayDecisionTable() {
        var random = SeededRandom(seed: 3)
        func packet(_ type: MessageType, ttl: UInt8, recipient: MeshPeerID? = nil) -> MeshPacket {
            MeshPacket(type: type, ttl: ttl, timestamp: 0, sender: MeshPeerID(rawValue: 1), recipient: recipient, payload: [])
        }
        #expect(MeshPeerEngine.relayDecision(for: packet(.message, ttl: 1), degree: 2, random: &random) == nil)
        #expect(MeshPeerEngine.relayDecision(for: packet(.requestSync, ttl: 7), degree: 2, random: &random) == nil)
        let handshake = MeshPeerEngine.relayDecision(for: packet(.noiseHandshake, ttl: 3, recipient: MeshPeerID(rawValue: 2)), degree: 2, random: &random)
        #expect(handshake?.ttl == 2 && (10...35).contains(handshake?.delayMs ?? 0))
        #expect(MeshPeerEngine.relayDecision(for: packet(.fragment, ttl: 10), degree: 2, random: &random)?.ttl == 6)
        #expect(MeshPeerEngine.relayDecision(for: packet(.fragment, ttl: 10), degree: 6, random: &random)?.ttl == 4)
        #expect(MeshPeerEngine.relayDecision(for: packet(.message, ttl: 7), degree: 2, random: &random)?.ttl == 6)
        #expect(MeshPeerEngine.relayDecision(for: packet(.message, ttl: 10), degree: 6, random: &random)?.ttl == 4)
        #expect(MeshPeerEngine.relayDecision(for: packet(.message, ttl: 7), degree: 4, random: &random)?.ttl == 5)
        #expect(MeshPeerEngine.relayDecision(for: packet(.announce, ttl: 7), degree: 4, random: &random)?.ttl == 6)
        let dense = MeshPeerEngine.relayDecision(for: packet(.message, ttl: 7), degree: 12, random: &random)
        #expect((100...220).contains(dense?.delayMs ?? 0))
    }

    @Test(arguments: [(1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (8, 4), (9, 5), (16, 5), (17, 6)])
    func fanOutSubsetSize(n: Int, k: Int) {
        let links = (0..<n).map { MeshLinkID(UInt64($0)) }
        #expect(MeshPeerEngine.fanOutSubset(links, dedupKey: "key").count == k)
    }

    @Test func fragmentationBoundaries() throws {
        let engine = MeshPeerEngine(identity: makeIdentity("f"))
        let packet = MeshPacket(type: .message, timestamp: start, sender: engine.identity.peerID, payload: [UInt8](repeating: 0x61, count: 1000))
        let frame = try packet.encode(compression: .none)
        let fragments = try #require(engine.fragmentFrames(of: packet, frame: frame, mtu: 185))
        #expect(fragments.allSatisfy { $0.count <= 185 })
        #expect(fragments.count == (frame.count + 141) / 142)
        // 256 fragments (n) allowed, 257 (n + 1) refused.
        let chunk = 64
        let at256 = MeshPacket(type: .message, timestamp: start, sender: engine.identity.peerID, payload: [UInt8](repeating: 1, count: 256 * chunk - 22))
        #expect(engine.fragmentFrames(of: at256, frame: try at256.encode(compression: .none), mtu: 107)?.count == 256)
        let at257 = MeshPacket(type: .message, timestamp: start, sender: engine.identity.peerID, payload: [UInt8](repeating: 1, count: 256 * chunk - 21))
        #expect(engine.fragmentFrames(of: at257, frame: try at257.encode(compression: .none), mtu: 107) == nil)
    }
}

@Suite("Dedup set and reassembler limits")
struct BoundedStateTests {
    @Test func dedupExpiryBoundary() {
        var set = DedupSet()
        let first = set.checkAndInsert("a", now: 0)
        let before = set.checkAndInsert("a", now: DedupSet.Limits.expiryMs - 1)
        let after = set.checkAndInsert("a", now: DedupSet.Limits.expiryMs)
        #expect(!first)
        #expect(before, "still remembered at 299 999 ms")
        #expect(!after, "forgotten at 300 000 ms (counted from the first sighting)")
    }

    @Test func dedupCapacityTrims() {
        var set = DedupSet()
        for i in 0..<DedupSet.Limits.capacity { _ = set.checkAndInsert("k\(i)", now: 1) }
        #expect(set.count == 1_000, "n = 1 000 keys kept")
        _ = set.checkAndInsert("overflow", now: 1)
        #expect(set.count == 750, "n + 1 trims to 750")
        #expect(set.contains("overflow") && !set.contains("k0"))
    }

    @Test func reassemblyInReverseOrderWithDuplicates() {
        var r = Reassembler()
        let frame = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let sender = MeshPeerID(rawValue: 5)
        func fragment(_ i: Int) -> FragmentPayload {
            FragmentPayload(fragmentID: 1, index: UInt16(i), total: 3, originalType: .message, chunk: Array(frame[(i * 100)..<(i * 100 + 100)]))
        }
        let outcomes = [2, 2, 1, 0].map { r.add(fragment($0), from: sender, now: 0) }
        #expect(outcomes == [.incomplete, .incomplete, .incomplete, .complete(frame)])
    }

    @Test func reassemblyTimeoutAndMismatch() {
        var r = Reassembler()
        let sender = MeshPeerID(rawValue: 5)
        _ = r.add(FragmentPayload(fragmentID: 1, index: 0, total: 2, originalType: .message, chunk: [1]), from: sender, now: 0)
        r.sweep(now: Reassembler.Limits.timeoutMs - 1)
        #expect(r.activeCount == 1)
        r.sweep(now: Reassembler.Limits.timeoutMs)
        #expect(r.activeCount == 0)
        _ = r.add(FragmentPayload(fragmentID: 2, index: 0, total: 2, originalType: .message, chunk: [1]), from: sender, now: 0)
        let mismatch = r.add(FragmentPayload(fragmentID: 2, index: 1, total: 3, originalType: .message, chunk: [1]), from: sender, now: 0)
        #expect(mismatch == .rejected("fragment.mismatch"))
    }

    @Test func reassemblyByteCapBoundary() {
        var r = Reassembler()
        let cap = Reassembler.Limits.maxBytesPerSet
        let sender = MeshPeerID(rawValue: 1)
        let atCap = r.add(FragmentPayload(fragmentID: 1, index: 0, total: 2, originalType: .message, chunk: repeated(cap)), from: sender, now: 0)
        #expect(atCap == .incomplete, "n = 1 MiB of chunk bytes is kept")
        let overCap = r.add(FragmentPayload(fragmentID: 2, index: 0, total: 2, originalType: .message, chunk: repeated(cap + 1)), from: sender, now: 0)
        #expect(overCap == .rejected("fragment.setTooLarge"), "n + 1 drops the set")
    }

    func repeated(_ count: Int) -> [UInt8] { [UInt8](repeating: 7, count: count) }

    @Test func reassemblySetCap() {
        var r = Reassembler()
        for id in 0..<Reassembler.Limits.maxAssemblies {
            _ = r.add(FragmentPayload(fragmentID: UInt64(id), index: 0, total: 2, originalType: .message, chunk: [1]), from: MeshPeerID(rawValue: 1), now: 0)
        }
        #expect(r.activeCount == 128 && r.evicted == 0)
        _ = r.add(FragmentPayload(fragmentID: 999, index: 0, total: 2, originalType: .message, chunk: [1]), from: MeshPeerID(rawValue: 1), now: 0)
        #expect(r.activeCount == 128 && r.evicted == 1)
    }
}

extension Phone {
    /// A phone claiming `other`'s Noise identity with a different signing key.
    init(noiseCopy other: Phone) {
        self.init(noise: other.noise, signing: .generate())
    }
}

@Suite("iOS FragmentationTests (§12.1) through the engine")
struct EngineFragmentationTests {
    func fragments(of text: String, phone: Phone, mtu: Int) throws -> [[UInt8]] {
        let packet = try MeshPacket(type: .message, timestamp: start, sender: phone.id, payload: Array(text.utf8)).signed(with: phone.signing)
        let engine = MeshPeerEngine(identity: makeIdentity("cutter"))
        return try #require(engine.fragmentFrames(of: packet, frame: try packet.encode(compression: .none), mtu: mtu))
    }

    @Test func signed3000ByteMessageInReverseOrderWithADuplicateYieldsOneMessage() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        var random = SeededRandom(seed: 8)
        let text = String((0..<3000).map { _ in Character(Unicode.Scalar(UInt8(33 + random.next() % 94))) })
        let frames = try fragments(of: text, phone: phone, mtu: 400)
        #expect(frames.count > 7)
        var delivered: [MeshPublicMessage] = []
        for frame in frames.reversed() + [frames[0]] {
            for case .publicMessage(let message) in h.feed(frame) { delivered.append(message) }
        }
        #expect(delivered.count == 1)
        #expect(delivered.first?.text.count == 3000)
    }

    @Test func aFragmentWithOnlyThreePayloadBytesBlocksDelivery() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        var frames = try fragments(of: String(repeating: "x", count: 120) + "yz", phone: phone, mtu: 120)
        var broken = try MeshPacket.decode(frames[1])
        broken.payload = [0x00, 0x01, 0x02]
        frames[1] = try broken.encode()
        var delivered = 0
        for frame in frames {
            for case .publicMessage in h.feed(frame) { delivered += 1 }
        }
        #expect(delivered == 0)
        #expect(h.engine.counters["fragment.truncated.fragmentHeader"] == 1)
    }
}
