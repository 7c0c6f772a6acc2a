import BotSupport
import BitchatWire
import BotCrypto
@testable import Mesh
import Testing

/// The bridge's relay gate: verified public messages are relayed only after the owner's verdict.
@Suite("Relay gate (verdict before relay)")
struct RelayGateTests {
    static let second = MeshLinkID(2)

    /// A gated engine with two links (the phone on link 1) and the phone verified.
    static func gated(_ phone: Phone, gate: Bool = true) throws -> EngineHarness {
        var configuration = MeshPeerEngine.Configuration()
        configuration.gatePublicRelays = gate
        var h = EngineHarness()
        h.engine = MeshPeerEngine(identity: makeIdentity("bridge"), configuration: configuration)
        _ = h.engine.handle(.linkUp(h.link, mtu: 512), now: h.now, random: &h.random)
        _ = h.engine.handle(.linkUp(second, mtu: 512), now: h.now, random: &h.random)
        _ = h.feed(try phone.announce(at: h.now))
        return h
    }

    static func relayed(_ actions: [MeshAction]) -> [MeshPacket] {
        actions.compactMap {
            if case .transmit(let link, let frame, _) = $0, link == second { try? MeshPacket.decode(frame) } else { nil }
        }
    }

    static func stableID(_ actions: [MeshAction]) -> String? {
        actions.lazy.compactMap { if case .publicMessage(let m) = $0 { m.stableID } else { nil } }.first
    }

