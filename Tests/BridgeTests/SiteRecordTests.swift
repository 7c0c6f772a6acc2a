import BotCrypto
import BotSupport
import Bridge
import BotStorage
import Nostr
import Testing
import Identity
import BridgeCore

@Suite("Site records (issue 35): one record per target, sealed, newest wins, pending until a relay acknowledges")
struct SiteRecordTests {
    static let operatorKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 61, count: 32))
    static let otherOperator = try! SchnorrSecretKey(bytes: [UInt8](repeating: 62, count: 32))
    static let key = try! SiteKey(operatorKey: operatorKey, site: "festival")
    static let mallory = try! IdentityKey(kind: .nostr, bytes: [UInt8](repeating: 0xAA, count: 32))
    static let trent = try! IdentityKey(kind: .nostr, bytes: [UInt8](repeating: 0xBB, count: 32))
    static let steward = try! IdentityKey(kind: .mesh, bytes: [UInt8](repeating: 0xBB, count: 32))
    static let now = 1_800_000_000.0

    static func ledger(own: String = "stage-b") -> SiteLedger {
        SiteLedger(key: key, operators: [operatorKey.publicKey, otherOperator.publicKey], ownBridge: own)
    }

    static func event(_ target: SiteTarget, on: Bool, at: Int64, by: String = "session:ana", author: SchnorrSecretKey = operatorKey, key: SiteKey = key) throws -> NostrEvent {
        try SiteRecord.event(target: target, on: on, by: by, bridge: "stage-a", createdAt: at, key: key, author: author)
    }

    @Test("a record reads back as made; its tags and content name no key, word or site secret")
    func roundTrip() throws {
        for target in [SiteTarget.block(Self.mallory), .staff(Self.steward), try .word(term: "FREE Tickets"), .release(String(repeating: "ab", count: 32))] {
            let event = try Self.event(target, on: true, at: Int64(Self.now))
            let record = try SiteRecord(event: event, key: Self.key, operators: [Self.operatorKey.publicKey])
            #expect(record.target == target && record.on && record.by == "session:ana" && record.bridge == "stage-a")
            #expect(event.kind == 30078)
            let address = try #require(event.firstTag("d"))[1]
            #expect(address.hasPrefix("bitchat-bridge/site/festival:") && address.count == "bitchat-bridge/site/festival:".count + 32)
            #expect(event.firstTag("s") == ["s", "festival"])
            let wire = event.json.lowercased()
            for secret in [Self.mallory.hex, Self.steward.hex, "free tickets", "session:ana", "stage-a", "block", "staff"] {
                #expect(!wire.contains(secret), "\(secret) is in the clear")
            }
        }
        #expect(try SiteTarget.word(term: "FREE Tickets") == .word("free tickets"), "words are lowercased")
    }

    @Test("named refusals: another operator key's seal, another site, a tampered content, an unknown author, a bad target")
    func refusals() throws {
        let event = try Self.event(.block(Self.mallory), on: true, at: 100)
        let operators: Set = [Self.operatorKey.publicKey, Self.otherOperator.publicKey]
        let otherKey = try SiteKey(operatorKey: Self.otherOperator, site: "festival")
        #expect(throws: SiteRecordError.unreadable) { try SiteRecord(event: event, key: otherKey, operators: operators) }
        let otherSite = try SiteKey(operatorKey: Self.operatorKey, site: "other")
        #expect(throws: SiteRecordError.otherSite) { try SiteRecord(event: event, key: otherSite, operators: operators) }
        #expect(throws: SiteRecordError.notOperator(Self.operatorKey.publicKey.hex)) {
            try SiteRecord(event: event, key: Self.key, operators: [Self.otherOperator.publicKey])
        }
        // The content moved onto another target's address does not open (the address is the seal's associated data).
        let other = try Self.event(.block(Self.steward), on: true, at: 100)
        let moved = try UnsignedEvent(pubkey: Self.operatorKey.publicKey, createdAt: 100, kind: 30078,
                                      tags: other.tags, content: event.content).signed(with: Self.operatorKey)
        #expect(throws: SiteRecordError.unreadable) { try SiteRecord(event: moved, key: Self.key, operators: operators) }
        #expect(throws: SiteRecordError.self) { try SiteTarget(parsing: "block:nostr:xyz") }
        #expect(throws: SiteRecordError.self) { try SiteTarget(parsing: "mute:nostr:\(Self.mallory.hex)") }
        #expect(throws: SiteRecordError.self) { try SiteTarget.word(term: "") }
        #expect(throws: SiteRecordError.self) { try SiteTarget(parsing: "release:ABC") }
        var ledger = Self.ledger()
        #expect(ledger.offer(moved).outcome == .unreadable)
        #expect(ledger.offer(try Self.event(.block(Self.mallory), on: true, at: 100, key: otherKey)).outcome == .unreadable)
        #expect(ledger.outcomes[.unreadable] == 2 && ledger.records.isEmpty)
    }

    @Test("two stages, two targets, one second: both hold; on one target the newest wins, a tie goes to the lower id, in any order")
    func convergence() throws {
        let a = try Self.event(.block(Self.mallory), on: true, at: 500, by: "session:ana")
        let b = try Self.event(.block(Self.steward), on: true, at: 500, by: "session:ben")
        let unblock = try Self.event(.block(Self.mallory), on: false, at: 501, by: "session:ben")
        let tieX = try Self.event(.staff(Self.steward), on: true, at: 700, by: "session:ana")
        let tieY = try Self.event(.staff(Self.steward), on: false, at: 700, by: "session:ben")
        let winner = tieX.id.hex < tieY.id.hex ? tieX : tieY
        var states: [[SiteTarget: Bool]] = []
        for order in [[a, b, unblock, tieX, tieY], [tieY, unblock, b, tieX, a], [b, tieX, a, tieY, unblock]] {
            var ledger = Self.ledger()
            for event in order { ledger.offer(event) }
            states.append(ledger.records.mapValues(\.on))
            #expect(ledger.blocks.applied(to: [Self.mallory]) == [Self.steward], "the unblock clears a local block too")
            #expect(ledger.record(.staff(Self.steward))?.eventID == winner.id)
        }
        #expect(states.allSatisfy { $0 == states[0] }, "every order ends in the same state")
        #expect(states[0][.block(Self.steward)] == true && states[0][.block(Self.mallory)] == false)
    }

    @Test("a local action replaces what the moderator saw: one past a newer record, or the previous action of the same second")
    func localActionIsNewest() throws {
        var ledger = Self.ledger()
        // Another stage's clock is ahead: its block is stamped 40 s in our future.
        ledger.offer(try Self.event(.block(Self.mallory), on: true, at: Int64(Self.now) + 40))
        let unblock = try ledger.make(.block(Self.mallory), on: false, by: "cli:root", bridge: "stage-b", now: Self.now, author: Self.operatorKey)
        #expect(unblock.createdAt == Int64(Self.now) + 41)
        let again = try ledger.make(.block(Self.mallory), on: true, by: "cli:root", bridge: "stage-b", now: Self.now, author: Self.operatorKey)
        #expect(again.createdAt == Int64(Self.now) + 42)
        #expect(ledger.record(.block(Self.mallory))?.on == true && ledger.record(.block(Self.mallory))?.by == "cli:root")
        // Our own records coming back from the relay change nothing.
        #expect(ledger.offer(unblock).outcome == .older && ledger.offer(again).outcome == .older)
    }

    @Test("made records are pending until a relay acknowledges them: again after 30 s, at once when a relay returns, 100 a pass")
    func republishing() throws {
        var ledger = Self.ledger()
        var made: [NostrEvent] = []
        for index in 0..<150 {
            let key = try IdentityKey(kind: .nostr, bytes: [UInt8](repeating: UInt8(index), count: 31) + [7])
            made.append(try ledger.make(.block(key), on: true, by: "session:ana", bridge: "a", now: Self.now, author: Self.operatorKey))
        }
        #expect(ledger.unacknowledgedCount == 150 && ledger.nextDeadline == Self.now + 30)
        #expect(made.filter { $0.createdAt == Int64(Self.now) }.count == 100 && made.filter { $0.createdAt == Int64(Self.now) + 1 }.count == 50,
                "at most 100 records stamped into one second")
        #expect(ledger.due(now: Self.now + 29).isEmpty)
        #expect(ledger.acknowledged(made[0].id) && !ledger.acknowledged(made[0].id))
        let first = ledger.due(now: Self.now + 30)
        #expect(first.count == 100 && first.first?.id == made[1].id, "oldest first, 100 a pass")
        #expect(ledger.nextDeadline == Self.now + 31, "the rest a second later")
        #expect(ledger.due(now: Self.now + 31).count == 49)
        #expect(ledger.nextDeadline == Self.now + 60)
        ledger.relaysReturned()
        #expect(ledger.due(now: Self.now + 32).count == 100, "a relay back: at once")
        for event in made { _ = ledger.acknowledged(event.id) }
        #expect(ledger.unacknowledgedCount == 0 && ledger.nextDeadline == nil)
        // A pending record replaced by a newer one of its target is not published any more (a relay refuses the older
        // version of a replaceable event: it would stay pending for ever).
        let older = try ledger.make(.stage("a"), on: true, by: "bridge", bridge: "a", now: Self.now + 100, author: Self.operatorKey)
        let second = try ledger.make(.stage("a"), on: true, by: "bridge", bridge: "a", now: Self.now + 160, author: Self.operatorKey)
        #expect(ledger.unacknowledgedCount == 1 && !ledger.acknowledged(older.id) && ledger.acknowledged(second.id))
    }

    @Test("a record a relay refuses for good (invalid:, pow:, blocked:, restricted:) is not published again every 30 s; a rate limit is; another relay's OK still acknowledges it")
    func refusedForGood() throws {
        var ledger = Self.ledger()
        let refused = try ledger.make(.block(Self.mallory), on: true, by: "session:ana", bridge: "a", now: Self.now, author: Self.operatorKey)
        let limited = try ledger.make(.block(Self.trent), on: true, by: "session:ana", bridge: "a", now: Self.now, author: Self.operatorKey)
        #expect(ledger.refused(limited.id, message: "rate-limited: slow down") == nil)
        #expect(ledger.refused(refused.id, message: "blocked: kind 30078 not accepted")?.target == .block(Self.mallory))
        #expect(ledger.outcomes[.refused] == 1 && ledger.unacknowledgedCount == 2, "still unacknowledged: no relay took it")
        #expect(ledger.due(now: Self.now + 30).map(\.id) == [limited.id], "the rate-limited one again, the refused one not")
        #expect(ledger.due(now: Self.now + 3_600).map(\.id) == [limited.id])
        let tookIt = ledger.acknowledged(refused.id)
        #expect(tookIt, "another relay took it after all")
        #expect(SiteLedger.isPermanentRefusal("invalid: bad signature") && SiteLedger.isPermanentRefusal("pow: difficulty 8 < 20"))
        #expect(!SiteLedger.isPermanentRefusal("error: disk full") && !SiteLedger.isPermanentRefusal("auth-required: sign in")
            && !SiteLedger.isPermanentRefusal("duplicate: have it") && !SiteLedger.isPermanentRefusal(""))
    }

    @Test("the records in force this stage made are published again whenever a relay returns (a relay that lost its data has them again); others' are not")
    func ownRecordsRepublished() throws {
        var ledger = Self.ledger(own: "stage-a")
        let mine = try ledger.make(.block(Self.mallory), on: true, by: "cli:root", bridge: "stage-a", now: Self.now, author: Self.operatorKey)
        let acknowledged = ledger.acknowledged(mine.id)
        #expect(acknowledged)
        let theirs = try Self.event(.block(Self.steward), on: true, at: Int64(Self.now))  // made on stage-a too, from the relay
        let other = try SiteRecord.event(target: .staff(Self.steward), on: true, by: "session:ben", bridge: "stage-b",
                                         createdAt: Int64(Self.now), key: Self.key, author: Self.operatorKey)
        ledger.offer(theirs)
        ledger.offer(other)
        ledger.relaysReturned()
        let due = ledger.due(now: Self.now)
        #expect(Set(due.map(\.id)) == [mine.id, theirs.id], "stage-a's records, not stage-b's")
        // Replaced by another stage's record, it is no longer this stage's to keep.
        ledger.offer(try SiteRecord.event(target: .block(Self.mallory), on: false, by: "session:ben", bridge: "stage-b",
                                          createdAt: Int64(Self.now) + 5, key: Self.key, author: Self.operatorKey))
        _ = ledger.acknowledged(mine.id)
        _ = ledger.acknowledged(theirs.id)
        ledger.relaysReturned()
        let again = ledger.due(now: Self.now + 1)
        #expect(again.map(\.id) == [theirs.id])
    }

    @Test("the store keeps one row per target with its acknowledgement, and reads them back verified")
    func store() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        let store = try SiteRecordStore(database: database)
        let first = try Self.event(.block(Self.mallory), on: true, at: 100)
        let second = try Self.event(.block(Self.mallory), on: false, at: 101)
        let word = try Self.event(try .word(term: "spam"), on: true, at: 102)
        try store.keep(first, acknowledged: true)
        try store.keep(second, acknowledged: false)
        try store.keep(word, acknowledged: false)
        try store.acknowledged(word.id)
        let rows = try store.records()
        #expect(rows.map(\.event.id) == [second.id, word.id], "the newer record replaced its target's row")
        #expect(rows.map(\.acknowledged) == [false, true])
    }

    @Test("the denylist overlay: a removed word goes, a site word is added once, regular expressions stay")
    func denylistOverlay() throws {
        var ledger = Self.ledger()
        ledger.offer(try Self.event(try .word(term: "Tickets"), on: false, at: 10))
        ledger.offer(try Self.event(try .word(term: "giveaway"), on: true, at: 10))
        let local = try Denylist([.keyword("TICKETS"), .regex("^buy"), .keyword("GIVEAWAY")])
        let (merged, dropped) = local.overlaying(ledger.words)
        #expect(merged.entries == [.regex("^buy"), .keyword("GIVEAWAY")] && dropped == 0)
        let (fromEmpty, _) = Denylist.empty.overlaying(ledger.words)
        #expect(fromEmpty.entries == [.keyword("giveaway")])
    }
}
