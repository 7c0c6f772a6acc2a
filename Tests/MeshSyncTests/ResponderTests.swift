import BitchatWire
import BotCrypto
import BotSupport
import MeshSync
import Testing

@Suite("SyncResponder: BOARD.md §9.4 checks, reply set, reply shape, airtime budget")
struct ResponderTests {
    let alice = Phone(1)
    let gossip = MemoryGossipStore()
    let board = MemoryBoardStore()

    init() {
        // Her announce first: a message is kept only with its sender's announce (APP-BEHAVIOUR §3).
        gossip.record(alice.announce(at: t0 + 50_000), now: t0 + 60_000)
        for i in 0..<20 { gossip.record(alice.message("m\(i)", at: t0 + UInt64(i) * 1000), now: t0 + 60_000) }
        for i in 0..<3 { board.ingest(alice.post("post \(i)", id: UInt8(i), createdAt: t0 + UInt64(i)), now: t0 + 60_000) }
    }

    func input(_ packet: MeshPacket, link: MeshPeerID? = nil, key: Ed25519PublicKey?? = nil) -> SyncRequestInput {
        SyncRequestInput(packet: packet, linkPeers: [link ?? packet.sender], pinnedKey: key ?? alice.key.publicKey)
    }

    static let empty = RequestSyncPayload(p: 7, m: 1, data: [])

