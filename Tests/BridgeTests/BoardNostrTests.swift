import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import Bridge
import BridgeTesting
import Foundation
import Mesh
import MeshSync
import MeshSyncStorage
import Nostr
import Synchronization
import Testing
import MeshRuntime
import BridgeCore

/// The durable ledger, as the bridge has it, on a database in memory.
func memoryLedger() throws -> BoardNostrLedger { try BoardNostrLedger(database: SQLiteDatabase(path: ":memory:")) }

@Suite("Board ⇄ Nostr copies (BOARD.md §11)")
struct BoardNostrCopyTests {
    let key = try! SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
    let author = try! Ed25519PrivateKey(seed: [UInt8](repeating: 3, count: 32))

    func post(_ content: String, geohash: String = "u4pruy", nickname: String = "ops", flags: UInt8 = 0) throws -> BoardPost {
        try BoardPost.signed(
            postID: [UInt8](repeating: 1, count: 16), geohash: geohash, content: content, nickname: nickname,
            createdAt: 1_700_000_000_123, expiresAt: 1_700_007_200_999, flags: flags, key: author)
    }

    @Test("the note has upstream's tag order g, n, expiration, t; created_at and expiration are floor(ms / 1000)")
    func noteShape() throws {
        let event = try BoardNostrCopy.note(for: post("water point moved", flags: BoardPost.urgentFlag), key: key)
        #expect(event.kind == 1)
        #expect(event.tags == [["g", "u4pruy"], ["n", "ops"], ["expiration", "1700007200"], ["t", "urgent"]])
        #expect(event.createdAt == 1_700_000_000)
        #expect(event.content == "water point moved")
        #expect(event.pubkey == key.publicKey)
        let plain = try BoardNostrCopy.note(for: post("x", nickname: ""), key: key)
        #expect(plain.tags == [["g", "u4pruy"], ["expiration", "1700007200"]], "no n when the nickname is empty, no t when not urgent")
    }

    @Test("the deletion is kind 5 with one e tag and empty content, by the copy's key")
    func deletionShape() throws {
        let copy = try BoardNostrCopy.note(for: post("a"), key: key)
        let deletion = try BoardNostrCopy.deletion(of: copy.id, at: 1_700_000_500, key: key)
        #expect(deletion.kind == 5 && deletion.content == "" && deletion.tags == [["e", copy.id.hex]])
        #expect(deletion.pubkey == copy.pubkey)
    }

    func packet(_ payload: BoardPayload, timestamp: UInt64 = 1_700_000_000_123) -> MeshPacket {
        MeshPacket(type: .boardPost, ttl: 3, timestamp: timestamp, sender: MeshPeerID(rawValue: 0x0102_0304_0506_0708), payload: payload.encode())
    }

    func frame(_ packet: MeshPacket) throws -> [UInt8] { try packet.encode(padding: false, compression: .standard) }

    /// The carried packet's frame and payload (a decoded packet remembers its compressed body, so frames compare).
    func carried(_ event: NostrEvent, served: Set<String> = ["u4pruy"]) throws -> ([UInt8], BoardPayload)? {
        guard case .packet(let packet, let payload) = BoardNostrCopy.carried(in: event, served: served) else { return nil }
        return (try frame(packet), payload)
    }

