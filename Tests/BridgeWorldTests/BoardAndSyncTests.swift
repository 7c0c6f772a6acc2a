import BitchatWire
import BotSupport
import Bridge
import BridgeApp
import BridgeCore
import BridgeTesting
import Mesh
import MeshRuntime
import MeshSync
import Nostr
import Testing

/// Gossip sync and the bulletin board in the in-process world (issue 17, issue 22 part 3).
@Suite("World: gossip sync and the board")
struct BoardAndSyncTests {
    /// A line of made-up words: unlike any other line, so no repeat or copy rule hides it.
    static func chatter(using random: inout SeededRandom) -> String {
        (0..<8).map { _ in String((0..<Int.random(in: 3...7, using: &random)).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement(using: &random)! }) }
            .joined(separator: " ")
    }

    /// What a phone heard and its engine counted, for a failure's message.
    static func trace(_ phone: TestPhone) async -> String {
        let heard = phone.heard.all.map { action -> String in
            switch action {
            case .peerVerified(let peer): "verified \(peer.nickname)"
            case .publicMessage(let m): "message ttl \(m.ttl) \(m.text)"
            case .syncRoundDue(let round): "round \(round.peer)"
            default: String("\(action)".prefix(60))
            }
        }
        let counters = await phone.node.counters
        return heard.joined(separator: "; ") + " | ingress \(counters.ingress) dedup \(counters.dedup) verification \(counters.verification)"
    }

    static func syncReplies(_ phone: TestPhone) -> [MeshPublicMessage] {
        phone.heard.all.compactMap { if case .publicMessage(let m) = $0, m.ttl == 0 { m } else { nil } }
    }

    /// A radio-hub segment is one link for the bridge but a shared medium for its phones: every phone whose announce
    /// verified on it is a direct peer there and gets sync (it was refused `sender_not_link_peer` when the link was
    /// bound to its first announcer).
    @Test("two phones on one segment: the later one gets what it missed by gossip sync, from the same link as the first")
    func laterPhoneOnASharedSegmentGetsSync() async throws {
        let site = Site(name: "shared")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air])
        let early = await site.phone("early", on: [air], app: .iPhoneWithBoard)
        #expect(await early.meets(bridge))
        // Five different lines (near-repeats would be hidden by the filter's repeated-message rule and not kept).
        let said = ["the stage opens at nine", "free water at gate C", "lost a blue jacket near the bar", "who has a charger?", "meet at the big tree"]
        var saidAt: [String: UInt64] = [:]
        for text in said { saidAt[text] = await early.node.submit(.sendPublicMessage(text)) }
        // Kept for sync once judged (within the filter's burst of 6 for one sender).
        #expect(await bridge.log.lines.count(5) { $0.message == "kept for sync" && $0.jsonLine.contains("\"message\"") }.count == 5)
        let late = await site.phone("late", on: [air], app: .iPhoneWithBoard)
        #expect(await late.meets(bridge))
        // The union round 1 s after a new direct peer (the first request), both ways. What the bridge must send is what
        // late lacks and its filter does not claim: a GCS filter matches an ID it does not hold with probability ≈ 1/2^P = 1/128
        // (MESH-WIRE §8.2), and every responder, iOS's too, withholds such a message from that round.
        let bridgeID = await bridge.peerID
        let toBridge: @Sendable (SentSyncRequest) -> Bool = { $0.peer == bridgeID }
        #expect(await site.advance(until: { await late.syncRequestsSent.first(within: 0.05, where: toBridge) != nil }))
        let request = try #require(late.syncRequestsSent.all.first(where: toBridge))
        let filter = GCSFilter.Membership(request.payload)
        let missed = said.filter { text in
            let packet = MeshPacket(type: .message, timestamp: saidAt[text] ?? 0, sender: early.id, payload: Array(text.utf8))
            return !filter.mightContain(h64: GCSFilter.h64(MeshMessageIdentity.packetID(packet)))
        }
        #expect(!missed.isEmpty, "late's filter of a few announces claims none but by chance")
        // The replies are paced.
        #expect(await site.advance(until: {
            await late.heard.count(missed.count, within: 0.05) { if case .publicMessage(let m) = $0 { m.ttl == 0 && missed.contains(m.text) } else { false } }.count
                >= missed.count
        }))
        for text in missed {
            #expect(await late.heard.first { if case .publicMessage(let m) = $0 { m.text == text && m.ttl == 0 } else { false } } != nil, "\(text)")
        }
        let trace = await Self.trace(late)
        #expect(Set(missed).isSubset(of: Self.syncReplies(late).map(\.text)) && Set(Self.syncReplies(late).map(\.text)).isSubset(of: said), "\(trace)")
        // Both phones of the segment were answered (neither refused as `sender_not_link_peer`).
        for phone in [early, late] {
            #expect(await bridge.logLine("sync request") { $0.jsonLine.contains(phone.id.hex) && $0.jsonLine.contains("\"answered\"") } != nil)
        }
        #expect(await bridge.coordinator.snapshot().sync.refused[.senderNotLinkPeer] == 0)
        await site.stop()
    }

    @Test("sync_reply_budget is the bridge's: with 4096 bytes a late phone's request gets at most that, the rest withheld and counted")
    func replyBudget() async throws {
        let site = Site(name: "budget")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("bridge", relays: [relay], segments: [air], settings: ["BRIDGE_SYNC_REPLY_BUDGET": "4096"])
        var random = SeededRandom(seed: 22)
        var speakers: [TestPhone] = []
        for i in 0..<8 { speakers.append(await site.phone("speaker\(i)", on: [air])) }
        for speaker in speakers {
            #expect(await speaker.meets(bridge))
            for _ in 0..<5 { await speaker.say(Self.chatter(using: &random)) }
        }
        #expect(await bridge.log.lines.count(40) { $0.message == "kept for sync" && $0.jsonLine.contains("\"message\"") }.count == 40)
        let late = await site.phone("late", on: [air], app: .iPhoneWithBoard)
        #expect(await late.meets(bridge))
        #expect(await site.advance(until: {
            await late.heard.first(within: 0.05) { if case .publicMessage(let m) = $0 { m.ttl == 0 } else { false } } != nil
        }), "replies came")
        let sync = await bridge.coordinator.snapshot().sync
        #expect(sync.replyBytes > 0 && sync.replyBytes <= 4_096 && sync.replies[.withheldByBudget] > 0, "\(sync)")
        let metrics = await bridge.runtime.metricsText()
        #expect(metrics.contains("bitchat_bridge_sync_replies_total{outcome=\"withheld_by_budget\"} \(sync.replies[.withheldByBudget])"))
        await site.stop()
    }

    /// BOARD.md §11: bridge A copies the accepted post to Nostr with the author's packet in a `bitchat-board` tag;
    /// bridge B reads the tag, verifies the inner signature and broadcasts the original packet at TTL 7.
    @Test("island A's board post reaches island B's phone once (byte-identical payload, TTL 7) via two bridges and the relay, and a late phone there by sync; its tombstone removes it on B and deletes the copy with a kind 5")
    func boardAcrossIslands() async throws {
        let site = Site(name: "board")
        let relay = try site.relay()
        let islandA = site.segment(), islandB = site.segment()
        let bridgeA = try await site.bridge("board-a", relays: [relay], segments: [islandA])
        let bridgeB = try await site.bridge("board-b", relays: [relay], segments: [islandB])
        let author = await site.phone("author", on: [islandA], app: .iPhoneWithBoard)
        let listener = await site.phone("listener", on: [islandB], app: .iPhoneWithBoard)
        #expect(await author.meets(bridgeA))
        let post = try await author.postOnBoard("water point moved to gate C")
        let payload = BoardPayload.post(post).encode()
        let note = try #require(await relay.waitForEvent { $0.kind == 1 && $0.content == "water point moved to gate C" })
        #expect(note.tags.last?.first == "bitchat-board")
        #expect(await listener.heardBoard(payload))
        let live = listener.boardPackets.filter { $0.payload == payload && !$0.rsr }
        #expect(live.count == 1 && live.first?.ttl == 7)

        let lateBefore = await site.phone("late-before", on: [islandB], app: .iPhoneWithBoard)
        #expect(await lateBefore.meets(bridgeB))
        // The union round 1 s after a new direct peer, with paced replies — or, when the union's filter (a handful of
        // announces) claims the post by a GCS false positive (≈ 1/128, MESH-WIRE §8.2), the first board round 30 s
        // after the phone started, whose filter of an empty board store claims nothing.
        #expect(await site.advance(until: { await lateBefore.heardBoard(payload, bySync: true, within: 0.05) }, limit: 40_000),
                "bridge B serves the post by sync")

        let tombstone = try await author.deleteFromBoard(post)
        #expect(await relay.waitForEvent { $0.kind == 5 && $0.tags.contains(["e", note.id.hex]) } != nil)
        #expect(await listener.heardBoard(tombstone))
        let lateAfter = await site.phone("late-after", on: [islandB], app: .iPhoneWithBoard)
        #expect(await lateAfter.meets(bridgeB))
        #expect(await site.advance(until: { await lateAfter.heardBoard(tombstone, bySync: true, within: 0.05) }, limit: 40_000))
        let served = lateAfter.boardPackets.filter(\.rsr).map(\.payload)
        #expect(served.contains(tombstone) && !served.contains(payload), "bridge B stops serving the deleted post")
        #expect(await bridgeB.runtime.metricsText().contains("bitchat_bridge_board_nostr_total{outcome=\"inbound_relayed\"} 2"))
        #expect(listener.boardPackets.filter { !$0.rsr && ($0.payload == payload || $0.payload == tombstone) }.count == 2, "each once")
        await site.stop()
    }
}
