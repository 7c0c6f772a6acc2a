import BitchatWire
import BotCrypto
import BotSupport
import Bridge
import Foundation
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import Nostr
import Testing
import Identity
import Moderation
import BridgeCore

/// The bridge policy driven event by event with injected time and randomness (no I/O).
@Suite("Bridge router")
struct BridgeRouterTests {
    static let now = 1_750_000_000.0
    let own = try! SchnorrSecretKey(bytes: [UInt8](repeating: 1, count: 32))
    let rendezvousKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 2, count: 32))
    let alice = try! SchnorrSecretKey(bytes: [UInt8](repeating: 3, count: 32))
    let bob = try! SchnorrSecretKey(bytes: [UInt8](repeating: 4, count: 32))
    let depositor = MeshPeerID(rawValue: 0x0011_2233_4455_6677)

    func router(
        mirror: Bool = false, remembered: ([EventID], [EventID]) = ([], []), radioCopies: [String] = [], judge: BridgeJudge = .passAll
    ) -> RouterWithAirtime {
        RouterWithAirtime(BridgeRouter(
            settings: .init(channel: try! GeohashCell("u4pruy"), rendezvousCell: try! GeohashCell("u4pruy"), mirrorDownlink: mirror),
            ownKeys: [own.publicKey, rendezvousKey.publicKey], rendezvousKey: rendezvousKey,
            remembered: RememberedEvents(published: remembered.0, rebroadcast: remembered.1, radioCopies: radioCopies), judge: judge,
            clockOrigin: .now))
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

    @Test("one message counts once in forwarded_total however many forms it takes (carrier and mirror line); its forms count by queue")
    func forwardedOnce() throws {
        var r = router(mirror: true)
        let e = event(alice, tags: [["g", "u4pruy"], ["n", "alice"]])
        _ = r.relayEvent(e, now: Self.now, random: 0.5)
        var sent: [EventID] = []
        for step in 1...30 { sent += broadcasts(r.tick(now: Self.now + Double(step))) }
        #expect(sent == [e.id, e.id], "a carrier and a mirror line")
        #expect(r.airtime.counters.broadcasts.total == 2 && r.airtime.counters.messages == 1)
        #expect(r.airtime.counters.broadcasts.byLabel == ["gateway": 1, "mirror": 1])
    }

    @Test("channel event → fromGateway carrier after the hold, remembered before it is sent")
    func channelDownlink() throws {
        var r = router()
        let e = event(alice, tags: [["g", "u4pruy"], ["n", "alice"]])
        #expect(r.relayEvent(e, now: Self.now, random: 0.5).isEmpty)
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
        _ = r.relayEvent(e, now: Self.now + 1, random: 0)
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
        for e in cases { _ = r.relayEvent(e, now: Self.now, random: 0) }
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(r.counters.relayDrops[.ownKey] == 1 && r.counters.relayDrops[.rule(.stale)] == 1)
    }

    /// A distinct author per index (the scheduler paces and bounds per sender).
    func author(_ i: Int) -> SchnorrSecretKey {
        try! SchnorrSecretKey(bytes: [UInt8](repeating: 0, count: 30) + [UInt8(1 + i / 200), UInt8(i % 200 + 1)])
    }

    /// What `router` broadcast from `from` to `until` (ticking every `step` s), with the times.
    func broadcastTimes(_ r: inout RouterWithAirtime, from: Double, until: Double, step: Double = 0.5) -> [Double] {
        var times: [Double] = []
        var t = from
        while t < until {
            times += Array(repeating: t, count: broadcasts(r.tick(now: t)).count)
            t += step
        }
        return times
    }

    @Test("gateway budget: paced — 2 at once, then one every 2.1 s, never more than 30 a minute; the queue bound drops a victim, counted")
    func budget() {
        var r = router()
        let events = (0..<40).map { event(author($0), tags: [["g", "u4pruy"]], content: "m\($0)") }
        for e in events { _ = r.relayEvent(e, now: Self.now, random: 0) }
        #expect(broadcasts(r.tick(now: Self.now + 1)).count == 2)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        let minute = broadcastTimes(&r, from: Self.now + 3, until: Self.now + 61)
        #expect((27...28).contains(minute.count), "\(minute.count) more in the first minute")
        #expect(zip(minute, minute.dropFirst()).allSatisfy { $1 - $0 <= 2.5 }, "no silent gap while lines wait")
        #expect(r.pendingDownlinks == 40 - 2 - minute.count)
        // Queue bound: 61 pending → one is dropped (here the oldest: all are first-contact keys).
        var q = router()
        for i in 0..<61 { _ = q.relayEvent(event(author(i), tags: [["g", "u4pruy"]], content: "q\(i)"), now: Self.now, random: 1) }
        #expect(q.pendingDownlinks == 60 && q.airtime.counters.queueDrops[.gateway] == 1)
        #expect(q.airtime.drops[.queueFull] == 1)
        // One sender's eleventh waiting line replaces its own oldest.
        var b = router()
        for i in 0..<11 { _ = b.relayEvent(event(bob, tags: [["g", "u4pruy"]], content: "b\(i)"), now: Self.now, random: 1) }
        #expect(b.pendingDownlinks == 10 && b.airtime.drops[.senderBacklog] == 1)
    }

    @Test("served levels: parents and block children go out with their own geohash, under one budget")
    func levels() throws {
        let cell = try GeohashCell("u4pruy")
        var r = RouterWithAirtime(BridgeRouter(
            settings: .init(
                channel: cell, rendezvousCell: nil, servedChannels: ChannelLevels.channels(for: cell)),
            ownKeys: [own.publicKey], rendezvousKey: nil, clockOrigin: .now))
        #expect(r.router.settings.servedChannels.count == 1 + 3 + 32)
        let levels = ["u4", "u4pr", "u4pru", "u4pruy", "u4pruy7", "u4pruz", "u4pruy7b"]
        for (i, g) in levels.enumerated() {
            _ = r.relayEvent(event(author(i), tags: [["g", g]], content: "at \(g)"), now: Self.now, random: 0)
        }
        var geohashes: [String] = []
        for step in 0..<20 {
            geohashes += r.tick(now: Self.now + 1 + Double(step) / 2).compactMap { action -> String? in
                if case .broadcast(.carrier(let payload), _) = action { return payload.geohash } else { return nil }
            }
        }
        #expect(geohashes.sorted() == ["u4", "u4pr", "u4pru", "u4pruy", "u4pruy7"])
        #expect(r.counters.relayDrops[.unscoped] == 2)
        // All levels share one budget: 30 a sliding minute at most, all of them together.
        for i in 0..<40 {
            _ = r.relayEvent(event(author(100 + i), tags: [["g", levels[i % 5]]], content: "n\(i)"), now: Self.now + 11, random: 0)
        }
        let minute = broadcastTimes(&r, from: Self.now + 11, until: Self.now + 71)
        #expect(minute.count <= 30 && minute.count >= 25, "\(minute.count) in the minute")
    }

    @Test("a copy broadcast by another bridge during the hold cancels ours (rule 1)")
    func twoBridgesOneIsland() {
        var r = router()
        let e = event(alice, tags: [["r", "u4pruz"], ["n", "a"]])
        _ = r.relayEvent(e, now: Self.now, random: 1)
        _ = r.router.meshCarrier(carrier(.fromBridge, e, geohash: "u4pruz"), now: Self.now + 0.5)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(r.counters.carriersLearned == 1)
    }

    @Test("rendezvous: ring events go out as fromBridge for their cell; the radio copy suppresses the bridged one")
    func rendezvous() {
        var r = router()
        let remote = event(alice, tags: [["r", "u4prvp"], ["n", "a"]])
        _ = r.relayEvent(remote, now: Self.now, random: 0)
        let sent = r.tick(now: Self.now + 1)
        guard case .broadcast(.carrier(let p), _)? = sent.last else {
            Issue.record("no broadcast: \(sent)")
            return
        }
        #expect(p.direction == .fromBridge && p.geohash == "u4prvp")
        // A local radio message, then its bridged copy with the matching m hint from the relay.
        let ts: UInt64 = 1_750_000_000_123
        let stable = MeshMessageIdentity.stableID(senderHex: "0011223344556677", timestampMs: ts, content: "hello mesh")
        _ = r.router.meshMessage(
            MeshPublicMessage(sender: depositor, nickname: "d", text: "hello mesh", timestamp: ts, stableID: stable, ttl: 7),
            senderKey: "fp", now: Self.now)
        let bridged = event(bob, tags: [["r", "u4pruy"], ["m", stable, "0011223344556677", String(ts)]], content: "hello mesh")
        _ = r.relayEvent(bridged, now: Self.now + 2, random: 0)
        #expect(broadcasts(r.tick(now: Self.now + 4)).isEmpty)
        #expect(r.counters.relayDrops[.loop] == 1)
        // After a graceful restart (the radio copies kept), the relay's replay of the bridged copy is still dropped.
        #expect(r.router.radioCopies == [stable])
        var restarted = router(radioCopies: r.router.radioCopies)
        _ = restarted.relayEvent(bridged, now: Self.now + 5, random: 0)
        #expect(broadcasts(restarted.tick(now: Self.now + 7)).isEmpty && restarted.counters.relayDrops[.loop] == 1)
    }

    @Test("toBridge deposit: verified, published once, remembered first; rule 2 keeps it off the mesh")
    func deposit() {
        var r = router()
        _ = r.router.relaysConnected(true, now: Self.now)
        let e = event(alice, tags: [["r", "u4pruy"], ["n", "a"]])
        let actions = r.router.meshCarrier(carrier(.toBridge, e), now: Self.now)
        #expect(actions == [.remember(e.id, .published), .publish(e)])
        #expect(r.router.meshCarrier(carrier(.toBridge, e), now: Self.now + 1).isEmpty)
        _ = r.relayEvent(e, now: Self.now + 2, random: 0)
        #expect(broadcasts(r.tick(now: Self.now + 4)).isEmpty)
    }

    @Test("deposits: wrong cell, bad signature and the 11th per minute are refused; offline they queue and flush")
    func depositRules() throws {
        var r = router()
        let wrongCell = event(alice, tags: [["r", "9q8yyk"]])
        #expect(r.router.meshCarrier(carrier(.toBridge, wrongCell), now: Self.now).isEmpty)
        var json = event(alice, tags: [["r", "u4pruy"]]).json
        json = json.replacingOccurrences(of: "\"hi\"", with: "\"ho\"")
        let forged = MeshCarrier(
            sender: depositor, payload: NostrCarrierPayload(direction: .toBridge, geohash: "u4pruy", eventJSON: Array(json.utf8)),
            timestamp: 0)
        #expect(r.router.meshCarrier(forged, now: Self.now).isEmpty)
        #expect(r.counters.depositDrops[.verification(.idMismatch)] == 1)
        // Offline: accepted deposits queue, then flush on connect (presence goes out too).
        var offline = router()
        let queued = (0..<10).map { event(alice, tags: [["r", "u4pruy"]], content: "d\($0)") }
        for e in queued { #expect(offline.router.meshCarrier(carrier(.toBridge, e), now: Self.now).isEmpty) }
        #expect(offline.router.meshCarrier(carrier(.toBridge, event(alice, tags: [["r", "u4pruy"]], content: "11th")), now: Self.now).isEmpty)
        #expect(offline.counters.depositDrops[.depositorRate] == 1)
        #expect(offline.router.queuedUplinks == 5)  // ≤ 5 per depositor while offline
        let flushed = offline.router.relaysConnected(true, now: Self.now + 1)
        #expect(published(flushed).filter { $0.kind == 20000 }.map(\.content) == ["d5", "d6", "d7", "d8", "d9"])
        #expect(published(flushed).filter { $0.kind == 20001 }.count == 1)
    }

    @Test("toGateway deposit needs kind 20000 and g = the carrier geohash")
    func gatewayDeposit() {
        var r = router()
        _ = r.router.relaysConnected(true, now: Self.now)
        let good = event(alice, tags: [["g", "u4pruy"], ["n", "a"]])
        #expect(published(r.router.meshCarrier(carrier(.toGateway, good), now: Self.now)) == [good])
        let presence = event(bob, kind: 20001, tags: [["g", "u4pruy"]], content: "")
        #expect(r.router.meshCarrier(carrier(.toGateway, presence), now: Self.now).isEmpty)
    }

    @Test("hidden by the judge: nothing crosses in either direction, counted by rule, reported for the log")
    func judged() throws {
        var judge = BridgeJudge.passAll
        judge.setBlocked([try IdentityKey.nostr(pubkey: alice.publicKey.bytes), try IdentityKey.nostr(pubkey: bob.publicKey.bytes)])
        var r = router(judge: judge)
        _ = r.router.relaysConnected(true, now: Self.now)
        let down = r.relayEvent(event(alice, tags: [["g", "u4pruy"]]), now: Self.now, random: 0)
        let up = r.router.meshCarrier(carrier(.toBridge, event(bob, tags: [["r", "u4pruy"]])), now: Self.now)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(published(up).isEmpty)
        for (actions, direction) in [(down, BridgeRouter.Direction.nostrToMesh), (up, .meshToNostr)] {
            guard case .recordHidden(let report)? = actions.first, actions.count == 1 else {
                Issue.record("expected one hidden report, got \(actions)")
                continue
            }
            #expect(report.rule == .blocked && report.candidate.direction == direction && !report.shadow)
            #expect(report.record?.rule == .blocked && report.record?.figures["identity"]?.stringValue?.hasPrefix("nostr:") == true)
            #expect(r.counters.hidden[.init(direction: direction, rule: .blocked)] == 1)
        }
    }

    @Test("the judgement journal (the console's live view): every verdict once, in order, bounded")
    func journal() throws {
        var judge = BridgeJudge.passAll
        judge.setBlocked([try IdentityKey.nostr(pubkey: bob.publicKey.bytes)])
        var r = router(judge: judge)
        _ = r.router.relaysConnected(true, now: Self.now)
        let passed = event(alice, tags: [["g", "u4pruy"]])
        _ = r.relayEvent(passed, now: Self.now, random: 0)
        _ = r.relayEvent(event(bob, tags: [["g", "u4pruy"]]), now: Self.now, random: 0)
        let journal = r.router.takeJudgements()
        #expect(journal.map(\.verdict) == [.pass, .hide(.blocked)])
        #expect(journal.first?.candidate.messageID == passed.id.hex && journal.first?.report == nil)
        #expect(journal.last?.report?.rule == .blocked)
        #expect(r.router.takeJudgements().isEmpty, "drained")
        // Mesh messages are each judged (no inbound limiter before the judge), so the bound shows.
        for i in 0..<(BridgeRouter.JournalLimits.maxJournal + 3) {
            let message = MeshPublicMessage(
                sender: depositor, nickname: "d", text: "line \(i)", timestamp: UInt64(Self.now * 1000), stableID: "s\(i)", ttl: 7)
            _ = r.router.meshMessage(message, senderKey: "k", now: Self.now)
        }
        let kept = r.router.takeJudgements()
        #expect(kept.count == BridgeRouter.JournalLimits.maxJournal)
        #expect(kept.last?.candidate.text == "line \(BridgeRouter.JournalLimits.maxJournal + 2)")
    }

    @Test("release: a hidden channel message takes the normal path (judge skipped), once; outside ±900 s it is refused with the reason")
    func release() throws {
        var judge = BridgeJudge.passAll
        judge.setBlocked([try IdentityKey.nostr(pubkey: alice.publicKey.bytes)])
        var r = router(judge: judge)
        _ = r.router.relaysConnected(true, now: Self.now)
        let hidden = event(alice, tags: [["g", "u4pruy"]], content: "happy new year everyone")
        #expect(r.relayEvent(hidden, now: Self.now, random: 0).count == 1, "hidden: only its report")
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
        #expect(try r.release(hidden, now: Self.now + 3, random: 0).get() == ())
        #expect(broadcasts(r.tick(now: Self.now + 6)) == [hidden.id], "carried after the usual hold")
        #expect(r.counters.released == 1)
        #expect(throws: BridgeRouter.ReleaseRefusal.alreadyCarried) { try r.release(hidden, now: Self.now + 7, random: 0).get() }
        let old = event(alice, tags: [["g", "u4pruy"]], content: "an old line", at: Self.now - 1000)
        let refusal = BridgeRouter.ReleaseRefusal.rule(.stale, ageSeconds: 1000)
        #expect(throws: refusal) { try r.release(old, now: Self.now, random: 0).get() }
        #expect(refusal.description.contains("±900 s") && refusal.description.contains("1000 s ago"))
        let elsewhere = event(alice, tags: [["g", "u4pruz"]])
        #expect(throws: BridgeRouter.ReleaseRefusal.notChannel) { try r.release(elsewhere, now: Self.now, random: 0).get() }
    }

    @Test("after a restart, remembered ids are not forwarded again")
    func restart() {
        let e = event(alice, tags: [["g", "u4pruy"]])
        var r = router(remembered: ([], [e.id]))
        _ = r.relayEvent(e, now: Self.now, random: 0)
        #expect(broadcasts(r.tick(now: Self.now + 2)).isEmpty)
    }

    @Test("presence: on connect, then every 240 s, never closer than 30 s")
    func presence() {
        var r = router()
        #expect(published(r.router.relaysConnected(true, now: Self.now)).map(\.kind) == [20001])
        #expect(published(r.tick(now: Self.now + 239)).isEmpty)
        let next = published(r.tick(now: Self.now + 240))
        #expect(next.count == 1 && next[0].tags == [["r", "u4pruy"]] && next[0].content.isEmpty)
        _ = r.router.relaysConnected(false, now: Self.now + 250)
        #expect(published(r.router.relaysConnected(true, now: Self.now + 260)).isEmpty)  // < 30 s after the last
    }

    @Test("plain-text mirror (downlink on): the line goes out with its author and name, for the author's persona")
    func mirror() {
        var r = router(mirror: true)
        let e = event(alice, tags: [["g", "u4pruy"], ["n", "alice"]], content: "gig starts")
        _ = r.relayEvent(e, now: Self.now, random: 0)
        let texts = r.tick(now: Self.now + 1).compactMap { action -> String? in
            if case .broadcast(.text(let t, let author, let name), _) = action, author == alice.publicKey.bytes, name == "alice" {
                return t
            }
            return nil
        }
        #expect(texts == ["gig starts"])
    }
}

@Suite("Airtime machine: bridges of one island share the downlink")
struct BridgeIslandShareTests {
    static let t0 = 1_750_000_000.0
    static let peers = (1...3).map { MeshPeerID(rawValue: UInt64($0) * 0x1111_1111) }

    static func events(_ count: Int) throws -> [NostrEvent] {
        // One sender each, so the per-sender backlog and pacing play no part.
        try (0..<count).map {
            let key = try SchnorrSecretKey(bytes: [UInt8](repeating: UInt8($0 + 1), count: 32))
            return try UnsignedEvent(pubkey: key.publicKey, createdAt: Int64(t0), kind: 20000, tags: [["g", "u4pruy"]], content: "m\($0)")
                .signed(with: key)
        }
    }

    static func router(own: MeshPeerID, island: [MeshPeerID]) throws -> RouterWithAirtime {
        var limits = BridgeLimits()
        limits.airtime.perMinute = 1000
        limits.airtime.burst = 1000
        limits.airtime.maxPending = 200
        var router = RouterWithAirtime(BridgeRouter(
            settings: .init(channel: try GeohashCell("u4pruy"), rendezvousCell: nil, limits: limits), ownKeys: [],
            rendezvousKey: nil, clockOrigin: .now))
        router.airtime.setIslandBridges(own: own, gateways: Set(island), rendezvous: [], now: t0)
        return router
    }

    /// The event ids a router broadcast up to `until` (ticking every 0.5 s).
    static func carried(_ router: inout RouterWithAirtime, from: Double, until: Double) -> Set<EventID> {
        var ids: Set<EventID> = []
        var now = from
        while now <= until {
            for case .broadcast(_, let id) in router.tick(now: now) { ids.insert(id) }
            now += 0.5
        }
        return ids
    }

    @Test("every event is carried by exactly one of three bridges, the same one each of them picks")
    func exactlyOne() throws {
        let events = try Self.events(60)
        var routers = try Self.peers.map { try Self.router(own: $0, island: Self.peers) }
        var carriedBy: [Set<EventID>] = []
        for index in routers.indices {
            for event in events { _ = routers[index].relayEvent(event, now: Self.t0, random: 0.5) }
            carriedBy.append(Self.carried(&routers[index], from: Self.t0, until: Self.t0 + 30))
        }
        for event in events {
            let carriers = carriedBy.indices.filter { carriedBy[$0].contains(event.id) }
            #expect(carriers.count == 1, "\(event.id) carried by \(carriers)")
            #expect(carriers.map { Self.peers[$0] } == [CarrierChoice.carrier(for: event.id, among: Self.peers.reversed())])
        }
        // Rendezvous hashing spreads the work: each of the three carries a fair share of 60.
        for set in carriedBy { #expect((10...30).contains(set.count), "\(carriedBy.map(\.count))") }
        #expect(routers.map(\.airtime.counters.delegated).reduce(0, +) == 120)
    }

    @Test("a bridge alone, or not told of its island, carries everything")
    func alone() throws {
        let events = try Self.events(10)
        var router = try Self.router(own: Self.peers[0], island: [])
        for event in events { _ = router.relayEvent(event, now: Self.t0, random: 0) }
        #expect(Self.carried(&router, from: Self.t0, until: Self.t0 + 5).count == 10)
    }

    @Test("when the chosen bridge leaves within the handover window, the next choice carries; after it, nobody does")
    func handover() throws {
        let events = try Self.events(40)
        let own = Self.peers[0]
        var router = try Self.router(own: own, island: Self.peers)
        for event in events { _ = router.relayEvent(event, now: Self.t0, random: 0) }
        let mine = Set(events.map(\.id).filter { CarrierChoice.carrier(for: $0, among: Self.peers) == own })
        #expect(Self.carried(&router, from: Self.t0, until: Self.t0 + 3) == mine)
        // Peer 2 leaves at +3 s: its events go to the higher weight of peers 1 and 3.
        router.airtime.setIslandBridges(own: own, gateways: [Self.peers[2]], rendezvous: [], now: Self.t0 + 3)
        let moved = Set(events.map(\.id).filter {
            CarrierChoice.carrier(for: $0, among: Self.peers) == Self.peers[1]
                && CarrierChoice.carrier(for: $0, among: [own, Self.peers[2]]) == own
        })
        #expect(!moved.isEmpty)
        #expect(Self.carried(&router, from: Self.t0 + 3, until: Self.t0 + 8) == moved)
        #expect(router.airtime.counters.takenOver == moved.count)
        // Peer 3 leaves after the 10 s window: nothing more is carried.
        router.airtime.setIslandBridges(own: own, gateways: [], rendezvous: [], now: Self.t0 + 11)
        #expect(Self.carried(&router, from: Self.t0 + 11, until: Self.t0 + 15).isEmpty)
        #expect(router.airtime.delegatedCount == 0)
    }

    @Test("at a graceful stop, what still waits here is left to the island's other bridges (remembered as learned); alone, nothing is")
    func leftToIslandAtStop() throws {
        let events = try Self.events(12)
        let own = Self.peers[0]
        var router = try Self.router(own: own, island: Self.peers)
        for event in events { _ = router.relayEvent(event, now: Self.t0, random: 0) }
        let mine = Set(events.map(\.id).filter { CarrierChoice.carrier(for: $0, among: Self.peers) == own })
        #expect(!mine.isEmpty && mine.count < events.count && router.pendingDownlinks == mine.count, "its own choices wait here")
        #expect(Set(router.airtime.leftToIsland(heard: router.router.heardRadioCopy)) == Set(events.map(\.id)), "its own: taken over on the leave; the rest: their carriers'")
        var alone = try Self.router(own: own, island: [])
        for event in events { _ = alone.relayEvent(event, now: Self.t0, random: 0) }
        #expect(alone.pendingDownlinks == events.count && alone.airtime.leftToIsland(heard: alone.router.heardRadioCopy).isEmpty, "alone: the replay carries them")
    }

    @Test("the choice does not depend on the order of the set, and a peer's own view agrees")
    func orderFree() throws {
        for event in try Self.events(20) {
            let a = CarrierChoice.carrier(for: event.id, among: Self.peers)
            #expect(a == CarrierChoice.carrier(for: event.id, among: Self.peers.reversed()))
            #expect(a == CarrierChoice.carrier(for: event.id, among: Set(Self.peers)))
        }
        #expect(CarrierChoice.carrier(for: try Self.events(1)[0].id, among: [MeshPeerID]()) == nil)
    }
}