    @Test("the copy carries the stored packet last (g, n, expiration, t, bitchat-board); read back it is the same packet")
    func carriedRoundTrip() throws {
        let urgent = try post("water point moved", flags: BoardPost.urgentFlag)
        let original = packet(.post(urgent))
        let note = try BoardNostrCopy.note(for: urgent, carrying: frame(original), key: key)
        #expect(note.tags.map { $0[0] } == ["g", "n", "expiration", "t", "bitchat-board"])
        #expect(note.tags[4] == ["bitchat-board", Base64.encode(try frame(original))])
        let read = try #require(try carried(note))
        #expect(read.0 == (try frame(original)) && read.1 == .post(urgent))
        // Whoever signed the event does not matter: another key's event carrying the same tag is as good.
        let stranger = try SchnorrSecretKey(bytes: [UInt8](repeating: 5, count: 32))
        let relayed = try UnsignedEvent(pubkey: stranger.publicKey, createdAt: 1, kind: 1, tags: note.tags, content: "anything").signed(with: stranger)
        #expect(try carried(relayed)?.0 == (try frame(original)))
        // The kind 5: e, g, bitchat-board.
        let tombstone = try BoardTombstone.signed(postID: urgent.postID, deletedAt: 1_700_000_100_000, key: author)
        let deletion = try BoardNostrCopy.deletion(
            of: note.id, at: 1_700_000_100, carrying: ("u4pruy", frame(packet(.tombstone(tombstone)))), key: key)
        #expect(deletion.tags.map { $0[0] } == ["e", "g", "bitchat-board"] && deletion.tags[1] == ["g", "u4pruy"])
        let readTombstone = try #require(try carried(deletion))
        #expect(readTombstone.0 == (try frame(packet(.tombstone(tombstone)))) && readTombstone.1 == .tombstone(tombstone))
    }

    @Test("carried packets are dropped and named: forged inner signature, geohash mismatch, unserved cell, not 0x23, bad base64; no tag = nothing")
    func carriedDrops() throws {
        let good = try post("water point moved")
        func event(_ tags: [[String]], kind: Int = 1) throws -> NostrEvent {
            try UnsignedEvent(pubkey: key.publicKey, createdAt: 1, kind: kind, tags: tags, content: "x").signed(with: key)
        }
        func tag(_ packet: MeshPacket) throws -> [String] { ["bitchat-board", Base64.encode(try frame(packet))] }
        var forged = good
        forged.content = "water point moved to the river"
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], tag(packet(.post(forged)))]), served: ["u4pruy"])
            == .dropped(.inboundBadSignature))
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruz"], tag(packet(.post(good)))]), served: ["u4pruy", "u4pruz"])
            == .dropped(.inboundWrongGeohash), "the post's geohash is not the event's g")
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], tag(packet(.post(good)))]), served: ["u4pruz"])
            == .dropped(.inboundWrongGeohash), "a cell this bridge does not serve")
        #expect(BoardNostrCopy.carried(in: try event([tag(packet(.post(good)))]), served: ["u4pruy"]) == .dropped(.inboundWrongGeohash), "no g")
        let message = MeshPacket(type: .message, timestamp: 1, sender: MeshPeerID(rawValue: 1), payload: Array("hi".utf8))
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], tag(message)]), served: ["u4pruy"]) == .dropped(.inboundUndecodable))
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], ["bitchat-board", "not base64!"]]), served: ["u4pruy"])
            == .dropped(.inboundUndecodable))
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], ["bitchat-board"]]), served: ["u4pruy"]) == .dropped(.inboundUndecodable))
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], ["bitchat-board", Base64.encode([1, 0x23, 7])]]), served: ["u4pruy"])
            == .dropped(.inboundUndecodable), "a truncated frame: the decoder's error counts as a drop")
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], ["n", "ops"]]), served: ["u4pruy"]) == .nothing)
        #expect(BoardNostrCopy.carried(in: try event([["g", "u4pruy"], tag(packet(.post(good)))], kind: 20000), served: ["u4pruy"]) == .nothing,
                "only notes and kind 5 carry board packets")
    }

    @Test("author-bridged check: same g, trimmed content and n within 15 min; other cells, texts or times do not count")
    func authorBridged() throws {
        var notes = RecentBoardNotes()
        let target = try post("water point moved")
        func note(_ content: String, g: String = "u4pruy", n: String = "ops", at: Int64 = 1_700_000_010, kind: Int = 1) throws -> NostrEvent {
            try UnsignedEvent(pubkey: key.publicKey, createdAt: at, kind: kind, tags: [["g", g], ["n", n]], content: content).signed(with: key)
        }
        #expect(!notes.authorBridged(target))
        for event in [try note("water point moved", g: "u4pruz"), try note("water point"), try note("water point moved", n: "x"),
                      try note("water point moved", at: 1_700_000_000 + 901), try note("water point moved", kind: 20000)] {
            notes.record(event)
        }
        #expect(!notes.authorBridged(target))
        notes.record(try note("  water point moved\n", at: 1_700_000_000 - 900))
        #expect(notes.authorBridged(target))
    }

    @Test("the index is bounded: the oldest notes are forgotten first")
    func bounded() throws {
        var notes = RecentBoardNotes()
        let first = try post("note 0")
        for i in 0...RecentBoardNotes.Limits.maxNotes {
            notes.record(try UnsignedEvent(
                pubkey: key.publicKey, createdAt: 1_700_000_000, kind: 1, tags: [["g", "u4pruy"], ["n", "ops"]], content: "note \(i)"
            ).signed(with: key))
        }
        #expect(notes.count == RecentBoardNotes.Limits.maxNotes)
        #expect(!notes.authorBridged(first))
        #expect(notes.authorBridged(try post("note 1")))
    }
}

