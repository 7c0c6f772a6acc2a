import BitchatWire
import BotCrypto
import BotSupport
@testable import Mesh
import MeshSync
import Testing

/// Issue 33: a link's direct peers as the apps keep them (APP-BEHAVIOUR §1, §4), and what the coming upstream changes
/// send (§5): unknown packet types, announce TLVs and capability bits.
@Suite("Peer engine: link bindings and what is coming upstream")
struct LinkBindingTests {
    static func announce(_ phone: Phone, at time: UInt64, ttl: UInt8 = 7, capabilities: [UInt8]? = nil, extra: [AnnouncePayload.UnknownTLV] = []) throws -> [UInt8] {
        let payload = try AnnouncePayload(
            nickname: "p", noisePublicKey: phone.noise.publicKey, signingPublicKey: phone.signing.publicKey.rawRepresentation,
            capabilities: capabilities.map { PeerCapabilities(encoded: $0) }, unknownTLVs: extra
        ).encode()
        var packet = try MeshPacket(type: .announce, timestamp: time, sender: phone.id, payload: payload).signed(with: phone.signing)
        packet.ttl = ttl
        return try packet.encode()
    }

    @Test("a BLE link binds one identity: a second one takes it only as iOS allows a rotation — bound nowhere else, once a minute")
    func pointLinkBindsOne() throws {
        var h = EngineHarness()
        let first = Phone(), second = Phone(), third = Phone()
        _ = h.feed(try first.announce(at: h.now))
        #expect(h.engine.directPeers(on: h.link) == [first.id])
        // A rotation: the link changes hands; the old identity is no longer direct (but still a peer).
        h.now += 1_000
        _ = h.feed(try second.announce(at: h.now))
        #expect(h.engine.directPeers(on: h.link) == [second.id])
        #expect(h.engine.peers[first.id]?.isDirect == false && h.engine.peers[second.id]?.isDirect == true)
        // Within the minute a third is refused: a verified peer, not a direct one.
        h.now += 30_000
        _ = h.feed(try third.announce(at: h.now))
        #expect(h.engine.directPeers(on: h.link) == [second.id] && h.engine.peers[third.id]?.isDirect == false)
        // An identity bound to another link cannot take this one, cooldown or not.
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        _ = h.feed(try third.announce(at: h.now + 1), on: MeshLinkID(2))
        h.now += 61_000
        _ = h.feed(try third.announce(at: h.now))
        #expect(h.engine.directPeers(on: h.link) == [second.id])
        #expect(h.engine.counters.links[.bound] == 2 && h.engine.counters.links[.rebound] == 1)
        #expect(h.engine.counters.links[.refusedCooldown] == 1 && h.engine.counters.links[.refusedBoundElsewhere] == 1)
    }

    @Test("a shared segment holds 32 direct peers; a flood of origin-TTL announces neither makes more direct nor grows the table past its caps")
    func sharedLinkIsBoundedAndTheTableHoldsItsCaps() throws {
        var h = EngineHarness(kind: .shared)
        var random = SeededRandom(seed: 33)
        for i in 0..<(MeshPeerEngine.Limits.maxPeers + 500) {
            let phone = Phone()
            _ = h.engine.handle(.frame(h.link, try phone.announce(at: h.now)), now: h.now, random: &random)
            if i % 100 == 0 { h.now += 1 }
        }
        #expect(h.engine.directPeers(on: h.link).count == LinkBindings.Limits.maxPeersPerSharedLink)
        #expect(h.engine.peers.count <= MeshPeerEngine.Limits.maxPeers, "\(h.engine.peers.count) peers")
        #expect(h.engine.counters.links[.refusedFull] == MeshPeerEngine.Limits.maxPeers + 500 - LinkBindings.Limits.maxPeersPerSharedLink)
    }

