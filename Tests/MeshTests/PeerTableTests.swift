import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
import Testing

/// Issue 14, "announce flood hides real phones" and "leak": the peer table's two pools and its removals.
@Suite("Peer table: established peers survive floods; every removal is reported")
struct PeerTableTests {
    /// A signed announce of a fresh identity with a random noise key (the engine only checks that it hashes
    /// to the sender), relayed-looking (TTL 1, so nobody relays it further).
    static func floodAnnounce(_ index: Int, at time: UInt64, random: inout SeededRandom) throws -> [UInt8] {
        let noise = (0..<32).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let signing = Ed25519PrivateKey.generate()
        let payload = try AnnouncePayload(nickname: "flood\(index)", noisePublicKey: noise,
                                          signingPublicKey: signing.publicKey.rawRepresentation).encode()
        var packet = try MeshPacket(type: .announce, timestamp: time, sender: MeshPeerID(noisePublicKey: noise), payload: payload)
            .signed(with: signing)
        packet.ttl = 1
        return try packet.encode()
    }

    /// Announces of fresh identities, as a flooder makes them: valid keys, valid signatures, one each.
    /// TTL 1, as if relayed (a direct TTL-7 announce would bind the link).
    static func floodAnnounces(_ count: Int, start: UInt64, spacingMs: UInt64) throws -> [(time: UInt64, frame: [UInt8])] {
        try (0..<count).map { i in
            let time = start + UInt64(i) * spacingMs
            return (time, try Phone().announce(at: time, ttl: 1, nickname: "flood\(i)"))
        }
    }

    static func lost(_ actions: [MeshAction]) -> [(MeshPeerID, MeshPeerLossReason)] {
        actions.compactMap { if case .peerLost(let id, let reason) = $0 { (id, reason) } else { nil } }
    }

