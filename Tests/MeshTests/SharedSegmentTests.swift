import BitchatWire
import BotCrypto
import BotSupport
@testable import Mesh
import MeshSync
import Testing

/// Issue 22 part 3: a link may carry several peers. A radio-hub segment is one TCP link for the bridge but a
/// shared medium for the phones on it; each phone whose origin-TTL announce verified there is a direct peer of
/// that link, is asked for sync and answered, and split horizon works per link.
@Suite("Peer engine: shared segments (several direct peers on one link)")
struct SharedSegmentTests {
    static func harness() -> EngineHarness {
        var h = EngineHarness()
        var configuration = MeshPeerEngine.Configuration()
        configuration.sync = SyncRequester.Configuration()
        h.engine = MeshPeerEngine(identity: makeIdentity("bridge"), configuration: configuration)
        _ = h.engine.handle(.linkUp(h.link, mtu: 512, kind: .shared), now: h.now, random: &h.random)
        return h
    }

    static func syncRequest(from phone: Phone, to bridge: MeshPeerID, at now: UInt64) throws -> [UInt8] {
        try MeshPacket(
            type: .requestSync, ttl: 0, timestamp: now, sender: phone.id, recipient: bridge,
            payload: RequestSyncPayload(p: 7, m: 1, data: []).encode()
        ).signed(with: phone.signing).encode()
    }

    static func requests(_ actions: [MeshAction]) -> [(MeshLinkID, SyncRequestInput)] {
        actions.compactMap { if case .syncRequest(let link, let input) = $0 { (link, input) } else { nil } }
    }

    @Test("two phones on one segment: both are direct peers, both get their initial round, and the later one's signed REQUEST_SYNC is answered")
    func laterPhoneGetsSync() throws {
        var h = Self.harness()
        let early = Phone(), late = Phone()
        _ = h.feed(try early.announce(at: h.now))
        h.now += 5_000
        _ = h.feed(try late.announce(at: h.now))
        #expect(h.engine.directPeers(on: h.link) == [early.id, late.id])
        #expect(h.engine.peers[late.id]?.isDirect == true)
        // Each one's initial round, 1 s after it became direct (BOARD.md §13.1).
        let rounds = h.engine.handle(.tick, now: h.now + 1_000, random: &h.random).compactMap {
            if case .syncRoundDue(let round) = $0 { round.peer } else { nil }
        }
        #expect(Set(rounds) == [early.id, late.id])

        // The bridge's responder (the real one, with a store holding one message) answers both phones.
        let store = MemoryGossipStore()
        let author = Phone()
        store.record(try SyncPacket(MeshPacket.decode(author.announce(at: h.now))), now: h.now)
        store.record(try SyncPacket(MeshPacket.decode(author.message("held for late phones", at: h.now))), now: h.now)
        var responder = SyncResponder()
        for phone in [early, late] {
            let actions = h.feed(try Self.syncRequest(from: phone, to: h.engine.identity.peerID, at: h.now + 2_000))
            let (link, input) = try #require(Self.requests(actions).first)
            #expect(link == h.link && input.linkPeers == [early.id, late.id])
            let answer = responder.answer(input, gossip: store, board: MemoryBoardStore(), now: h.now + 2_000)
            #expect(answer.refusal == nil && answer.frames.count == 2, "\(phone.id): \(String(describing: answer.refusal))")
        }
        // A signed request from a verified peer that is not direct on this link is still refused (check 2).
        let elsewhere = Phone()
        _ = h.feed(try elsewhere.announce(at: h.now, ttl: 5))
        let relayedOnly = h.feed(try Self.syncRequest(from: elsewhere, to: h.engine.identity.peerID, at: h.now + 2_000))
        let input = try #require(Self.requests(relayedOnly).first?.1)
        #expect(responder.answer(input, gossip: store, board: MemoryBoardStore(), now: h.now + 2_000).refusal == .senderNotLinkPeer)
    }