extension CoordinatorTests {
    @Test("an accepted geohash post is copied once as kind 1 under the bridge's channel key; its tombstone sends kind 5; mesh-local and author-bridged posts are not copied")
    func boardPostsReachNostr() async throws {
        let ledger = try memoryLedger()
        let world = try World(sync: true, boardLedger: ledger)
        let author = Ed25519PrivateKey.generate()
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        @Sendable func packet(_ payload: BoardPayload) -> MeshPacket {
            MeshPacket(type: .boardPost, timestamp: now, sender: MeshPeerID(rawValue: 0), payload: payload.encode())
        }
        func post(_ text: String, id: UInt8, geohash: String = CoordinatorTests.geohash, flags: UInt8 = 0) throws -> BoardPost {
            try BoardPost.signed(
                postID: [UInt8](repeating: id, count: 16), geohash: geohash, content: text, nickname: "ops", createdAt: now,
                expiresAt: now + 7_200_000, flags: flags, key: author)
        }
        let urgent = try post("water point moved to gate C", id: 1, flags: BoardPost.urgentFlag)
        let local = try post("lost child at the blue tent", id: 2, geohash: "")
        let bridgedByAuthor = try post("stage change: 21:00", id: 3)
        // The author's phone published its own copy (iOS livePublishToNostr); the relays deliver it.
        let phoneKey = try SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))
        let authorCopy = try UnsignedEvent(
            pubkey: phoneKey.publicKey, createdAt: Int64(now / 1000), kind: 1,
            tags: [["g", CoordinatorTests.geohash], ["n", "ops"], ["expiration", String((now + 7_200_000) / 1000)]],
            content: "stage change: 21:00").signed(with: phoneKey)
        let channelKey = try world.keys.channelKey(geohash: CoordinatorTests.geohash)
        try await world.run { world in
            #expect(await world.seen.waitFor { if case .peerVerified = $0 { return true } else { return false } })
            world.intake.yield(.event(authorCopy))
            for p in [urgent, local, bridgedByAuthor] { _ = await world.phone.submit(.originate(packet(.post(p)), sign: true)) }
            _ = try await CoordinatorTests.waitForSnapshot(world) { $0.boardNostr.total >= 3 }
            // The same post again (a sync reply, a second relay path): a duplicate, not a second copy.
            _ = await world.phone.submit(.originate(packet(.post(urgent)), sign: true))
            let tombstone = try BoardTombstone.signed(postID: urgent.postID, deletedAt: now + 1000, key: author)
            _ = await world.phone.submit(.originate(packet(.tombstone(tombstone)), sign: true))
            _ = try await CoordinatorTests.waitForSnapshot(world) { $0.boardNostr[.deleted] >= 1 }
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.boardNostr[.published] == 1)
        #expect(snapshot.boardNostr[.notBridged] == 1, "the mesh-local post")
        #expect(snapshot.boardNostr[.authorBridged] == 1)
        #expect(snapshot.boardNostr[.deleted] == 1)
        let published = world.relays.published.withLock { $0 }
        let notes = published.filter { $0.kind == 1 }
        try #require(notes.count == 1)
        let note = notes[0]
        #expect(note.pubkey == channelKey.publicKey, "signed by the bridge's key for the post's geohash")
        #expect(note.content == urgent.content)
        #expect(note.tags.prefix(4) == [["g", CoordinatorTests.geohash], ["n", "ops"], ["expiration", String(urgent.expiresAt / 1000)], ["t", "urgent"]])
        // The fifth tag carries the post's stored packet: the inner payload byte-identical.
        guard case .packet(let carriedPost, _) = BoardNostrCopy.carried(in: note, served: [CoordinatorTests.geohash]) else {
            Issue.record("the note carries no board packet: \(note.tags)")
            return
        }
        #expect(note.tags.count == 5 && note.tags[4].first == BoardNostrCopy.packetTag)
        #expect(carriedPost.payload == BoardPayload.post(urgent).encode())
        let deletions = published.filter { $0.kind == 5 }
        #expect(deletions.count == 1)
        #expect(deletions.first?.tags.prefix(2) == [["e", note.id.hex], ["g", CoordinatorTests.geohash]])
        if let deletion = deletions.first, case .packet(_, .tombstone(let carried)) = BoardNostrCopy.carried(in: deletion, served: [CoordinatorTests.geohash]) {
            #expect(carried.postID == urgent.postID)
        } else {
            Issue.record("the kind 5 carries no tombstone packet: \(deletions)")
        }
        #expect(deletions.first?.pubkey == channelKey.publicKey)
        #expect(try ledger.eventID(forPost: urgent.postID, now: now) == nil, "forgotten once the kind 5 went out")
    }
}

