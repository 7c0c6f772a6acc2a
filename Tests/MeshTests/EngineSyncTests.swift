import BitchatWire
import BotCrypto
import BotSupport
@testable import Mesh
import MeshSync
import Testing

/// The engine's side of gossip sync (issue 17), with ``MeshPeerEngine/Configuration/sync`` on: requests and
/// verified packets handed to the owner as data, rounds on the requester's schedule, RSR taken only in its
/// window, board packets relayed only on the owner's word, replies sent as given.
@Suite("Peer engine: gossip sync wiring")
struct EngineSyncTests {
    static func harness() -> EngineHarness {
        var h = EngineHarness()
        var configuration = MeshPeerEngine.Configuration()
        configuration.sync = SyncRequester.Configuration()
        h.engine = MeshPeerEngine(identity: makeIdentity("bridge"), configuration: configuration)
        _ = h.engine.handle(.linkUp(h.link, mtu: 512), now: h.now, random: &h.random)
        return h
    }

    @Test("a direct announce is stored, binds the link and makes the initial round due 1 s later")
    func initialRound() throws {
        var h = Self.harness()
        let phone = Phone()
        let actions = h.feed(try phone.announce(at: h.now))
        #expect(actions.contains { if case .syncStore(let p) = $0 { p.type == .announce && p.sender == phone.id } else { false } })
        #expect(h.engine.handle(.tick, now: h.now + 999, random: &h.random).allSatisfy { if case .syncRoundDue = $0 { false } else { true } })
        let due = h.engine.handle(.tick, now: h.now + 1_000, random: &h.random)
        #expect(due.contains(.syncRoundDue(SyncRound(peer: phone.id, types: [.announce, .message, .board]))))
        // The owner's payload goes out signed, TTL 0, to the phone's link.
        let payload = RequestSyncPayload(p: 7, m: 1, data: [], types: SyncTypes.publicMessages.rawValue)
        let sent = h.engine.handle(.sendSyncRequest(peer: phone.id, payload: payload), now: h.now + 1_001, random: &h.random)
        guard case .transmit(let link, let frame, _)? = sent.first else {
            Issue.record("no transmit")
            return
        }
        #expect(link == h.link)
        let request = try MeshPacket.decode(frame)
        #expect(request.type == .requestSync && request.ttl == 0 && request.recipient == phone.id)
        #expect(request.verifySignature(h.engine.identity.signingKey.publicKey).isValid)
        // The owner's filter, with the engine's own latest announce put in (the owner built it before knowing of it).
        let decoded = try RequestSyncPayload.decode(request.payload)
        #expect(decoded.types == payload.types && decoded.p == payload.p)
        let ours = try #require(h.engine.lastAnnounce)
        #expect(GCSFilter.Membership(decoded).mightContain(h64: GCSFilter.h64(MeshMessageIdentity.packetID(ours))))
        #expect(decoded == payload.covering(MeshMessageIdentity.packetID(ours)))
    }

    @Test("RSR frames: taken (whatever their age) within 30 s of a round to the link's peer, dropped otherwise")
    func rsrWindow() throws {
        var h = Self.harness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        func rsr(_ text: String, age: UInt64, at now: UInt64) throws -> [UInt8] {
            var packet = try MeshPacket(type: .message, timestamp: now - age, sender: phone.id, payload: Array(text.utf8)).signed(with: phone.signing)
            packet = packet.asSyncReply
            return try packet.encode()
        }
        h.now += 500
        let early = h.feed(try rsr("before any round", age: 600_000, at: h.now))
        #expect(!early.contains { if case .publicMessage = $0 { true } else { false } })
        #expect(h.engine.counters.ingress[.unsolicitedRSR] == 1)
        _ = h.engine.handle(.tick, now: h.now + 500, random: &h.random)
        h.now += 30_500
        let taken = h.feed(try rsr("ten minutes old", age: 600_000, at: h.now))
        #expect(taken.contains { if case .publicMessage(let m) = $0 { m.text == "ten minutes old" && m.ttl == 0 } else { false } })
        #expect(taken.contains { if case .syncStore(let p) = $0 { p.type == .message } else { false } })
        #expect(!taken.contains { if case .transmit = $0 { true } else { false } }, "TTL 0: never relayed")
        h.now += 1
        _ = h.feed(try rsr("too late", age: 1_000, at: h.now))
        #expect(h.engine.counters.ingress[.unsolicitedRSR] == 2)
    }

