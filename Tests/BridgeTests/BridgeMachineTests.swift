import BitchatWire
import BotCrypto
import BotSupport
import BridgeCore
import Geohash
import Identity
import Mesh
import Moderation
import MeshSync
import Nostr
import SpamFilter
import Testing

/// The bridge's decisions as a pure machine (issue 22 part 1): inputs in, actions out, time passed in — no
/// executor, no store, no clock. These cover what the machine adds around the router: deadlines instead of
/// ticks, held messages and their release, the island's bridges, sync kept only for passed messages, the
/// priority authors.
@Suite("Bridge machine (pure)")
struct BridgeMachineTests {
    static let now = 1_750_000_000.0
    let keys = BridgeKeys.generate()
    let alice = try! SchnorrSecretKey(bytes: [UInt8](repeating: 3, count: 32))

    func machine(judge: BridgeJudge = .passAll, sync: Bool = false, operatorLists: OperatorLists = .empty) -> BridgeMachine {
        let channel = try! GeohashCell("u4pruy")
        let router = BridgeRouter(
            settings: .init(channel: channel, rendezvousCell: nil), ownKeys: [try! keys.channelKey(geohash: "u4pruy").publicKey],
            rendezvousKey: nil, channelKey: try! keys.channelKey(geohash: "u4pruy"), judge: judge, clockOrigin: .now)
        var machine = BridgeMachine(router: router, configuration: .init(keys: keys, sync: sync ? .init() : nil, seed: 7))
        _ = machine.start(.init(operatorLists: operatorLists), now: Self.now)
        return machine
    }

    func event(_ text: String, at: Double = now, key: SchnorrSecretKey? = nil) -> NostrEvent {
        let key = key ?? alice
        return try! UnsignedEvent(
            pubkey: key.publicKey, createdAt: Int64(at), kind: NostrKind.ephemeralChat, tags: [["g", "u4pruy"], ["n", "alice"]],
            content: text
        ).signed(with: key)
    }

    func meshInputs(_ actions: [BridgeMachine.Action]) -> [MeshInput] {
        actions.compactMap { if case .mesh(let input) = $0 { input } else { nil } }
    }

    @Test("idle, the machine wants nothing: no deadline without a relay; with one, the next channel presence (40–80 s), not a tick")
    func deadlinesNotTicks() {
        var m = machine()
        #expect(m.nextDeadline(now: Self.now) == .infinity)
        let connected = m.handle(.relaysConnected(1), now: Self.now)
        #expect(connected.contains { if case .publish(let e) = $0 { e.kind == NostrKind.presence } else { false } }, "presence at once on connect")
        let next = m.nextDeadline(now: Self.now + 1)
        #expect(next >= Self.now + 40 && next <= Self.now + 80, "next presence \(next - Self.now) s after the first")
        #expect(m.handle(.deadline, now: Self.now + 1).isEmpty, "nothing due before it")
        let due = m.handle(.deadline, now: next)
        #expect(due.contains { if case .publish(let e) = $0 { e.kind == NostrKind.presence } else { false } })
    }

    @Test("a channel event waits for its hold: the deadline is the hold's end, and then the carrier goes to the mesh signed")
    func downlinkAtItsDeadline() throws {
        var m = machine()
        _ = m.handle(.relaysConnected(1), now: Self.now)
        let e = event("hello mesh")
        #expect(meshInputs(m.handle(.relayEvent(e), now: Self.now)).isEmpty)
        let hold = m.nextDeadline(now: Self.now)
        #expect(hold >= Self.now + 0.2 && hold <= Self.now + 1.5, "the phones' hold, 0.2–1.5 s")
        let actions = m.handle(.deadline, now: hold)
        #expect(actions.contains { if case .remember(let id, .rebroadcast) = $0 { id == e.id } else { false } })
        guard case .originate(let packet, let sign)? = meshInputs(actions).first else {
            Issue.record("no carrier")
            return
        }
        #expect(packet.type == .nostrCarrier && sign)
    }

