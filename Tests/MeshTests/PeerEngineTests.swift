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

    /// Link 1 up as `kind` (a BLE link unless said otherwise).
    init(identity: MeshIdentity = makeIdentity("bridge"), kind: MeshLinkKind = .point) {
        engine = MeshPeerEngine(identity: identity)
        _ = engine.handle(.linkUp(link, mtu: 512, kind: kind), now: now, random: &random)
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
        #expect(h.engine.directPeers(on: h.link) == [phone.id])
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
        #expect(h.engine.counters.verification[.announcePeerIDMismatch] == 1)
        // Bad signature.
        frame = try phone.announce(at: h.now + 1)
        frame[frame.count - 1] ^= 1
        _ = h.feed(frame)
        #expect(h.engine.counters.verification[.announceBadSignature] == 1)
        #expect(h.engine.peers.isEmpty)
        // Key rotation for a pinned peer ID is refused (same noise key, new signing key).
        _ = h.feed(try phone.announce(at: h.now + 2))
        let impostor = Phone(noiseCopy: phone)
        _ = h.feed(try impostor.announce(at: h.now + 3))
        #expect(h.engine.counters.verification[.announceKeyChanged] == 1)
    }

    @Test func freshnessGateAtBoundary() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now - 120_000))
        #expect(h.engine.peers.count == 1, "exactly 120 s old passes")
        let late = Phone()
        _ = h.feed(try late.announce(at: h.now + 120_001))
        #expect(h.engine.counters.ingress[.clockSkew] == 1, "120 001 ms ahead is dropped")
    }

    @Test func messageFromUnverifiedOrForgedSenderIsNotDeliveredButRelayed() throws {
        var h = EngineHarness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let phone = Phone()
        var actions = h.feed(try phone.message("who am i", at: h.now))
        #expect(h.engine.counters.verification[.messageUnknownSender] == 1)
        #expect(actions.contains { if case .transmit(let link, _, _) = $0 { link == MeshLinkID(2) } else { false } })
        _ = h.feed(try phone.announce(at: h.now))
        actions = h.feed(try phone.message("forged", at: h.now + 5, key: .generate()))
        #expect(h.engine.counters.verification[.messageBadSignature] == 1)
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
        #expect(leave.contains { if case .peerLost(_, .leave) = $0 { true } else { false } })
    }

    /// Issue 16 part 6 / MESH-WIRE §7.5: iOS relays broadcast voice, file and board packets only when their
    /// signature verifies; so does the engine now. A directed one is relayed as before.
    @Test(arguments: [MessageType.voiceFrame, .fileTransfer, .boardPost])
    func unverifiableBroadcastMediaIsNotRelayed(type: MessageType) throws {
        var h = EngineHarness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        func relayed(_ actions: [MeshAction]) -> Bool {
            actions.contains { if case .transmit(let link, _, _) = $0 { link == MeshLinkID(2) } else { false } }
        }
        let payload: [UInt8] = Array("media".utf8)
        let forged = try MeshPacket(type: type, timestamp: h.now + 1, sender: phone.id, payload: payload).signed(with: .generate()).encode()
        #expect(!relayed(h.feed(forged)))
        #expect(h.engine.counters.verification[.mediaBadSignature] == 1)
        let stranger = Phone()
        let unknown = try MeshPacket(type: type, timestamp: h.now + 2, sender: stranger.id, payload: payload).signed(with: stranger.signing).encode()
        #expect(!relayed(h.feed(unknown)))
        #expect(h.engine.counters.verification[.mediaUnknownSender] == 1)
        let genuine = try MeshPacket(type: type, timestamp: h.now + 3, sender: phone.id, payload: payload).signed(with: phone.signing).encode()
        #expect(relayed(h.feed(genuine)))
        #expect(h.engine.counters.relay[.refusedRejected] == 2)
        let directed = try MeshPacket(
            type: type, timestamp: h.now + 4, sender: phone.id, recipient: stranger.id, payload: payload
        ).signed(with: .generate()).encode()
        #expect(relayed(h.feed(directed)))
    }

    @Test func ownEchoAndUnsolicitedRSRAreDropped() throws {
        var h = EngineHarness()
        let actions = h.engine.handle(.sendPublicMessage("mine"), now: h.now, random: &h.random)
        guard case .transmit(_, let frame, _) = try #require(actions.first) else { return }
        _ = h.feed(frame)
        #expect(h.engine.counters.ingress[.ownEcho] == 1)
        let phone = Phone()
        var packet = try MeshPacket.decode(try phone.message("old", at: h.now - 1_000_000))
        packet.isRSR = true
        packet.ttl = 0
        _ = h.feed(try packet.encode())
        #expect(h.engine.counters.ingress[.unsolicitedRSR] == 1)
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
    static func key(_ i: Int, sender: UInt64 = 1) -> DedupSet.Key {
        DedupSet.Key(MeshPacket(type: .message, timestamp: UInt64(i), sender: MeshPeerID(rawValue: sender), payload: []))
    }

    @Test func dedupExpiryBoundary() {
        var set = DedupSet()
        let key = Self.key(1)
        #expect(set.lookup(key, now: 0) == nil)
        set.insert(key, into: .established, now: 0)
        #expect(set.lookup(key, now: DedupSet.Limits.expiryMs - 1) == .established, "still remembered at 299 999 ms")
        #expect(set.lookup(key, now: DedupSet.Limits.expiryMs) == nil, "forgotten at 300 000 ms (counted from the first sighting)")
    }

    @Test(arguments: DedupPool.allCases)
    func dedupCapacityTrimsOnlyItsOwnPool(pool: DedupPool) {
        var set = DedupSet()
        let others = DedupPool.allCases.filter { $0 != pool }
        for (index, other) in others.enumerated() { set.insert(Self.key(index, sender: 99), into: other, now: 1) }
        let capacity = DedupSet.Limits.capacity(pool)
        for i in 0..<capacity { set.insert(Self.key(i), into: pool, now: 1) }
        #expect(set.count(in: pool) == capacity, "n = capacity keys kept")
        let evicted = set.insert(Self.key(capacity), into: pool, now: 1)
        #expect(set.count(in: pool) == capacity * 3 / 4 && evicted == capacity + 1 - capacity * 3 / 4, "n + 1 trims to ¾")
        #expect(set.contains(Self.key(capacity)) && !set.contains(Self.key(0)))
        for (index, other) in others.enumerated() {
            #expect(set.lookup(Self.key(index, sender: 99), now: 1) == other, "another pool's key survives the trim")
        }
    }

    func fragment(_ id: UInt64, _ index: Int, total: Int, bytes: Int) -> FragmentPayload {
        FragmentPayload(fragmentID: id, index: UInt16(index), total: UInt16(total), originalType: .message,
                        chunk: [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: bytes))
    }

    @Test func reassemblyInReverseOrderWithDuplicates() {
        var r = Reassembler()
        let frame = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let sender = MeshPeerID(rawValue: 5)
        func fragment(_ i: Int) -> FragmentPayload {
            FragmentPayload(fragmentID: 1, index: UInt16(i), total: 3, originalType: .message, chunk: Array(frame[(i * 100)..<(i * 100 + 100)]))
        }
        let outcomes = [2, 2, 1, 0].map { r.add(fragment($0), from: sender, trusted: true, now: 0) }
        #expect(outcomes == [.incomplete, .incomplete, .incomplete, .complete(frame)])
        #expect(r.accountedBytes == 0, "a completed set gives its bytes back")
    }

    @Test func reassemblyTimeoutAndMismatch() {
        var r = Reassembler()
        let sender = MeshPeerID(rawValue: 5)
        _ = r.add(fragment(1, 0, total: 2, bytes: 1), from: sender, trusted: false, now: 0)
        r.sweep(now: Reassembler.Limits.timeoutMs - 1)
        #expect(r.activeCount == 1)
        r.sweep(now: Reassembler.Limits.timeoutMs)
        #expect(r.activeCount == 0 && r.takeEvents()[.expired] == 1 && r.accountedBytes == 0)
        _ = r.add(fragment(2, 0, total: 2, bytes: 1), from: sender, trusted: false, now: 0)
        let mismatch = r.add(fragment(2, 1, total: 3, bytes: 1), from: sender, trusted: false, now: 0)
        #expect(mismatch == .rejected(.mismatch) && r.activeCount == 0)
    }

    @Test func reassemblyByteCapBoundary() {
        var r = Reassembler()
        let cap = Reassembler.Limits.maxBytesPerSet
        let sender = MeshPeerID(rawValue: 1)
        let atCap = r.add(fragment(1, 0, total: 2, bytes: cap), from: sender, trusted: true, now: 0)
        #expect(atCap == .incomplete, "n = 1 MiB of chunk bytes is kept")
        let overCap = r.add(fragment(2, 0, total: 2, bytes: cap + 1), from: sender, trusted: true, now: 0)
        #expect(overCap == .rejected(.setTooLarge), "n + 1 drops the set")
        #expect(r.accountedBytes == cap + Reassembler.Limits.perFragmentOverhead)
    }

    /// Slots: a full pool evicts its oldest set, and only its own.
    @Test func reassemblySlotsPerPool() {
        var r = Reassembler()
        for id in 0..<Reassembler.Limits.strangerSlots {
            _ = r.add(fragment(UInt64(id), 0, total: 2, bytes: 1), from: MeshPeerID(rawValue: UInt64(100 + id)), trusted: false, now: UInt64(id))
        }
        for id in 0..<Reassembler.Limits.trustedSlots {
            _ = r.add(fragment(UInt64(id), 0, total: 2, bytes: 1), from: MeshPeerID(rawValue: UInt64(1_000 + id)), trusted: true, now: UInt64(id))
        }
        #expect(r.sets(in: .stranger) == Reassembler.Limits.strangerSlots && r.sets(in: .trusted) == Reassembler.Limits.trustedSlots)
        #expect(r.takeEvents().total == 0, "n sets per pool fit")
        _ = r.add(fragment(999, 0, total: 2, bytes: 1), from: MeshPeerID(rawValue: 7), trusted: false, now: 500)
        #expect(r.sets(in: .stranger) == Reassembler.Limits.strangerSlots && r.sets(in: .trusted) == Reassembler.Limits.trustedSlots)
        #expect(r.takeEvents()[.evictedSlot] == 1, "n + 1 evicts the stranger pool's oldest, not a trusted set")
        // The evicted one was the oldest: its next fragment starts a new set (evicting the next oldest).
        _ = r.add(fragment(0, 1, total: 2, bytes: 1), from: MeshPeerID(rawValue: 100), trusted: false, now: 501)
        #expect(r.takeEvents()[.evictedSlot] == 1)
    }

    /// Bytes: a pool over its budget evicts its largest set first, so a bomb goes before a deposit.
    @Test func reassemblyByteBudgetEvictsTheLargestSetFirst() {
        var r = Reassembler()
        let chunk = 60_000
        let deposit = MeshPeerID(rawValue: 1)
        #expect(r.add(fragment(1, 0, total: 3, bytes: 400), from: deposit, trusted: false, now: 0) == .incomplete)
        var bomb: UInt64 = 100
        var held = 0
        // Megabyte trains from strangers, one fragment short each, until the budget is passed many times over.
        for train in 0..<8 {
            bomb += 1
            for index in 0..<16 {
                _ = r.add(fragment(UInt64(train), index, total: 17, bytes: chunk), from: MeshPeerID(rawValue: bomb), trusted: false, now: 1)
                held = max(held, r.accountedBytes(in: .stranger))
            }
        }
        #expect(held <= Reassembler.Limits.strangerBudget, "the stranger pool never held more than its budget")
        #expect(r.takeEvents()[.evictedBytes] > 0)
        #expect(r.add(fragment(1, 1, total: 3, bytes: 400), from: deposit, trusted: false, now: 2) == .incomplete)
        if case .complete(let frame) = r.add(fragment(1, 2, total: 3, bytes: 400), from: deposit, trusted: false, now: 2) {
            #expect(frame.count == 1_200, "the small train survived the bomb beside it")
        } else {
            Issue.record("the deposit's train did not complete")
        }
    }

    /// A sender holds at most 4 sets: forging a peer's ID costs that peer, not the others.
    @Test func reassemblySenderQuota() {
        var r = Reassembler()
        let forged = MeshPeerID(rawValue: 1)
        let other = MeshPeerID(rawValue: 2)
        _ = r.add(fragment(1, 0, total: 2, bytes: 10), from: other, trusted: true, now: 0)
        for id in 0..<UInt64(Reassembler.Limits.maxSetsPerSender) {
            _ = r.add(fragment(id, 0, total: 2, bytes: 10), from: forged, trusted: true, now: 1 + id)
        }
        #expect(r.takeEvents().total == 0, "n = 4 sets of one sender are kept")
        _ = r.add(fragment(99, 0, total: 2, bytes: 10), from: forged, trusted: true, now: 10)
        #expect(r.takeEvents()[.evictedSenderQuota] == 1, "the 5th evicts that sender's own oldest")
        #expect(r.sets(in: .trusted) == 1 + Reassembler.Limits.maxSetsPerSender)
        #expect(r.add(fragment(1, 1, total: 2, bytes: 10), from: other, trusted: true, now: 11) != .incomplete, "the other peer's set is intact")
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
        #expect(h.engine.counters.decode[MeshDecodeRejection(.fragment, .truncated(field: .fragmentHeader, needed: 13, available: 3))] == 1)
    }
}