    @Test func aPassedMessageIsRelayedOnlyAfterItsVerdictWithTheUsualTTLAndJitter() throws {
        let phone = Phone()
        var h = try Self.gated(phone)
        let actions = h.feed(try phone.message("hello", at: h.now))
        let id = try #require(Self.stableID(actions))
        #expect(Self.relayed(actions).isEmpty, "held until judged")
        #expect(h.engine.heldForVerdict == 1)
        h.now += 3
        let released = h.engine.handle(.relayVerdict(stableID: id, relay: true), now: h.now, random: &h.random)
        let packets = Self.relayed(released)
        #expect(packets.count == 1 && packets.first?.type == .message && packets.first?.ttl == 6)
        for case .transmit(_, _, let delay) in released { #expect((10...40).contains(delay), "degree-2 relay jitter") }
        #expect(h.engine.counters.relayGate[.released] == 1 && h.engine.heldForVerdict == 0)
        // A second verdict for the same message does nothing.
        #expect(h.engine.handle(.relayVerdict(stableID: id, relay: true), now: h.now, random: &h.random).isEmpty)
    }

    @Test func aHiddenMessageIsNeverRelayedNotEvenAsALaterCopy() async throws {
        let phone = Phone()
        var h = try Self.gated(phone)
        let message = try phone.message("BUY NOW", at: h.now)
        let id = try #require(Self.stableID(h.feed(message)))
        #expect(h.engine.handle(.relayVerdict(stableID: id, relay: false), now: h.now, random: &h.random).isEmpty)
        #expect(h.engine.counters.relayGate[.hidden] == 1)
        // Directed traffic between two other peers relays ungated (and, unverifiable, cannot touch the
        // dedup pool the message is in).
        let stranger = Phone()
        let elsewhere = Phone()
        let relayedBefore = h.engine.counters.relay[.sent]
        for i in 0..<1_001 {
            let packet = MeshPacket(type: .message, timestamp: h.now, sender: stranger.id, recipient: elsewhere.id,
                                    payload: Array("x\(i)".utf8))
            _ = h.feed(try packet.encode())
        }
        #expect(h.engine.counters.relay[.sent] == relayedBefore + 1_001, "directed messages are not gated")
        #expect(h.feed(message).isEmpty, "still a duplicate: junk does not flush the established pool")
        // Only the phone's own verified traffic can push the first copy out of its pool (16 384 keys, trimmed
        // to ¾ past that); then the same message arrives again.
        for i in 0..<DedupSet.Limits.establishedCapacity {
            if i % 128 == 0 { await Task.yield() }
            let directed = try MeshPacket(type: .message, timestamp: h.now, sender: phone.id, recipient: h.engine.identity.peerID,
                                          payload: Array("to the bridge \(i)".utf8)).signed(with: phone.signing)
            _ = h.feed(try directed.encode())
        }
        #expect(h.engine.counters.dedup[MeshDedupEvent(.evicted, .established)] > 0)
        let again = h.feed(message)
        #expect(Self.stableID(again) == id, "the copy passed dedup and was delivered again")
        #expect(Self.relayed(again).isEmpty)
        #expect(h.engine.counters.relayGate[.cachedWithhold] == 1)
    }

    @Test func unattributedBroadcastsAreNotRelayedByTheBridgeButAreByAPlainPeer() throws {
        let phone = Phone()
        let stranger = Phone()
        for gate in [true, false] {
            var h = try Self.gated(phone, gate: gate)
            // No announce from the stranger: nothing can judge its message.
            let unknown = try MeshPacket(type: .message, timestamp: h.now, sender: stranger.id, payload: Array("anon spam".utf8)).encode()
            // The verified phone's key does not match this signature (signed by the stranger's key).
            let forged = try MeshPacket(type: .message, timestamp: h.now, sender: phone.id, payload: Array("forged".utf8))
                .signed(with: stranger.signing).encode()
            for frame in [unknown, forged] {
                let actions = h.feed(frame)
                #expect(Self.stableID(actions) == nil, "never delivered for judgement or bridging")
                #expect(Self.relayed(actions).count == (gate ? 0 : 1))
            }
            #expect(h.engine.counters.relayGate[.unattributed] == (gate ? 2 : 0))
            #expect(h.engine.counters.verification[.messageUnknownSender] == 1 && h.engine.counters.verification[.messageBadSignature] == 1)
            #expect(h.engine.heldForVerdict == 0)
        }
    }

    @Test func aVerdictGivenBeforeACopyArrivesIsFollowedAtOnce() throws {
        let phone = Phone()
        var h = try Self.gated(phone)
        let stable = MeshMessageIdentity.stableID(senderHex: phone.id.hex, timestampMs: h.now, content: "known")
        #expect(h.engine.handle(.relayVerdict(stableID: stable, relay: true), now: h.now, random: &h.random).isEmpty)
        let actions = h.feed(try phone.message("known", at: h.now))
        #expect(Self.relayed(actions).count == 1 && h.engine.heldForVerdict == 0)
        #expect(h.engine.counters.relayGate[.cachedRelay] == 1)
    }

    @Test func withoutAVerdictTheMessageIsWithheldAfterTheTimeout() throws {
        let phone = Phone()
        var h = try Self.gated(phone)
        let heldAt = h.now
        _ = h.feed(try phone.message("nobody judged me", at: heldAt))
        var actions = h.engine.handle(.tick, now: heldAt + RelayGate.Limits.verdictTimeoutMs - 1, random: &h.random)
        #expect(h.engine.heldForVerdict == 1 && h.engine.counters.relayGate[.expired] == 0)
        actions = h.engine.handle(.tick, now: heldAt + RelayGate.Limits.verdictTimeoutMs, random: &h.random)
        #expect(h.engine.heldForVerdict == 0 && h.engine.counters.relayGate[.expired] == 1)
        #expect(!actions.contains { if case .transmit(_, let f, _) = $0 { (try? MeshPacket.decode(f))?.type == .message } else { false } })
    }

    @Test func otherTrafficRelaysAsBeforeAndAnUngatedEngineRelaysAtOnce() throws {
        let phone = Phone()
        var h = try Self.gated(phone)
        // Announces, leaves and directed packets are not gated.
        let other = Phone()
        #expect(Self.relayed(h.feed(try other.announce(at: h.now, ttl: 6))).count == 1)
        let directed = MeshPacket(
            type: .message, timestamp: h.now, sender: phone.id, recipient: other.id, payload: Array("psst".utf8))
        #expect(Self.relayed(h.feed(try directed.signed(with: phone.signing).encode())).count == 1)
        #expect(h.engine.heldForVerdict == 0)

        var plain = try Self.gated(phone, gate: false)
        let actions = plain.feed(try phone.message("hello", at: plain.now))
        #expect(Self.stableID(actions) != nil && Self.relayed(actions).count == 1)
    }

    @Test func theGateIsBoundedAndWithholdsItsOldestWhenFull() throws {
        var gate = RelayGate()
        let packet = MeshPacket(type: .message, timestamp: start, sender: Phone().id, payload: [1])
        for i in 0..<RelayGate.Limits.maxHeld {
            let (outcome, evicted) = gate.admit("m\(i)", packet: packet, ingress: MeshLinkID(1), now: start)
            #expect(outcome == .held && evicted == nil)
        }
        #expect(gate.heldCount == RelayGate.Limits.maxHeld)
        let (outcome, evicted) = gate.admit("one more", packet: packet, ingress: MeshLinkID(1), now: start)
        #expect(outcome == .held && evicted != nil && gate.heldCount == RelayGate.Limits.maxHeld)
        #expect(gate.resolve("m0", relay: true) == nil, "the oldest was the one withheld")
        #expect(gate.resolve("m1", relay: true) != nil)
        // Resolved and evicted keys are skipped on expiry; the rest expire together.
        #expect(gate.expire(now: start + RelayGate.Limits.verdictTimeoutMs).count == RelayGate.Limits.maxHeld - 1)
        #expect(gate.heldCount == 0)
    }

    @Test func verdictsAreRememberedUpToTheBoundOldestForgottenFirst() {
        var gate = RelayGate()
        let packet = MeshPacket(type: .message, timestamp: start, sender: Phone().id, payload: [1])
        for i in 0..<RelayGate.Limits.rememberedVerdicts { _ = gate.resolve("h\(i)", relay: false) }
        #expect(gate.admit("h0", packet: packet, ingress: MeshLinkID(1), now: start).0 == .withhold, "n verdicts: all kept")
        _ = gate.resolve("one more", relay: false)
        #expect(gate.admit("h0", packet: packet, ingress: MeshLinkID(1), now: start).0 == .held, "n + 1: the oldest forgotten")
        #expect(gate.admit("h1", packet: packet, ingress: MeshLinkID(1), now: start).0 == .withhold)
    }
}