    @Test("a hidden channel event is held: released once through the normal path, then no longer held")
    func heldAndReleased() throws {
        var judge = BridgeJudge(settings: .init(channel: "u4pruy"), policy: AdmissionPolicy(config: SpamFilterConfig()))
        judge.setBlocked([try IdentityKey.nostr(pubkey: alice.publicKey.bytes)])
        var m = machine(judge: judge)
        _ = m.handle(.relaysConnected(1), now: Self.now)
        let e = event("blocked line")
        let actions = m.handle(.relayEvent(e), now: Self.now)
        #expect(actions.contains { if case .hidden(let report) = $0 { report.rule == .blocked } else { false } })
        #expect(actions.contains { if case .log(let line) = $0 { line.message == "hidden" } else { false } })
        let (released, _) = m.release(messageID: e.id.hex, by: "console", now: Self.now + 1)
        #expect((try? released.get()) != nil)
        func notHeld(_ result: Result<Void, BridgeMachine.ReleaseError>) -> Bool {
            if case .failure(.notHeld) = result { true } else { false }
        }
        #expect(notHeld(m.release(messageID: e.id.hex, by: "console", now: Self.now + 2).result), "released once: no longer held")
        #expect(notHeld(m.release(messageID: String(repeating: "0", count: 64), by: "console", now: Self.now + 2).result))
    }