    @Test("a REQUEST_SYNC goes to the owner with the link's peer and the pinned key; replies go out as given")
    func requestAndReplies() throws {
        var h = Self.harness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        let request = try MeshPacket(
            type: .requestSync, ttl: 0, timestamp: h.now, sender: phone.id, recipient: h.engine.identity.peerID,
            payload: RequestSyncPayload(p: 7, m: 1, data: []).encode()
        ).signed(with: phone.signing)
        let actions = h.feed(try request.encode())
        let expected = SyncRequestInput(packet: try MeshPacket.decode(request.encode()), linkPeers: [phone.id], pinnedKey: phone.signing.publicKey)
        #expect(actions.contains(.syncRequest(link: h.link, expected)))
        #expect(!actions.contains { if case .transmit = $0 { true } else { false } }, "never relayed")
        // A reply larger than the MTU is cut into fragments that keep TTL 0 and RSR.
        let big = try MeshPacket(type: .message, timestamp: h.now, sender: phone.id, payload: [UInt8](repeating: 0x61, count: 900))
            .signed(with: phone.signing).asSyncReply.encode(compression: .none)
        let small = try MeshPacket.syncReplyFrame(phone.message("hi", at: h.now))!
        let out = h.engine.handle(.sendSyncReplies(link: h.link, frames: [small, big]), now: h.now, random: &h.random)
        let frames = out.compactMap { if case .transmit(_, let frame, _) = $0 { frame } else { nil } }
        #expect(frames.first == small)
        #expect(frames.count > 2)
        for fragment in frames.dropFirst() {
            let packet = try MeshPacket.decode(fragment)
            #expect(packet.type == .fragment && packet.ttl == 0 && packet.isRSR && fragment.count <= 512)
        }
    }

    @Test("board packets wait for the owner; relayBoard relays with the §7 TTL (urgent: 7 → 6 at degree 3)")
    func boardRelay() throws {
        var h = Self.harness()
        for n: UInt64 in 2...3 { _ = h.engine.handle(.linkUp(MeshLinkID(n), mtu: 512), now: h.now, random: &h.random) }
        let author = try Ed25519PrivateKey(seed: [UInt8](repeating: 3, count: 32))
        let post = try BoardPost.signed(
            postID: [UInt8](repeating: 1, count: 16), geohash: "", content: "water at gate C", nickname: "ops",
            createdAt: h.now, expiresAt: h.now + 3_600_000, flags: BoardPost.urgentFlag, key: author)
        let packet = MeshPacket(type: .boardPost, timestamp: h.now, sender: MeshPeerID(rawValue: 42), payload: BoardPayload.post(post).encode())
        let actions = h.feed(try packet.encode())
        #expect(actions.contains { if case .boardPacket(let p, let link) = $0 { p.type == .boardPost && link == h.link } else { false } })
        #expect(!actions.contains { if case .transmit = $0 { true } else { false } })
        let relayed = h.engine.handle(.relayBoard(try MeshPacket.decode(packet.encode()), from: h.link), now: h.now, random: &h.random)
        let frames = relayed.compactMap { if case .transmit(let link, let frame, _) = $0 { (link, frame) } else { nil } }
        #expect(!frames.isEmpty && frames.allSatisfy { $0.0 != h.link })
        #expect(try frames.allSatisfy { try MeshPacket.decode($0.1).ttl == 6 })
    }

    @Test("broadcastBoard sends a packet from elsewhere on every link at TTL 7, every other byte as it came; its echo is a duplicate")
    func broadcastBoard() throws {
        var h = Self.harness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let author = try Ed25519PrivateKey(seed: [UInt8](repeating: 4, count: 32))
        let post = try BoardPost.signed(
            postID: [UInt8](repeating: 2, count: 16), geohash: "u4pruy", content: "stage change: 21:00", nickname: "ops",
            createdAt: h.now - 5_000, expiresAt: h.now + 3_600_000, flags: 0, key: author)
        let packet = try MeshPacket(
            type: .boardPost, ttl: 2, timestamp: h.now - 5_000, sender: MeshPeerID(rawValue: 77), payload: BoardPayload.post(post).encode()
        ).signed(with: author)
        let sent = h.engine.handle(.broadcastBoard(packet), now: h.now, random: &h.random)
        let frames = sent.compactMap { if case .transmit(let link, let frame, _) = $0 { (link, frame) } else { nil } }
        #expect(Set(frames.map(\.0)) == [h.link, MeshLinkID(2)])
        for (_, frame) in frames {
            let out = try MeshPacket.decode(frame)
            #expect(out.ttl == 7 && out.timestamp == packet.timestamp && out.sender == packet.sender)
            #expect(out.payload == packet.payload && out.signature == packet.signature)
        }
        // A phone relays it back: the engine has it already, so the owner is not asked again.
        var echo = packet
        echo.ttl = 6
        let again = h.feed(try echo.encode())
        #expect(!again.contains { if case .boardPacket = $0 { true } else { false } }, "\(again)")
    }

    @Test("without sync configured nothing changes: RSR dropped, REQUEST_SYNC only counted, board relayed blindly")
    func offByDefault() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        let request = try MeshPacket(type: .requestSync, ttl: 0, timestamp: h.now, sender: phone.id, payload: RequestSyncPayload(p: 7, m: 1, data: []).encode())
            .signed(with: phone.signing)
        let actions = h.feed(try request.encode())
        #expect(!actions.contains { if case .syncRequest = $0 { true } else { false } })
        #expect(!actions.contains { if case .syncStore = $0 { true } else { false } })
    }
}