/// The error `body` threw, nil when it returned.
func refusal(_ body: () throws(NoticeError) -> Void) -> NoticeError? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}

@Suite("Operator notices: composition and --expires")
struct OperatorNoticeTests {
    let key = try! Ed25519PrivateKey(seed: [UInt8](repeating: 4, count: 32))

    @Test("durations: m, h, d; anything else is refused by name")
    func durations() throws {
        #expect(try OperatorNotice.parseDuration("30m") == 1_800_000)
        #expect(try OperatorNotice.parseDuration("2h") == 7_200_000)
        #expect(try OperatorNotice.parseDuration("7d") == 604_800_000)
        for bad in ["", "h", "0h", "2", "2w", "-1h", "1.5h", "99999999999999999d"] {
            #expect(refusal { () throws(NoticeError) in _ = try OperatorNotice.parseDuration(bad) } == .duration(bad))
        }
        #expect(refusal { () throws(NoticeError) in _ = try OperatorNotice.parseDuration("30d") } == .lifetime(ms: 30 * 86_400_000))
    }

    @Test("a notice is a signed post that decodes; over-long text, bad geohashes and lifetimes are refused")
    func compose() throws {
        let post = try OperatorNotice.compose(
            "water point moved to gate C", urgent: true, lifetimeMs: 7_200_000, geohash: "u4pruy", nickname: "bridge",
            now: 1_700_000_000_000, key: key)
        #expect(post.isSignatureValid && post.isUrgent && post.expiresAt == 1_700_007_200_000)
        #expect(post.authorKey == key.publicKey.rawRepresentation)
        let long = refusal { () throws(NoticeError) in
            _ = try OperatorNotice.compose(String(repeating: "x", count: 513), urgent: false, lifetimeMs: 1, geohash: "", nickname: "b", now: 1, key: key)
        }
        if case .invalid? = long {} else { Issue.record("513 bytes of text: \(String(describing: long))") }
        let upper = refusal { () throws(NoticeError) in
            _ = try OperatorNotice.compose("x", urgent: false, lifetimeMs: 1, geohash: "U4PRUY", nickname: "b", now: 1, key: key)
        }
        if case .invalid? = upper {} else { Issue.record("an upper-case geohash: \(String(describing: upper))") }
        let tooLong = refusal { () throws(NoticeError) in
            _ = try OperatorNotice.compose(
                "x", urgent: false, lifetimeMs: BoardPayload.Limits.maxLifetimeMs + 1, geohash: "", nickname: "b", now: 1, key: key)
        }
        #expect(tooLong == .lifetime(ms: BoardPayload.Limits.maxLifetimeMs + 1))
    }
}