    @Test("unknown packet types (0x2A–0x2C, 0x50–0x54) are relayed by the TTL rules and never judged, shown, stored or mirrored")
    func unknownTypes() throws {
        var h = EngineHarness(identity: makeIdentity("bridge"))
        var configuration = MeshPeerEngine.Configuration()
        configuration.sync = SyncRequester.Configuration()
        configuration.gatePublicRelays = true
        h.engine = MeshPeerEngine(identity: makeIdentity("bridge"), configuration: configuration)
        for link in [h.link, MeshLinkID(2)] { _ = h.engine.handle(.linkUp(link, mtu: 512), now: h.now, random: &h.random) }
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        for type: UInt8 in [0x2a, 0x2b, 0x2c, 0x50, 0x51, 0x52, 0x53, 0x54] {
            for (ttl, relayed) in [(UInt8(7), true), (1, false)] {
                h.now += 1
                let frame = try MeshPacket(type: MessageType(rawValue: type), ttl: ttl, timestamp: h.now, sender: phone.id, payload: [type, 1, 2, 3])
                    .signed(with: phone.signing).encode()
                let actions = h.feed(frame)
                let sent = actions.compactMap { if case .transmit(let link, let bytes, _) = $0 { (link, try? MeshPacket.decode(bytes)) } else { nil } }
                #expect(sent.allSatisfy { $0.0 == MeshLinkID(2) && $0.1?.type.rawValue == type && $0.1?.ttl == ttl - 1 }, "0x\(String(type, radix: 16))")
                #expect(sent.isEmpty != relayed, "0x\(String(type, radix: 16)) at TTL \(ttl) relayed: \(!sent.isEmpty)")
                #expect(actions.allSatisfy { if case .transmit = $0 { true } else { false } }, "nothing but a relay: \(actions)")
            }
            // Addressed to us: not relayed, nothing else either.
            let directed = try MeshPacket(type: MessageType(rawValue: type), timestamp: h.now + 1, sender: phone.id,
                                          recipient: h.engine.identity.peerID, payload: [9]).signed(with: phone.signing).encode()
            #expect(h.feed(directed).isEmpty)
        }
    }

    @Test("announce TLVs and capability bits the bridge does not know are kept as they came: relayed unchanged, the known bits still read")
    func unknownTLVsAndCapabilities() throws {
        var h = EngineHarness()
        _ = h.engine.handle(.linkUp(MeshLinkID(2), mtu: 512), now: h.now, random: &h.random)
        let phone = Phone()
        // iOS PR #1438's courier bridge (`a9 13`: bridge, bit 12) with a third-party client's TLV 0x50.
        let frame = try Self.announce(phone, at: h.now, ttl: 5, capabilities: [0xa9, 0x13], extra: [.init(type: 0x50, value: [1, 2, 3])])
        let actions = h.feed(frame)
        let peer = try #require(h.engine.peers[phone.id])
        #expect(peer.capabilities?.contains(.bridge) == true && peer.capabilities?.rawValue == 0x13a9)
        let relayed = actions.compactMap { if case .transmit(_, let bytes, _) = $0 { try? MeshPacket.decode(bytes) } else { nil } }
            .first { $0.sender == phone.id }
        let payload = try #require(relayed.map { try AnnouncePayload.decode($0.payload) })
        #expect(payload.unknownTLVs == [.init(type: 0x50, value: [1, 2, 3])] && payload.capabilities?.encoded == [0xa9, 0x13])
        // Android PR #862's bit 14 (`00 41`), and bytes past the eighth ignored as both apps do.
        #expect(PeerCapabilities(encoded: [0x00, 0x41]).rawValue == 0x4100 && PeerCapabilities(encoded: [0x00, 0x41]).contains(.privateMedia))
        #expect(PeerCapabilities(encoded: [0x01, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb]) == .prekeys)
        #expect(PeerCapabilities(rawValue: 0x1329).encoded == [0x29, 0x13], "re-encoded as it came")
    }
}
