import BitchatWire
import BotCrypto
import Bridge
import Foundation
import Geohash
import Mesh
import Nostr
import Testing

/// The bridge policy driven event by event with injected time and randomness (no I/O).
@Suite("Bridge router")
struct BridgeRouterTests {
    static let now = 1_750_000_000.0
    let own = try! SchnorrSecretKey(bytes: [UInt8](repeating: 1, count: 32))
    let rendezvousKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 2, count: 32))
    let alice = try! SchnorrSecretKey(bytes: [UInt8](repeating: 3, count: 32))
    let bob = try! SchnorrSecretKey(bytes: [UInt8](repeating: 4, count: 32))
    let depositor = MeshPeerID(rawValue: 0x0011_2233_4455_6677)
    let pass: (BridgeRouter.Candidate) -> BridgeRouter.Verdict = { _ in .pass }

    func router(mirror: Bool = false, remembered: ([EventID], [EventID]) = ([], [])) -> BridgeRouter {
        BridgeRouter(
            settings: .init(channel: try! GeohashCell("u4pruy"), rendezvousCell: try! GeohashCell("u4pruy"), mirrorDownlink: mirror),
            ownKeys: [own.publicKey, rendezvousKey.publicKey], rendezvousKey: rendezvousKey,
            remembered: (remembered.0, remembered.1))
    }

    func event(_ key: SchnorrSecretKey, kind: Int = 20000, tags: [[String]], content: String = "hi", at: Double = now) -> NostrEvent {
        try! UnsignedEvent(pubkey: key.publicKey, createdAt: Int64(at), kind: kind, tags: tags, content: content).signed(with: key)
    }

    func carrier(_ direction: NostrCarrierPayload.Direction, _ event: NostrEvent, geohash: String = "u4pruy") -> MeshCarrier {
        MeshCarrier(
            sender: depositor,
            payload: NostrCarrierPayload(direction: direction, geohash: geohash, eventJSON: Array(event.json.utf8)),
            timestamp: UInt64(Self.now * 1000))
    }

    func broadcasts(_ actions: [BridgeRouter.Action]) -> [EventID] {
        actions.compactMap { if case .broadcast(_, let id) = $0 { return id } else { return nil } }
    }

    func published(_ actions: [BridgeRouter.Action]) -> [NostrEvent] {
        actions.compactMap { if case .publish(let e) = $0 { return e } else { return nil } }
    }

    @Test("channel event → fromGateway carrier after the hold, remembered before it is sent")
    func channelDownlink() throws {
        var r = router()
        let e = event(alice, tags: [["g", "u4pruy"], ["n", "alice"]])
        #expect(r.relayEvent(e, now: Self.now, random: 0.5, judge: pass).isEmpty)
        #expect(r.tick(now: Self.now + 0.5).isEmpty)  // hold = 0.2 + 0.65
        let actions = r.tick(now: Self.now + 0.85)
        #expect(actions.first == .remember(e.id, .rebroadcast))
        guard case .broadcast(.carrier(let payload), let id) = actions[1] else {
            Issue.record("expected a carrier broadcast, got \(actions)")
            return
        }
        #expect(id == e.id && payload.direction == .fromGateway && payload.geohash == "u4pruy")
        #expect(try UnverifiedEvent(json: String(decoding: payload.eventJSON, as: UTF8.self)).verified() == e)
        // Rule 3: at most once, even if a second relay delivers it again.
        _ = r.relayEvent(e, now: Self.now + 1, random: 0, judge: pass)
        #expect(broadcasts(r.tick(now: Self.now + 5)).isEmpty)
    }

    @Test("own keys, foreign channels, stale and empty events are never carried")
    func drops() {
        var r = router()
        let cases = [
            event(own, tags: [["g", "u4pruy"]]), event(alice, tags: [["g", "u4pru"]]),
            event(alice, tags: [["g", "u4pruy"]], at: Self.now - 901), event(alice, tags: [["g", "u4pruy"]], content: " "),
            event(alice, tags: [["r", "9q8yy"]]), event(alice, kind: 1, tags: [["g", "u4pruy"]]),
        ]
        for e in cases { _ = r.relayEvent(e, now: Self.now, random: 0, judge: pass) }
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(r.counters["relay.drop.own_key"] == 1 && r.counters["relay.drop.stale"] == 1)
    }

    @Test("gateway budget: 30 per minute, the excess waits; the queue bound drops the oldest, counted")
    func budget() {
        var r = router()
        let events = (0..<40).map { event(alice, tags: [["g", "u4pruy"]], content: "m\($0)") }
        for e in events.prefix(30) { _ = r.relayEvent(e, now: Self.now, random: 0, judge: pass) }
        #expect(broadcasts(r.tick(now: Self.now + 1)).count == 30)
        for e in events.suffix(10) { _ = r.relayEvent(e, now: Self.now + 2, random: 0, judge: pass) }
        #expect(broadcasts(r.tick(now: Self.now + 3)).isEmpty)
        #expect(r.pendingDownlinks == 10)
        #expect(broadcasts(r.tick(now: Self.now + 61)).count == 10)
        // Queue bound: 31 pending → the oldest is dropped.
        var q = router()
        for i in 0..<31 { _ = q.relayEvent(event(bob, tags: [["g", "u4pruy"]], content: "q\(i)"), now: Self.now, random: 1, judge: pass) }
        #expect(q.pendingDownlinks == 30 && q.counters["downlink.drop.queue_full"] == 1)
    }

    @Test("a copy broadcast by another bridge during the hold cancels ours (rule 1)")
    func twoBridgesOneIsland() {
        var r = router()
        let e = event(alice, tags: [["r", "u4pruz"], ["n", "a"]])
        _ = r.relayEvent(e, now: Self.now, random: 1, judge: pass)
        _ = r.meshCarrier(carrier(.fromBridge, e, geohash: "u4pruz"), now: Self.now + 0.5, judge: pass)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(r.counters["carrier.learned_from_mesh"] == 1)
    }

    @Test("rendezvous: ring events go out as fromBridge for their cell; the radio copy suppresses the bridged one")
    func rendezvous() {
        var r = router()
        let remote = event(alice, tags: [["r", "u4prvp"], ["n", "a"]])
        _ = r.relayEvent(remote, now: Self.now, random: 0, judge: pass)
        let sent = r.tick(now: Self.now + 1)
        guard case .broadcast(.carrier(let p), _)? = sent.last else {
            Issue.record("no broadcast: \(sent)")
            return
        }
        #expect(p.direction == .fromBridge && p.geohash == "u4prvp")
        // A local radio message, then its bridged copy with the matching m hint from the relay.
        let ts: UInt64 = 1_750_000_000_123
        let stable = MeshMessageIdentity.stableID(senderHex: "0011223344556677", timestampMs: ts, content: "hello mesh")
        _ = r.meshMessage(
            MeshPublicMessage(sender: depositor, nickname: "d", text: "hello mesh", timestamp: ts, stableID: stable, ttl: 7),
            senderKey: "fp", judge: pass)
        let bridged = event(bob, tags: [["r", "u4pruy"], ["m", stable, "0011223344556677", String(ts)]], content: "hello mesh")
        _ = r.relayEvent(bridged, now: Self.now + 2, random: 0, judge: pass)
        #expect(broadcasts(r.tick(now: Self.now + 4)).isEmpty)
        #expect(r.counters["relay.drop.loop"] == 1)
    }

    @Test("toBridge deposit: verified, published once, remembered first; rule 2 keeps it off the mesh")
    func deposit() {
        var r = router()
        _ = r.relaysConnected(true, now: Self.now)
        let e = event(alice, tags: [["r", "u4pruy"], ["n", "a"]])
        let actions = r.meshCarrier(carrier(.toBridge, e), now: Self.now, judge: pass)
        #expect(actions == [.remember(e.id, .published), .publish(e)])
        #expect(r.meshCarrier(carrier(.toBridge, e), now: Self.now + 1, judge: pass).isEmpty)
        _ = r.relayEvent(e, now: Self.now + 2, random: 0, judge: pass)
        #expect(broadcasts(r.tick(now: Self.now + 4)).isEmpty)
    }

    @Test("deposits: wrong cell, bad signature and the 11th per minute are refused; offline they queue and flush")
    func depositRules() throws {
        var r = router()
        let wrongCell = event(alice, tags: [["r", "9q8yyk"]])
        #expect(r.meshCarrier(carrier(.toBridge, wrongCell), now: Self.now, judge: pass).isEmpty)
        var json = event(alice, tags: [["r", "u4pruy"]]).json
        json = json.replacingOccurrences(of: "\"hi\"", with: "\"ho\"")
        let forged = MeshCarrier(
            sender: depositor, payload: NostrCarrierPayload(direction: .toBridge, geohash: "u4pruy", eventJSON: Array(json.utf8)),
            timestamp: 0)
        #expect(r.meshCarrier(forged, now: Self.now, judge: pass).isEmpty)
        #expect(r.counters["deposit.drop.id_mismatch"] == 1)
        // Offline: accepted deposits queue, then flush on connect (presence goes out too).
        var offline = router()
        let queued = (0..<10).map { event(alice, tags: [["r", "u4pruy"]], content: "d\($0)") }
        for e in queued { #expect(offline.meshCarrier(carrier(.toBridge, e), now: Self.now, judge: pass).isEmpty) }
        #expect(offline.meshCarrier(carrier(.toBridge, event(alice, tags: [["r", "u4pruy"]], content: "11th")), now: Self.now, judge: pass).isEmpty)
        #expect(offline.counters["deposit.drop.depositor_rate"] == 1)
        #expect(offline.queuedUplinks == 5)  // ≤ 5 per depositor while offline
        let flushed = offline.relaysConnected(true, now: Self.now + 1)
        #expect(published(flushed).filter { $0.kind == 20000 }.map(\.content) == ["d5", "d6", "d7", "d8", "d9"])
        #expect(published(flushed).filter { $0.kind == 20001 }.count == 1)
    }

    @Test("toGateway deposit needs kind 20000 and g = the carrier geohash")
    func gatewayDeposit() {
        var r = router()
        _ = r.relaysConnected(true, now: Self.now)
        let good = event(alice, tags: [["g", "u4pruy"], ["n", "a"]])
        #expect(published(r.meshCarrier(carrier(.toGateway, good), now: Self.now, judge: pass)) == [good])
        let presence = event(bob, kind: 20001, tags: [["g", "u4pruy"]], content: "")
        #expect(r.meshCarrier(carrier(.toGateway, presence), now: Self.now, judge: pass).isEmpty)
    }

    @Test("hidden by the judge: nothing crosses in either direction, counted by rule")
    func judged() {
        var r = router()
        _ = r.relaysConnected(true, now: Self.now)
        let hide: (BridgeRouter.Candidate) -> BridgeRouter.Verdict = { _ in .hide(rule: "messageRate") }
        _ = r.relayEvent(event(alice, tags: [["g", "u4pruy"]]), now: Self.now, random: 0, judge: hide)
        #expect(r.meshCarrier(carrier(.toBridge, event(bob, tags: [["r", "u4pruy"]])), now: Self.now, judge: hide).isEmpty)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(r.counters["nostr_to_mesh.hidden.messageRate"] == 1 && r.counters["mesh_to_nostr.hidden.messageRate"] == 1)
    }

    @Test("after a restart, remembered ids are not forwarded again")
    func restart() {
        let e = event(alice, tags: [["g", "u4pruy"]])
        var r = router(remembered: ([], [e.id]))
        _ = r.relayEvent(e, now: Self.now, random: 0, judge: pass)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
    }

    @Test("presence: on connect, then every 240 s, never closer than 30 s")
    func presence() {
        var r = router()
        #expect(published(r.relaysConnected(true, now: Self.now)).map(\.kind) == [20001])
        #expect(published(r.tick(now: Self.now + 239)).isEmpty)
        let next = published(r.tick(now: Self.now + 240))
        #expect(next.count == 1 && next[0].tags == [["r", "u4pruy"]] && next[0].content.isEmpty)
        _ = r.relaysConnected(false, now: Self.now + 250)
        #expect(published(r.relaysConnected(true, now: Self.now + 260)).isEmpty)  // < 30 s after the last
    }

    @Test("plain-text mirror (downlink on): the bridge says `name#last4: text` too")
    func mirror() {
        var r = router(mirror: true)
        let e = event(alice, tags: [["g", "u4pruy"], ["n", "alice"]], content: "gig starts")
        _ = r.relayEvent(e, now: Self.now, random: 0, judge: pass)
        let texts = r.tick(now: Self.now + 1).compactMap { action -> String? in
            if case .broadcast(.text(let t), _) = action { return t } else { return nil }
        }
        #expect(texts == ["alice#\(alice.publicKey.hex.suffix(4)): gig starts"])
    }
}
