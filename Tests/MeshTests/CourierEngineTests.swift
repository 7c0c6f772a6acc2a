import BitchatWire
import BotCrypto
import BotSupport
import Mesh
import Testing

/// The engine's side of the courier gateway (issue 24, COURIER.md §2.1, §2.5): a 0x04 addressed to us is a deposit only
/// from a direct peer of the link it came on, signed by its sender's announced key; our handovers are directed, signed,
/// TTL 7, and only on links where the recipient is a direct peer.
@Suite("Courier envelopes in the engine")
struct CourierEngineTests {
    static let envelope = (1...40).map { UInt8($0) }

    static func deposits(_ actions: [MeshAction]) -> [(MeshPeerID, [UInt8])] {
        actions.compactMap { if case .courierDeposit(let from, let bytes) = $0 { (from, bytes) } else { nil } }
    }

    @Test("a signed 0x04 from a direct peer is a deposit; a bad signature, a sender relayed in, or one for another peer is not")
    func deposits() throws {
        let phone = Phone()
        var h = try RelayGateTests.gated(phone, gate: false)
        let bridge = h.engine.identity.peerID
        func packet(_ sender: Phone, to recipient: MeshPeerID = bridge, ttl: UInt8 = 7) -> MeshPacket {
            h.now += 10
            return MeshPacket(type: .courierEnvelope, ttl: ttl, timestamp: h.now, sender: sender.id, recipient: recipient, payload: Self.envelope)
        }
        let accepted = Self.deposits(h.feed(try packet(phone).signed(with: phone.signing).encode()))
        #expect(accepted.count == 1 && accepted.first?.0 == phone.id && accepted.first?.1 == Self.envelope)
        #expect(Self.deposits(h.feed(try packet(phone).signed(with: .generate()).encode())).isEmpty)
        // A phone whose announce reached us relayed (TTL 6) is not a direct peer: its deposit is refused.
        let far = Phone()
        _ = h.feed(try far.announce(at: h.now, ttl: 6))
        #expect(Self.deposits(h.feed(try packet(far).signed(with: far.signing).encode())).isEmpty)
        #expect(h.engine.counters.courier[.unverifiedDepositor] == 1 && h.engine.counters.courier[.notDirect] == 1)
        // Addressed to someone else: not ours to take (relayed as directed traffic is).
        #expect(Self.deposits(h.feed(try packet(phone, to: far.id).signed(with: phone.signing).encode())).isEmpty)
    }

    @Test("a handover goes to a direct peer as a directed, signed 0x04 with TTL 7; to a peer direct nowhere it is refused")
    func handover() throws {
        let phone = Phone()
        var h = try RelayGateTests.gated(phone, gate: false)
        let actions = h.engine.handle(.sendCourier(to: phone.id, envelope: Self.envelope, ref: "p:1"), now: h.now, random: &h.random)
        #expect(actions.last == .courierSent(ref: "p:1", delivered: true))
        let frames = actions.compactMap { if case .transmit(let link, let frame, _) = $0, link == h.link { frame } else { nil } }
        let sent = try MeshPacket.decode(try #require(frames.first))
        #expect(frames.count == 1, "only on the link where the phone is direct")
        #expect(sent.type == .courierEnvelope && sent.ttl == 7 && sent.recipient == phone.id && sent.payload == Self.envelope)
        #expect(sent.verifySignature(h.engine.identity.signingKey.publicKey).isValid)
        let stranger = Phone()
        #expect(h.engine.handle(.sendCourier(to: stranger.id, envelope: Self.envelope, ref: "p:2"), now: h.now, random: &h.random)
            == [.courierSent(ref: "p:2", delivered: false)])
    }
}