extension CoordinatorTests {
    @Test("an operator notice reaches the phone as an urgent board post and Nostr as kind 1; withdraw sends the tombstone and kind 5")
    func operatorNotice() async throws {
        let ledger = try memoryLedger()
        let world = try World(sync: true, boardLedger: ledger, phoneSync: true)
        try await world.run { world in await Self.noticeScenario(world) }
        let published = world.relays.published.withLock { $0 }
        let note = try #require(published.first { $0.kind == 1 })
        #expect(note.tags.contains(["t", "urgent"]) && note.tags.contains { $0.first == "expiration" })
        #expect(note.pubkey == (try world.keys.channelKey(geohash: CoordinatorTests.geohash)).publicKey)
        #expect(published.filter { $0.kind == 5 }.map { Array($0.tags.prefix(2)) } == [[["e", note.id.hex], ["g", CoordinatorTests.geohash]]])
    }

    /// The running part of ``operatorNotice()`` (a function of its own: Swift 6.3's region checker crashes on
    /// this body as a closure).
    static func noticeScenario(_ world: World) async {
        let own = world.keys.signingKey.publicKey.rawRepresentation
        #expect(await world.seen.waitFor { if case .peerVerified = $0 { return true } else { return false } })
        let posted = await world.coordinator.postNotice("water point moved to gate C", urgent: true, lifetimeMs: 7_200_000)
        guard case .success(let post) = posted else {
            Issue.record("the notice was refused: \(posted)")
            return
        }
        #expect(post.geohash == CoordinatorTests.geohash, "the default geohash is the bridge's channel")
        let listed = await world.coordinator.notices()
        #expect(listed.map { $0.postID } == [post.postID])
        let sawPost = await world.seen.waitFor { (action: MeshAction) -> Bool in
            guard case .boardPacket(let packet, _) = action, case .post(let got)? = try? BoardPayload.decode(packet.payload)
            else { return false }
            return got == post && got.isUrgent && got.authorKey == own
        }
        #expect(sawPost, "the phone got the notice as an urgent board post")
        let unknown = await world.coordinator.withdrawNotice(postID: [UInt8](repeating: 0, count: 16))
        let unknownRefused: Bool
        switch unknown {
        case .failure(let reason): unknownRefused = reason == NoticeError.unknown(String(repeating: "0", count: 32))
        case .success: unknownRefused = false
        }
        #expect(unknownRefused, "an unknown id is refused")
        let withdrawn = await world.coordinator.withdrawNotice(postID: post.postID)
        let withdrew: Bool
        switch withdrawn {
        case .failure: withdrew = false
        case .success: withdrew = true
        }
        #expect(withdrew, "the notice was withdrawn")
        let sawTombstone = await world.seen.waitFor { (action: MeshAction) -> Bool in
            guard case .boardPacket(let packet, _) = action, case .tombstone(let t)? = try? BoardPayload.decode(packet.payload)
            else { return false }
            return t.postID == post.postID && t.authorKey == own && t.isSignatureValid
        }
        #expect(sawTombstone, "the phone got the tombstone")
        let after = await world.coordinator.notices()
        #expect(after.isEmpty)
    }
}