    @Test("RSR replies are taken on the segment after the rounds to its phones (the rule itself: RequesterTests)")
    func rsrOnTheSegment() throws {
        var h = Self.harness()
        let first = Phone(), second = Phone()
        _ = h.feed(try first.announce(at: h.now))
        _ = h.feed(try second.announce(at: h.now + 1))
        _ = h.engine.handle(.tick, now: h.now + 1_001, random: &h.random)  // both initial rounds go out
        h.now += 2_000
        let stored = try MeshPacket(type: .message, timestamp: h.now - 600_000, sender: second.id, payload: Array("old".utf8))
            .signed(with: second.signing)
        let taken = h.feed(try stored.asSyncReply.encode())
        #expect(taken.contains { if case .publicMessage(let m) = $0 { m.text == "old" && m.ttl == 0 } else { false } })
        #expect(h.engine.counters.ingress[.unsolicitedRSR] == 0)
    }

    @Test("split horizon per link: a frame is never sent back where all its direct peers heard it, and still reaches a link with a peer who did not")
    func splitHorizonPerLink() throws {
        var h = EngineHarness(kind: .shared)
        let segment = h.link, ble = MeshLinkID(2), otherSegment = MeshLinkID(3)
        _ = h.engine.handle(.linkUp(ble, mtu: 512), now: h.now, random: &h.random)
        _ = h.engine.handle(.linkUp(otherSegment, mtu: 512, kind: .shared), now: h.now, random: &h.random)
        let p = Phone(), q = Phone(), r = Phone()
        // P and Q share the segment; P is also connected over BLE (link 2); P and R share the other segment.
        _ = h.feed(try p.announce(at: h.now), on: segment)
        _ = h.feed(try q.announce(at: h.now), on: segment)
        _ = h.feed(try p.announce(at: h.now), on: ble)  // the same announce on a second link: P is direct there too
        h.now += 1
        _ = h.feed(try p.announce(at: h.now), on: otherSegment)
        _ = h.feed(try r.announce(at: h.now), on: otherSegment)
        #expect(h.engine.directPeers(on: segment) == [p.id, q.id])
        #expect(h.engine.directPeers(on: ble) == [p.id])
        #expect(h.engine.directPeers(on: otherSegment) == [p.id, r.id])

        func relayLinks(_ frame: [UInt8], on link: MeshLinkID) -> Set<MeshLinkID> {
            Set(h.feed(frame, on: link).compactMap { if case .transmit(let l, _, _) = $0 { l } else { nil } })
        }
        // Q speaks on the segment: P heard it there, so not over BLE; R did not, so the other segment gets it.
        // (The old rule bound the segment to its first announcer P and skipped every link bound to P — the
        // other segment included, where R never heard the message.)
        #expect(relayLinks(try q.message("from q", at: h.now + 10), on: segment) == [otherSegment])
        // R speaks on the other segment: both of the first segment's phones need it; P's BLE link does not.
        #expect(relayLinks(try r.message("from r", at: h.now + 20), on: otherSegment) == [segment])
        // P speaks over BLE: each segment has a phone that did not hear it.
        #expect(relayLinks(try p.message("from p", at: h.now + 30), on: ble) == [segment, otherSegment])
    }

    @Test("a phone that leaves the table leaves its segment; link down makes its phones indirect")
    func membershipFollowsTheTableAndTheLink() throws {
        var h = Self.harness()
        let a = Phone(), b = Phone()
        _ = h.feed(try a.announce(at: h.now))
        _ = h.feed(try b.announce(at: h.now))
        let leave = try MeshPacket(type: .leave, timestamp: h.now + 5, sender: a.id, payload: []).signed(with: a.signing).encode()
        _ = h.feed(leave)
        #expect(h.engine.directPeers(on: h.link) == [b.id])
        _ = h.engine.handle(.linkDown(h.link), now: h.now + 10, random: &h.random)
        #expect(h.engine.directPeers(on: h.link).isEmpty)
        #expect(h.engine.peers[b.id]?.isDirect == false)
    }
}