    @Test("another bridge's announce joins this island: the downlink is shared, and logged")
    func islandBridges() throws {
        var m = machine()
        let other = BridgeKeys.generate()
        let peer = MeshPeer(
            id: MeshPeerID(noisePublicKey: other.noiseKey.publicKey), nickname: "b", noisePublicKey: other.noiseKey.publicKey,
            signingPublicKey: other.signingKey.publicKey, capabilities: [.gateway], bridgeGeohash: nil, lastSeen: 0, isDirect: true)
        let actions = m.handle(.mesh(.peerVerified(peer)), now: Self.now)
        #expect(actions.contains { if case .sighting = $0 { true } else { false } })
        #expect(actions.contains { if case .log(let line) = $0 { line.message == "island bridges" } else { false } })
        #expect(m.peers.gateways == [peer.id])
        #expect(m.handle(.mesh(.peerVerified(peer)), now: Self.now + 1).allSatisfy { if case .log(let line) = $0 { line.message != "island bridges" } else { true } },
                "the same island again: no island line")
        _ = m.handle(.mesh(.peerLost(peer.id, reason: .timeout)), now: Self.now + 2)
        #expect(m.peers.gateways.isEmpty && m.peers.count == 0)
    }

    @Test("sync keeps a message only after the judgement passed it; a hidden one is never kept")
    func syncOnlyPassed() throws {
        var judge = BridgeJudge(settings: .init(channel: "u4pruy"), policy: AdmissionPolicy(config: SpamFilterConfig()))
        let phoneNoise = X25519PrivateKey.generate()
        let phoneSigning = Ed25519PrivateKey.generate()
        judge.setBlocked([try IdentityKey.mesh(noiseKey: phoneNoise.publicKey)])
        var m = machine(judge: judge, sync: true)
        let sender = MeshPeerID(noisePublicKey: phoneNoise.publicKey)
        func message(_ text: String, at ms: UInt64) throws -> (MeshPublicMessage, MeshPacket) {
            let packet = try MeshPacket(type: .message, timestamp: ms, sender: sender, payload: Array(text.utf8)).signed(with: phoneSigning)
            let stableID = MeshMessageIdentity.stableID(senderHex: sender.hex, timestampMs: ms, content: text)
            return (MeshPublicMessage(sender: sender, nickname: "p", text: text, timestamp: ms, stableID: stableID, ttl: 7,
                                      noisePublicKey: phoneNoise.publicKey), packet)
        }
        let nowMs = UInt64(Self.now * 1000)
        let (hiddenMessage, hiddenPacket) = try message("from a blocked phone", at: nowMs)
        let verdict = m.handle(.mesh(.publicMessage(hiddenMessage)), now: Self.now)
        let verdicts = meshInputs(verdict).compactMap { if case .relayVerdict(let id, let relay) = $0 { (id, relay) } else { nil } }
        #expect(verdicts.count == 1 && verdicts.first?.0 == hiddenMessage.stableID && verdicts.first?.1 == false)
        #expect(m.handle(.mesh(.syncStore(hiddenPacket)), now: Self.now).isEmpty)
        #expect(m.sync.count(.message) == 0)

        var open = machine(sync: true)
        // The phone's announce first: a message is kept only with it (APP-BEHAVIOUR §3).
        let announce = try MeshPacket(type: .announce, timestamp: nowMs, sender: sender, payload: AnnouncePayload(
            nickname: "p", noisePublicKey: phoneNoise.publicKey, signingPublicKey: phoneSigning.publicKey.rawRepresentation).encode())
            .signed(with: phoneSigning)
        _ = open.handle(.mesh(.syncStore(announce)), now: Self.now)
        let (passed, packet) = try message("a fine line", at: nowMs + 1)
        _ = open.handle(.mesh(.publicMessage(passed)), now: Self.now)
        let kept = open.handle(.mesh(.syncStore(packet)), now: Self.now)
        #expect(kept.contains { if case .syncChanges(let changes) = $0 { !changes.isEmpty } else { false } })
        #expect(open.sync.count(.message) == 1 && open.counters.syncStored[.message] == 1)
    }

    @Test("priority authors: staff (allowed) and verified Nostr keys at start, and again only when a list changes")
    func priorityAuthors() throws {
        let allowed = try IdentityKey.nostr(pubkey: alice.publicKey.bytes)
        let verified = try IdentityKey.nostr(pubkey: try SchnorrSecretKey(bytes: [UInt8](repeating: 5, count: 32)).publicKey.bytes)
        var restarted = BridgeMachine(router: machine().router, configuration: .init(keys: keys, seed: 1))
        let start = restarted.start(
            .init(operatorLists: OperatorLists(verified: [verified]), marks: OperatorMarks(staff: [allowed])), now: Self.now)
        #expect(start.contains { if case .priorityAuthors(let authors) = $0 { authors == [alice.publicKey.hex, verified.hex] } else { false } })
        #expect(restarted.nextDeadline(now: Self.now + 1) == .infinity, "nothing left to compute")
        let (_, reloaded) = restarted.reloadPolicy(.success(.empty), now: Self.now + 10)
        #expect(reloaded.contains { if case .priorityAuthors(let authors) = $0 { authors == [alice.publicKey.hex] } else { false } })
        // The executor reads the marks again: staff gone, computed at once (an operator's change is not paced).
        let marked = restarted.handle(.localMarks(OperatorMarks()), now: Self.now + 11)
        #expect(marked.contains { if case .priorityAuthors(let authors) = $0 { authors.isEmpty } else { false } })
    }

    @Test("staff (allowed keys) pass the spam filter, not the block list or the denylist; others' repeats are hidden")
    func staffLane() throws {
        let steward = try IdentityKey.nostr(pubkey: alice.publicKey.bytes)
        let stranger = try SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
        var judge = BridgeJudge(settings: .init(channel: "u4pruy"), policy: AdmissionPolicy(config: SpamFilterConfig()))
        judge.setStaff([steward])
        var m = machine(judge: judge)
        _ = m.handle(.relaysConnected(1), now: Self.now)
        func hidden(_ actions: [BridgeMachine.Action]) -> HideRule? {
            actions.lazy.compactMap { if case .hidden(let report) = $0, !report.shadow { report.rule } else { nil } }.first
        }
        let line = "LOST CHILD near main stage, red jacket, ask at the info tent"
        for i in 0..<4 {
            #expect(hidden(m.handle(.relayEvent(event(line, at: Self.now + Double(i), key: alice)), now: Self.now + Double(i))) == nil, "\(i)")
        }
        let repeats = (0..<4).map { i in hidden(m.handle(.relayEvent(event(line, at: Self.now + 10 + Double(i), key: stranger)), now: Self.now + 10 + Double(i))) }
        #expect(repeats.contains { $0 != nil }, "a stranger's repeats are hidden: \(repeats)")
        // The operator's own word still applies to staff: the denylist, and a block (block wins over allow).
        _ = m.handle(.operatorInput(.setDenylist(try Denylist([.keyword("tickets")]), by: "session:ana")), now: Self.now + 20)
        #expect(hidden(m.handle(.relayEvent(event("cheap tickets here", at: Self.now + 21, key: alice)), now: Self.now + 21)) == .denylist)
        _ = m.handle(.localMarks(OperatorMarks(blocked: [steward], staff: [steward])), now: Self.now + 22)
        #expect(hidden(m.handle(.relayEvent(event("still me", at: Self.now + 23, key: alice)), now: Self.now + 23)) == .blocked)
    }
}