extension CoordinatorTests {
    @Test("another island's copy: the carried post and its tombstone are stored and broadcast once at TTL 7, otherwise unchanged; forged, wrong-cell, stale and expired ones are counted and not broadcast; nothing is copied back")
    func boardPacketsFromNostr() async throws {
        let world = try World(sync: true, boardLedger: memoryLedger(), phoneSync: true)
        let author = Ed25519PrivateKey.generate()
        // Island A's bridge, whose copies this bridge reads; any key would do (the inner signature decides).
        let islandA = try SchnorrSecretKey(bytes: [UInt8](repeating: 8, count: 32))
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        let sender = MeshPeerID(rawValue: 0x0a0b_0c0d_0102_0304)
        func packet(_ payload: BoardPayload, at timestamp: UInt64 = now) throws -> MeshPacket {
            try MeshPacket(type: .boardPost, ttl: 2, timestamp: timestamp, sender: sender, payload: payload.encode()).signed(with: author)
        }
        func post(_ text: String, id: UInt8, geohash: String = CoordinatorTests.geohash, createdAt: UInt64 = now,
                  expiresAt: UInt64 = now + 7_200_000) throws -> BoardPost {
            try BoardPost.signed(
                postID: [UInt8](repeating: id, count: 16), geohash: geohash, content: text, nickname: "ops", createdAt: createdAt,
                expiresAt: expiresAt, flags: 0, key: author)
        }
        func note(_ carried: MeshPacket, g: String = CoordinatorTests.geohash, kind: Int = 1) throws -> NostrEvent {
            let frame = try carried.encode(padding: false, compression: .standard)
            return try UnsignedEvent(
                pubkey: islandA.publicKey, createdAt: Int64(now / 1000), kind: kind,
                tags: [["g", g], [BoardNostrCopy.packetTag, Base64.encode(frame)]], content: "copy").signed(with: islandA)
        }
        let fresh = try post("water point moved to gate C", id: 1)
        let freshPacket = try packet(.post(fresh))
        var forged = try post("medic tent at north gate", id: 2)
        forged.content = "medic tent closed"
        let elsewhere = try post("stage change", id: 3, geohash: "u4pruz")
        let stale = try post("lost child found", id: 4, createdAt: now - 600_000)
        let stalePacket = try packet(.post(stale), at: now - 600_000)
        let expired = try post("bar open", id: 5, createdAt: now - 10_800_000, expiresAt: now - 3_600_000)
        let tombstone = try BoardTombstone.signed(postID: fresh.postID, deletedAt: now + 1, key: author)
        let tombstonePacket = try packet(.tombstone(tombstone))
        let events = [
            try note(freshPacket), try note(packet(.post(forged))), try note(packet(.post(elsewhere))), try note(stalePacket),
            try note(packet(.post(expired))), try note(freshPacket), try note(tombstonePacket, kind: 5),
        ]
        @Sendable func received(_ payload: [UInt8]) -> @Sendable (MeshAction) -> Bool {
            { if case .boardPacket(let p, _) = $0 { p.payload == payload } else { false } }
        }
        try await world.run { world in
            #expect(await world.seen.waitFor { if case .peerVerified = $0 { return true } else { return false } })
            for event in events { world.intake.yield(.event(event)) }
            let counted = try await Self.waitForSnapshot(world) { $0.boardNostr.total >= events.count }
            #expect(counted)
            #expect(await world.seen.waitFor(received(tombstonePacket.payload)), "the tombstone reached the phone")
        }
        let snapshot = await world.coordinator.snapshot()
        #expect(snapshot.boardNostr[.inboundRelayed] == 2, "the post and its tombstone")
        #expect(snapshot.boardNostr[.inboundBadSignature] == 1)
        #expect(snapshot.boardNostr[.inboundWrongGeohash] == 1)
        #expect(snapshot.boardNostr[.inboundStored] == 1, "outside the ±120 s ingress gate: sync only")
        #expect(snapshot.boardNostr[.inboundRejected] == 1, "expired")
        #expect(snapshot.boardNostr[.inboundDuplicate] == 1)
        #expect(snapshot.boardNostr[.published] == 0 && snapshot.boardNostr[.deleted] == 0)
        #expect(world.relays.published.withLock { $0 }.filter { $0.kind == 1 || $0.kind == 5 }.isEmpty, "nothing copied back to Nostr")
        // What the phone heard: the post once, byte-identical but TTL (7), and the tombstone; nothing else.
        let heard = world.seen.all.compactMap { action -> MeshPacket? in
            if case .boardPacket(let p, _) = action { p } else { nil }
        }
        #expect(heard.map(\.payload) == [freshPacket.payload, tombstonePacket.payload])
        if let first = heard.first {
            #expect(first.ttl == 7 && first.timestamp == now && first.sender == sender && first.signature == freshPacket.signature)
            if case .post(let post)? = try? BoardPayload.decode(first.payload) { #expect(post.isSignatureValid) }
        }
        let store = try #require(world.syncStore)
        #expect(store.livePosts(now: now + 1).map(\.content) == ["lost child found"], "the stale post is served by sync; the deleted and expired ones are not")
    }
}