    /// The scenario: phones with a history, then 20,000 fresh identities in 60 s. The old single
    /// 1,024-entry LRU table evicted every phone (0 of 12 messages verified afterwards). The time limit is a
    /// backstop: ~25 s alone on a loaded 2-core machine, more inside a full parallel run.
    @Test(.timeLimit(.minutes(5)))
    func established12PhonesSurviveA20000IdentityFloodAndTheirMessagesVerify() async throws {
        var h = EngineHarness()
        var verified: Set<MeshPeerID> = []
        var lostIDs: [MeshPeerID: MeshPeerLossReason] = [:]
        func track(_ actions: [MeshAction]) {
            for action in actions {
                switch action {
                case .peerVerified(let peer): verified.insert(peer.id)
                case .peerLost(let id, let reason): lostIDs[id] = reason; verified.remove(id)
                default: break
                }
            }
        }
        // 12 phones: 4 established by a verified message, 4 by age (announces 30 s apart), 4 by both.
        let phones = (0..<12).map { _ in Phone() }
        for phone in phones { track(h.feed(try phone.announce(at: h.now, ttl: 3))) }
        for phone in phones[0..<4] + phones[8..<12] { track(h.feed(try phone.message("hello from \(phone.id)", at: h.now + 1))) }
        h.now += PeerTable.Limits.establishAfterMs
        for phone in phones[4..<12] { track(h.feed(try phone.announce(at: h.now, ttl: 3))) }
        for phone in phones { #expect(h.engine.isEstablished(phone.id), "\(phone.id) established before the flood") }

        // 20,000 identities in 60 s (3 ms apart); the engine ticks every second as the node makes it, and the
        // phones re-announce every 15 s as the apps do (MESH-WIRE §4.7.5, sparse cadence).
        // (Generated as it goes, yielding now and then: the test must not hold a cooperative thread for long
        // beside the suites that run in parallel.)
        let floodStart = h.now + 1
        var floodRandom = SeededRandom(seed: 20_000)
        var nextTick = h.now + 1_000
        var nextPhoneAnnounce = h.now + 15_000
        for i in 0..<20_000 {
            if i % 128 == 0 { await Task.yield() }
            let time = floodStart + UInt64(i) * 3
            let frame = try Self.floodAnnounce(i, at: time, random: &floodRandom)
            h.now = time
            if time >= nextTick {
                track(h.engine.handle(.tick, now: time, random: &h.random))
                nextTick += 1_000
            }
            if time >= nextPhoneAnnounce {
                for phone in phones { track(h.feed(try phone.announce(at: time, ttl: 3))) }
                nextPhoneAnnounce += 15_000
            }
            track(h.feed(frame))
        }
        #expect(h.engine.peers.count <= MeshPeerEngine.Limits.maxPeers)
        #expect(h.engine.counters.peers[.lostEvicted] >= 20_000 - PeerTable.Limits.maxFirstContact)
        // The phones last announced 15 s ago, 5,000 identities back: the old table had evicted them all.
        var crossed = 0
        for (index, phone) in phones.enumerated() {
            #expect(h.engine.peers[phone.id] != nil, "phone \(index) still known")
            let actions = h.feed(try phone.message("after the flood \(index)", at: h.now))
            if actions.contains(where: { if case .publicMessage(let m) = $0 { m.sender == phone.id } else { false } }) { crossed += 1 }
        }
        #expect(crossed == 12, "\(crossed) of 12 messages of established phones verified after the flood")
        // Leak: what a consumer keeps from peerVerified minus peerLost is exactly the table.
        #expect(verified == Set(h.engine.peers.keys), "every removal was reported")
        #expect(phones.allSatisfy { lostIDs[$0.id] == nil })
        print("announce flood: 20,000 identities, \(h.engine.counters.peers[.lostEvicted]) evicted and reported, "
            + "table \(h.engine.peers.count), established phones' messages verified: \(crossed) of 12")
    }

    static func peer(_ id: UInt64, lastSeen: UInt64, direct: Bool = false) -> MeshPeer {
        MeshPeer(id: MeshPeerID(rawValue: id), nickname: "p\(id)", noisePublicKey: [], signingPublicKey: key,
                 capabilities: nil, bridgeGeohash: nil, lastSeen: lastSeen, isDirect: direct)
    }

    static let key = Ed25519PrivateKey.generate().publicKey

    @Test func firstContactPoolEvictsItsLeastRecentlySeenAtNPlusOne() {
        var table = PeerTable()
        var counters = MeshCounters()
        let established = Self.peer(1, lastSeen: 0)
        _ = table.recordAnnounce(established, now: 0, counters: &counters)
        _ = table.recordTraffic(established.id, now: 0, counters: &counters)
        for i in 0..<PeerTable.Limits.maxFirstContact {
            #expect(table.recordAnnounce(Self.peer(UInt64(100 + i), lastSeen: UInt64(10 + i)), now: UInt64(10 + i), counters: &counters).isEmpty)
        }
        #expect(table.firstContactCount == PeerTable.Limits.maxFirstContact, "n = 1 024 first contacts kept")
        let evicted = table.recordAnnounce(Self.peer(99_999, lastSeen: 5_000), now: 5_000, counters: &counters)
        #expect(evicted == [MeshPeerID(rawValue: 100)], "n + 1 evicts the least recently seen first contact")
        #expect(table[established.id] != nil && table.establishedCount == 1)
    }

    @Test func ageEstablishesAtTheBoundary() {
        var table = PeerTable()
        var counters = MeshCounters()
        _ = table.recordAnnounce(Self.peer(1, lastSeen: 0), now: 0, counters: &counters)
        _ = table.recordAnnounce(Self.peer(1, lastSeen: PeerTable.Limits.establishAfterMs - 1), now: PeerTable.Limits.establishAfterMs - 1, counters: &counters)
        #expect(!table.isEstablished(MeshPeerID(rawValue: 1)), "29 999 ms after the first announce: still first contact")
        _ = table.recordAnnounce(Self.peer(1, lastSeen: PeerTable.Limits.establishAfterMs), now: PeerTable.Limits.establishAfterMs, counters: &counters)
        #expect(table.isEstablished(MeshPeerID(rawValue: 1)) && table.evidence(of: MeshPeerID(rawValue: 1)) == .age)
    }

    /// A full established pool gives up its weakest evidence first, and never for a weaker newcomer.
    @Test func fullEstablishedPoolEvictsWeakestEvidenceThenLeastRecent() {
        var table = PeerTable()
        var counters = MeshCounters()
        let age = PeerTable.Limits.establishAfterMs
        // Half established by traffic, half by age; the age ones seen more recently.
        for i in 0..<PeerTable.Limits.maxEstablished {
            let id = UInt64(i + 1)
            _ = table.recordAnnounce(Self.peer(id, lastSeen: 0), now: 0, counters: &counters)
            if i % 2 == 0 {
                _ = table.recordTraffic(MeshPeerID(rawValue: id), now: 1, counters: &counters)
            } else {
                _ = table.recordAnnounce(Self.peer(id, lastSeen: age + id), now: age + id, counters: &counters)
            }
        }
        #expect(table.establishedCount == PeerTable.Limits.maxEstablished && table.firstContactCount == 0)
        // A newcomer established by age evicts the least recently seen age-established peer (id 2), not a
        // traffic-established one, although those were seen longer ago.
        let t = 10 * age
        _ = table.recordAnnounce(Self.peer(50_000, lastSeen: 0), now: 0, counters: &counters)
        let evicted = table.recordAnnounce(Self.peer(50_000, lastSeen: t), now: t, counters: &counters)
        #expect(evicted == [MeshPeerID(rawValue: 2)])
        #expect(table.isEstablished(MeshPeerID(rawValue: 50_000)))
        // Once only traffic-established peers are left to give up, an age newcomer is refused.
        for i in stride(from: 4, through: PeerTable.Limits.maxEstablished, by: 2) {
            table.remove(MeshPeerID(rawValue: UInt64(i)))
            _ = table.recordAnnounce(Self.peer(UInt64(60_000 + i), lastSeen: 0), now: 0, counters: &counters)
            _ = table.recordTraffic(MeshPeerID(rawValue: UInt64(60_000 + i)), now: t, counters: &counters)
        }
        table.remove(MeshPeerID(rawValue: 50_000))
        _ = table.recordAnnounce(Self.peer(70_000, lastSeen: 0), now: 0, counters: &counters)
        _ = table.recordTraffic(MeshPeerID(rawValue: 70_000), now: t, counters: &counters)
        #expect(table.establishedCount == PeerTable.Limits.maxEstablished)
        let refusedBefore = counters.peers[.promotionRefused]
        _ = table.recordAnnounce(Self.peer(80_000, lastSeen: 0), now: 0, counters: &counters)
        #expect(table.recordAnnounce(Self.peer(80_000, lastSeen: t + 1), now: t + 1, counters: &counters).isEmpty)
        #expect(!table.isEstablished(MeshPeerID(rawValue: 80_000)) && counters.peers[.promotionRefused] == refusedBefore + 1)
        // A traffic newcomer does get in, evicting the least recently seen traffic peer.
        #expect(table.recordTraffic(MeshPeerID(rawValue: 80_000), now: t + 2, counters: &counters) == [MeshPeerID(rawValue: 1)])
    }

    @Test func directPeersAreNeverEvicted() {
        var table = PeerTable()
        var counters = MeshCounters()
        _ = table.recordAnnounce(Self.peer(1, lastSeen: 0, direct: true), now: 0, counters: &counters)
        #expect(table.isEstablished(MeshPeerID(rawValue: 1)), "a bound link is evidence enough")
        for i in 0..<(PeerTable.Limits.maxFirstContact + 10) {
            _ = table.recordAnnounce(Self.peer(UInt64(100 + i), lastSeen: UInt64(1 + i)), now: UInt64(1 + i), counters: &counters)
        }
        #expect(table[MeshPeerID(rawValue: 1)] != nil)
    }

    /// Timeout, leave and eviction each end in one `peerLost` with its reason.
    @Test func everyRemovalIsReportedWithItsReason() throws {
        var h = EngineHarness()
        let leaver = Phone()
        let silent = Phone()
        _ = h.feed(try leaver.announce(at: h.now, ttl: 3))
        _ = h.feed(try silent.announce(at: h.now, ttl: 3))
        let leave = try MeshPacket(type: .leave, timestamp: h.now + 1, sender: leaver.id, payload: []).signed(with: leaver.signing).encode()
        #expect(Self.lost(h.feed(leave)).map(\.1) == [.leave])
        let timeout = h.engine.configuration.peerTimeoutMs
        #expect(Self.lost(h.engine.handle(.tick, now: h.now + timeout, random: &h.random)).isEmpty, "60 s exactly: kept")
        #expect(Self.lost(h.engine.handle(.tick, now: h.now + timeout + 1, random: &h.random)).map(\.0) == [silent.id])
        // Eviction: the first-contact pool full, one more.
        h.now += timeout + 2
        for (time, frame) in try Self.floodAnnounces(PeerTable.Limits.maxFirstContact + 1, start: h.now, spacingMs: 0) {
            let lost = Self.lost(h.engine.handle(.frame(h.link, frame), now: time, random: &h.random))
            #expect(lost.allSatisfy { $0.1 == .evicted })
        }
        #expect(h.engine.counters.peers[.lostEvicted] == 1 && h.engine.counters.peers[.lostLeave] == 1 && h.engine.counters.peers[.lostTimeout] == 1)
    }
}