    @Test("each check refuses and is counted: TTL, bound link, unsigned, no key, wrong key, undecodable")
    func refusals() {
        var responder = SyncResponder()
        let now = t0 + 60_000
        let good = alice.request(Self.empty, at: now, to: bridgeID)
        let cases: [(SyncRequestInput, SyncRefusal)] = [
            (input(alice.request(Self.empty, at: now, to: bridgeID, ttl: 1)), .ttlNotZero),
            (input(good, link: MeshPeerID(rawValue: 5)), .senderNotLinkPeer),
            (input(alice.request(Self.empty, at: now, to: bridgeID, signed: false)), .unsigned),
            (input(good, key: .some(nil)), .noPinnedKey),
            (input(alice.request(Self.empty, at: now, to: bridgeID, key: Phone(9).key)), .badSignature),
            (input(try! MeshPacket(type: .requestSync, ttl: 0, timestamp: now, sender: alice.id, payload: [1, 0, 1]).signed(with: alice.key)), .undecodable),
        ]
        for (request, reason) in cases {
            let answer = responder.answer(request, gossip: gossip, board: board, now: now)
            #expect(answer.refusal == reason)
            #expect(answer.frames.isEmpty)
        }
        #expect(responder.counters.refused.total == cases.count)
        for (_, reason) in cases { #expect(responder.counters.refused[reason] == 1) }
        // An unbound link does not check the sender.
        #expect(responder.answer(SyncRequestInput(packet: good, linkPeers: [], pinnedKey: alice.key.publicKey), gossip: gossip, board: board, now: now).refusal == nil)
    }

    @Test("≤ 8 answered requests per 30 s per peer; the cutoff is inclusive")
    func rateLimit() {
        var responder = SyncResponder()
        let now = t0 + 60_000
        let request = input(alice.request(Self.empty, at: now, to: bridgeID))
        for i in 0..<8 { #expect(responder.answer(request, gossip: gossip, board: board, now: now + UInt64(i)).refusal == nil) }
        #expect(responder.answer(request, gossip: gossip, board: board, now: now + 8).refusal == .rateLimited)
        #expect(responder.answer(request, gossip: gossip, board: board, now: now + 30_000).refusal == .rateLimited, "30 s after the first it still counts")
        #expect(responder.answer(request, gossip: gossip, board: board, now: now + 30_001).refusal == nil)
        // Another peer has its own window.
        let bob = Phone(2)
        let bobs = SyncRequestInput(packet: bob.request(Self.empty, at: now, to: bridgeID), linkPeers: [bob.id], pinnedKey: bob.key.publicKey)
        #expect(responder.answer(bobs, gossip: gossip, board: board, now: now + 9).refusal == nil)
    }

    @Test("paced per link: an iPhone's five requests at once get two answers now and the rest one per 5 s, answered from the store as it is then; more than four waiting are refused")
    func pacing() {
        var responder = SyncResponder(configuration: SyncResponder.Configuration(pacing: SyncResponder.Pacing()))
        var source = StoreReplySource(gossip: gossip, board: board)
        let now = t0 + 60_000
        let request = input(alice.request(Self.empty, at: now, to: bridgeID))
        var answered = 0
        for i in 0..<5 { answered += responder.receive(request, route: 7, from: &source, now: now + UInt64(i)).count }
        #expect(answered == 2 && responder.counters.deferred == 3)
        #expect(responder.nextDue == now + 5_000)
        // A line arrives meanwhile: the deferred answer carries it.
        gossip.record(alice.message("said while waiting", at: now + 1_000), now: now + 1_000)
        let later = responder.due(from: &source, now: now + 5_000)
        #expect(later.count == 1 && later[0].route == 7 && later[0].answer.frames.count == 22)
        #expect(responder.due(from: &source, now: now + 9_999).isEmpty)
        // Two more join the two still waiting; a fifth waiting is refused.
        _ = responder.receive(request, route: 7, from: &source, now: now + 6_000)
        _ = responder.receive(request, route: 7, from: &source, now: now + 6_001)
        let refused = responder.receive(request, route: 7, from: &source, now: now + 6_002)
        #expect(refused.first?.answer.refusal == .linkBusy && responder.counters.refused[.linkBusy] == 1)
        // Another requester has turns of its own.
        let bob = Phone(2)
        let bobs = SyncRequestInput(packet: bob.request(Self.empty, at: now, to: bridgeID), linkPeers: [bob.id], pinnedKey: bob.key.publicKey)
        #expect(responder.receive(bobs, route: 8, from: &source, now: now + 6_003).first?.answer.refusal == nil)
        for step in 2...5 { #expect(responder.due(from: &source, now: now + UInt64(step) * 5_000).count == 1, "one per turn") }
        #expect(responder.nextDue == nil)
    }

    @Test("an empty filter gets every announce and message (types absent); replies are the stored frames with TTL 0 + RSR")
    func everythingAndShape() throws {
        var responder = SyncResponder()
        let now = t0 + 60_000
        let answer = responder.answer(input(alice.request(Self.empty, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        #expect(answer.recipient == alice.id)
        #expect(answer.frames.count == 21, "1 announce + 20 messages, no board (types absent = announce + message)")
        let stored = gossip.packets(.announce, now: now) + gossip.packets(.message, now: now)
        for (frame, original) in zip(answer.frames, stored) {
            let reply = try MeshPacket.decode(frame)
            #expect(reply.ttl == 0 && reply.isRSR)
            #expect(reply.recipient == original.packet.recipient && reply.sender == original.sender && reply.timestamp == original.timestamp)
            #expect(reply.payload == original.packet.payload && reply.signature == original.packet.signature)
            #expect(reply.verifySignature(alice.key.publicKey).isValid)
            #expect(MeshMessageIdentity.packetID(reply) == original.id)
            var expected = original.frame
            expected[2] = 0
            expected[11] |= 0x10
            #expect(frame == expected, "byte-identical except TTL and RSR")
            #expect(frame.count < 256 || MessagePadding.unpad(frame) == nil, "unpadded")
        }
        #expect(responder.counters.replies[.sent] == 21)
        #expect(responder.counters.replyBytes == answer.frames.reduce(0) { $0 + $1.count })
    }

    @Test("the filter and since exclude what the requester holds; announces are exempt from since")
    func filterAndSince() {
        var responder = SyncResponder()
        let now = t0 + 60_000
        let messages = gossip.packets(.message, now: now)
        // The requester holds the 10 newest messages and declares since = oldest of them.
        let held = messages.suffix(10)
        let request = RequestSyncPayload.build(types: .publicMessages, candidates: held.map { ($0.id, $0.timestamp) })
        #expect(request.sinceTimestamp == nil, "not truncated: no since")
        let answer1 = responder.answer(input(alice.request(request, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        #expect(answer1.frames.count == 11, "10 older messages + the announce")
        var withSince = request
        withSince.sinceTimestamp = held.first!.timestamp
        let answer2 = responder.answer(input(alice.request(withSince, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        #expect(answer2.frames.count == 1, "only the announce: older messages are before since")
        #expect((try? MeshPacket.decode(answer2.frames[0]).type) == .announce)
    }

    @Test("a message never goes without its sender's announce ahead of it: a filter that holds the announce (or a false positive) and a request for messages alone still get it; none when no message is due")
    func announceAheadOfMessages() throws {
        var responder = SyncResponder()
        let now = t0 + 60_000
        let announce = try #require(gossip.packets(.announce, now: now).first)
        let messages = gossip.packets(.message, now: now)
        // The filter holds the announce and 15 messages: 5 messages are due, and the announce goes before them.
        let holds = [announce] + messages.suffix(15)
        let request = RequestSyncPayload.build(types: .publicMessages, candidates: holds.map { ($0.id, $0.timestamp) })
        let answer = responder.answer(input(alice.request(request, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        let types = try answer.frames.map { try MeshPacket.decode($0).type }
        #expect(types == [.announce] + Array(repeating: .message, count: 5), "the announce first, then the 5 messages it lacks")
        #expect(responder.counters.replies[.covered] == 15, "the announce sent is not counted as held")
        // Messages alone asked: the announce still goes first.
        let messagesOnly = RequestSyncPayload.build(types: .message, candidates: messages.suffix(18).map { ($0.id, $0.timestamp) })
        let second = responder.answer(input(alice.request(messagesOnly, at: now + 1, to: bridgeID)), gossip: gossip, board: board, now: now + 1)
        #expect(try second.frames.map { try MeshPacket.decode($0).type } == [.announce, .message, .message])
        // Nothing due: no announce either.
        let all = RequestSyncPayload.build(types: .publicMessages, candidates: holds.map { ($0.id, $0.timestamp) } + messages.prefix(5).map { ($0.id, $0.timestamp) })
        #expect(responder.answer(input(alice.request(all, at: now + 2, to: bridgeID)), gossip: gossip, board: board, now: now + 2).frames.isEmpty)
    }

    @Test("board round: types 00 01 gets posts and tombstones only; a filter listing them gets nothing")
    func boardRound() {
        var responder = SyncResponder()
        let now = t0 + 60_000
        board.ingest(alice.tombstone(id: 0, at: now), now: now)
        let round = RequestSyncPayload(p: 7, m: 1, data: [], types: SyncTypes.board.rawValue)
        let answer = responder.answer(input(alice.request(round, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        #expect(answer.frames.count == 3, "2 live posts + 1 tombstone")
        #expect(answer.frames.allSatisfy { (try? MeshPacket.decode($0).type) == .boardPost })
        let full = SyncRequester.payload(types: .board, gossip: gossip, board: board, now: now)
        let none = responder.answer(input(alice.request(full, at: now + 1, to: bridgeID)), gossip: gossip, board: board, now: now + 1)
        #expect(none.frames.isEmpty && none.refusal == nil)
        // An empty type set asks for nothing.
        let nothing = RequestSyncPayload(p: 7, m: 1, data: [], types: 0)
        var decoded = try! RequestSyncPayload.decode(nothing.encode())
        decoded.types = 0
        #expect(SyncResponder.replySet(decoded, gossip: gossip, board: board, now: now).packets.isEmpty)
    }

    @Test("a storm of requests from 50 peers stays inside the airtime budget; the rest is withheld and counted")
    func storm() {
        let budget = AirtimeBudget.Configuration(bytesPerWindow: 20_000, windowMs: 60_000, slots: 12)
        var responder = SyncResponder(configuration: .init(airtime: budget))
        let now = t0 + 60_000
        var sent = 0
        for n in 0..<50 {
            let phone = Phone(UInt8(100 + n))
            let request = SyncRequestInput(packet: phone.request(Self.empty, at: now, to: bridgeID), linkPeers: [phone.id], pinnedKey: phone.key.publicKey)
            for _ in 0..<8 {
                let answer = responder.answer(request, gossip: gossip, board: board, now: now + UInt64(n))
                sent += answer.frames.reduce(0) { $0 + $1.count }
            }
        }
        #expect(sent <= 20_000)
        #expect(sent == responder.counters.replyBytes)
        #expect(responder.counters.replies[.withheldByBudget] > 0)
        #expect(responder.counters.answered == 400)
        // A window later the budget is back.
        #expect(responder.airtimeAvailable(now: now + 60_000 + 5_000) == 20_000)
    }

    @Test("fragment-ID filter: only the named streams, since bypassed")
    func fragmentFilter() {
        var responder = SyncResponder()
        let now = t0 + 60_000
        for stream in [UInt64(0xAA), 0xBB] {
            var payload: [UInt8] = (0..<8).map { UInt8(truncatingIfNeeded: stream >> UInt64(56 - 8 * $0)) }
            payload += [0, 0, 0, 1, 0, 2, 0x02, 1, 2, 3]
            gossip.record(try! SyncPacket(MeshPacket(type: .fragment, timestamp: t0 + 10, sender: alice.id, payload: payload)), now: now)
        }
        let request = RequestSyncPayload(p: 7, m: 1, data: [], types: SyncTypes.fragment.rawValue, sinceTimestamp: now, fragmentIDs: [0xBB])
        let answer = responder.answer(input(alice.request(request, at: now, to: bridgeID)), gossip: gossip, board: board, now: now)
        #expect(answer.frames.count == 1)
        #expect(try! MeshPacket.decode(answer.frames[0]).payload.prefix(8).last == 0xBB)
    }
}

@Suite("SyncRequester: rounds every 30 s / 60 s, 1 s after a new direct peer, RSR window 30 s")
struct RequesterTests {
    @Test("requests to one peer are spaced as Android answers a link: 2 at once, then one per 5 s; what waits goes with the next")
    func spacing() {
        var requester = SyncRequester(start: t0)
        let a = MeshPeerID(rawValue: 1)
        // The initial union falls on the tick of the message and board rounds: three rounds for one peer at once.
        requester.directPeerConnected(a, now: t0 + 29_000)
        let now = requester.due(now: t0 + 30_000)
        #expect(now == [SyncRound(peer: a, types: [.announce, .message, .board]), SyncRound(peer: a, types: .publicMessages)])
        #expect(requester.nextWakeUp == t0 + 35_000, "the board round waits for the next turn")
        #expect(requester.due(now: t0 + 34_999).isEmpty)
        #expect(requester.due(now: t0 + 35_000) == [SyncRound(peer: a, types: .board)])
        // A peer that comes and goes: its initial rounds never exceed the spacing.
        var sent = 0
        for i in 0..<20 {
            let at = t0 + 40_000 + UInt64(i) * 1_000
            requester.directPeerDisconnected(a)
            requester.directPeerConnected(a, now: at)
            sent += requester.due(now: at + 1_000).count
        }
        #expect(sent <= 2 + 20 / 5, "\(sent) requests in 20 s")
    }

    @Test func schedule() {
        var requester = SyncRequester(start: t0)
        let a = MeshPeerID(rawValue: 1), b = MeshPeerID(rawValue: 2)
        requester.directPeerConnected(a, now: t0 + 100)
        #expect(requester.nextWakeUp == t0 + 1_100)
        #expect(requester.due(now: t0 + 1_099).isEmpty)
        #expect(requester.due(now: t0 + 1_100) == [SyncRound(peer: a, types: [.announce, .message, .board])])
        #expect(requester.acceptsReply(linkPeers: [a], sender: MeshPeerID(rawValue: 77), now: t0 + 31_100))
        #expect(!requester.acceptsReply(linkPeers: [a], sender: a, now: t0 + 31_101), "30 s window")
        #expect(!requester.acceptsReply(linkPeers: [b], sender: a, now: t0 + 2_000), "no request to the link's peer")
        requester.directPeerConnected(b, now: t0 + 20_000)
        #expect(requester.nextWakeUp == t0 + 21_000)
        _ = requester.due(now: t0 + 21_000)
        #expect(requester.nextWakeUp == t0 + 30_000)
        let first = requester.due(now: t0 + 30_000)
        #expect(first == [
            SyncRound(peer: a, types: .publicMessages), SyncRound(peer: b, types: .publicMessages),
            SyncRound(peer: a, types: .board), SyncRound(peer: b, types: .board),
        ])
        #expect(requester.nextWakeUp == t0 + 60_000)
        #expect(requester.due(now: t0 + 60_000).map(\.types) == [.publicMessages, .publicMessages])
        #expect(requester.due(now: t0 + 90_000).count == 4, "board again 60 s after the first board round")
        requester.directPeerDisconnected(a)
        #expect(requester.due(now: t0 + 120_000) == [SyncRound(peer: b, types: .publicMessages)])
        // A missed tick is not replayed: one round, then the next on the grid.
        #expect(requester.due(now: t0 + 500_000).count == 2)
        #expect(requester.nextWakeUp == t0 + 510_000)
        // A link with no direct peer: the claimed sender is the key.
        #expect(requester.acceptsReply(linkPeers: [], sender: b, now: t0 + 500_001))
        // A shared segment: a request to any of its direct peers opens the window for the link.
        #expect(requester.acceptsReply(linkPeers: [MeshPeerID(rawValue: 9), b], sender: MeshPeerID(rawValue: 77), now: t0 + 500_001))
        #expect(!requester.acceptsReply(linkPeers: [MeshPeerID(rawValue: 9)], sender: b, now: t0 + 500_001))
    }

    @Test("the request payload lists what the bridge holds; since appears when the store exceeds the filter")
    func payload() {
        let gossip = MemoryGossipStore()
        let board = MemoryBoardStore()
        let alice = Phone(1)
        gossip.record(alice.announce(at: t0 + 999), now: t0 + 1000)
        for i in 0..<400 { gossip.record(alice.message("m\(i)", at: t0 + UInt64(i)), now: t0 + 1000) }
        let request = SyncRequester.payload(types: .publicMessages, gossip: gossip, board: board, now: t0 + 1000)
        #expect(request.m == 355 * 128)
        #expect(request.sinceTimestamp == t0 + 46, "the 355 newest are covered: the announce and 354 messages")
        #expect(request.types == SyncTypes.publicMessages.rawValue)
        #expect(request.data.count <= 400)
    }
}
