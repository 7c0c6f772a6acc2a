import BotCrypto
import BotSupport
import Bridge
import Foundation
import IdentityCache
import Nostr
import Testing
import Identity
import BridgeCore

@Suite("Fleet list (NIP-51 set of the operators): parsing, newest wins, merging, kept file")
struct FleetListTests {
    let site = "u4pruy"
    let operatorKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
    let strangerKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 10, count: 32))
    let blockedAuthor = try! IdentityKey.nostr(pubkey: [UInt8](repeating: 0x11, count: 32))
    let blockedPeer = try! IdentityKey(kind: .mesh, bytes: [UInt8](repeating: 0x22, count: 32))

    func event(_ key: SchnorrSecretKey, at createdAt: Int64, tags: [[String]], kind: Int = FleetList.kind) throws -> NostrEvent {
        try UnsignedEvent(pubkey: key.publicKey, createdAt: createdAt, kind: kind, tags: tags, content: "")
            .signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
    }

    @Test("p, mesh and word tags are read; unknown tags ignored; tags round-trip")
    func parses() throws {
        let tags = [["d", site], ["p", blockedAuthor.hex], ["mesh", blockedPeer.hex], ["word", "Free BTC"],
                    ["word", "free btc"], ["t", "ignored"]]
        let list = try FleetList(event: try event(operatorKey, at: 100, tags: tags), site: site, operators: [operatorKey.publicKey])
        #expect(list.blocked == [blockedAuthor, blockedPeer])
        #expect(list.words == ["Free BTC"], "repeats (case-insensitive) kept once")
        #expect(list.createdAt == 100)
        #expect(list.tags == [["d", site], ["p", blockedAuthor.hex], ["mesh", blockedPeer.hex], ["word", "Free BTC"]])
    }

    @Test("wrong author, other site, no d, bad tags, too many entries are refused by name")
    func refuses() throws {
        let ops: Set = [operatorKey.publicKey]
        #expect(throws: FleetListError.notOperator(strangerKey.publicKey.hex)) {
            try FleetList(event: try event(strangerKey, at: 1, tags: [["d", site]]), site: site, operators: ops)
        }
        #expect(throws: FleetListError.otherSite("elsewhere")) {
            try FleetList(event: try event(operatorKey, at: 1, tags: [["d", "elsewhere"]]), site: site, operators: ops)
        }
        #expect(throws: FleetListError.noSite) {
            try FleetList(event: try event(operatorKey, at: 1, tags: [["p", blockedAuthor.hex]]), site: site, operators: ops)
        }
        #expect(throws: FleetListError.wrongKind(10000)) {
            try FleetList(event: try event(operatorKey, at: 1, tags: [["d", site]], kind: 10000), site: site, operators: ops)
        }
        #expect(throws: FleetListError.badTag(index: 1, reason: "mesh value is not 64 hex characters")) {
            try FleetList(event: try event(operatorKey, at: 1, tags: [["d", site], ["mesh", "abc"]]), site: site, operators: ops)
        }
        let many = [["d", site]] + (0...FleetList.Limits.maxEntries).map { ["word", "w\($0)"] }
        #expect(throws: FleetListError.tooManyEntries(limit: FleetList.Limits.maxEntries)) {
            try FleetList(event: try event(operatorKey, at: 1, tags: many), site: site, operators: ops)
        }
    }

    @Test("the newest list of an operator key is in force; older, foreign and other-site lists are counted and ignored")
    func newestWins() throws {
        var state = FleetListState(site: site, operators: [operatorKey.publicKey])
        let first = try event(operatorKey, at: 100, tags: [["d", site], ["p", blockedAuthor.hex]])
        let second = try event(operatorKey, at: 200, tags: [["d", site], ["mesh", blockedPeer.hex]])
        #expect(state.offer(first) == .applied)
        #expect(state.offer(second) == .applied)
        #expect(state.offer(first) == .older, "relays replay older lists after a reconnect")
        #expect(state.offer(second) == .older)
        #expect(state.offer(try event(strangerKey, at: 300, tags: [["d", site], ["p", blockedPeer.hex]])) == .ignoredAuthor)
        #expect(state.offer(try event(operatorKey, at: 300, tags: [["d", "other"]])) == .otherSite)
        #expect(state.offer(try event(operatorKey, at: 300, tags: [["d", site], ["p", "zz"]])) == .invalid)
        #expect(state.current?.blocked == [blockedPeer], "an unblock (the key gone from the newer list) applies")
        #expect(state.currentEvent == second)
        #expect(state.outcomes[.applied] == 2 && state.outcomes[.older] == 2 && state.outcomes[.ignoredAuthor] == 1)
        #expect(state.outcomes[.otherSite] == 1 && state.outcomes[.invalid] == 1)
    }

    @Test("equal created_at: the lower event id wins (NIP-01), whatever the order seen")
    func tieBreak() throws {
        let a = try event(operatorKey, at: 500, tags: [["d", site], ["word", "a"]])
        let b = try event(operatorKey, at: 500, tags: [["d", site], ["word", "b"]])
        let low = a.id.hex < b.id.hex ? a : b
        for order in [[a, b], [b, a]] {
            var state = FleetListState(site: site, operators: [operatorKey.publicKey])
            for e in order { state.offer(e) }
            #expect(state.currentEvent == low)
        }
    }

    @Test("read-modify-write: block and unblock change only that key; created_at passes the list replaced")
    func publishes() throws {
        let list = FleetList(site: site, blocked: [blockedPeer], words: ["spam"], createdAt: 1_000)
        let next = try list.applying(.block(blockedAuthor))
        #expect(next.blocked == [blockedAuthor, blockedPeer] && next.words == ["spam"])
        #expect(try next.applying(.unblock(blockedPeer)).blocked == [blockedAuthor])
        let behind = next.unsignedEvent(author: operatorKey.publicKey, now: 900, replacing: list.createdAt)
        #expect(behind.createdAt == 1_001, "a clock behind the newest list still publishes a newer one")
        #expect(next.unsignedEvent(author: operatorKey.publicKey, now: 5_000, replacing: 1_000).createdAt == 5_000)
        let signed = try behind.signed(with: operatorKey)
        let reread = try FleetList(event: signed, site: site, operators: [operatorKey.publicKey])
        #expect(reread.blocked == next.blocked && reread.words == next.words)
        let full = FleetList(site: site, blocked: [], words: (0..<FleetList.Limits.maxEntries).map { "w\($0)" })
        #expect(throws: FleetListError.tooManyEntries(limit: FleetList.Limits.maxEntries)) { try full.applying(.block(blockedAuthor)) }
    }

    @Test("the judge's lists: local ∪ fleet blocks; console denylist then fleet words not already keywords")
    func merges() throws {
        let local: Set = [try IdentityKey.nostr(pubkey: [UInt8](repeating: 0x33, count: 32))]
        let fleet = FleetList(site: site, blocked: [blockedAuthor], words: ["SPAM", "giveaway"])
        #expect(FleetList.mergedBlocks(local: local, fleet: fleet) == local.union([blockedAuthor]))
        #expect(FleetList.mergedBlocks(local: local, fleet: nil) == local)
        let console = try Denylist([.keyword("spam"), .regex("t\\.me/")])
        let merged = FleetList.mergedDenylist(local: console, fleet: fleet)
        #expect(merged.denylist.entries == [.keyword("spam"), .regex("t\\.me/"), .keyword("giveaway")])
        #expect(merged.dropped == 0)
        #expect(merged.denylist.match("GIVEAWAY now") == .keyword("giveaway"))
        let crowded = try Denylist((0..<Denylist.Limits.maxEntries).map { .keyword("k\($0)") })
        #expect(FleetList.mergedDenylist(local: crowded, fleet: fleet).dropped == 2)
    }

    @Test("operator keys: hex (either case) or npub; anything else named")
    func operatorKeys() throws {
        let key = operatorKey.publicKey
        #expect(try OperatorKeys.parse(key.hex) == key)
        #expect(try OperatorKeys.parse(key.hex.uppercased()) == key)
        #expect(try OperatorKeys.parse(NIP19.npub(key)) == key)
        #expect(throws: OperatorKeyError.notAKey("npub1xyz")) { try OperatorKeys.parse("npub1xyz") }
        #expect(throws: OperatorKeyError.notAKey("1234")) { try OperatorKeys.parse("1234") }
    }

    @Test("the kept list: saved 0600, verified when loaded; a tampered file is refused")
    func keptFile() throws {
        let dir = NSTemporaryDirectory() + "fleet-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try FleetListFile.load(dataDirectory: dir) == nil)
        let kept = try event(operatorKey, at: 100, tags: [["d", site], ["p", blockedAuthor.hex]])
        try FleetListFile.save(kept, dataDirectory: dir)
        #expect(try FileIO.permissions(FleetListFile.path(dataDirectory: dir)) & 0o777 == 0o600)
        #expect(try FleetListFile.load(dataDirectory: dir) == kept)
        let tampered = kept.json.replacingOccurrences(of: blockedAuthor.hex, with: blockedPeer.hex)
        try FileIO.writeAtomically(Array(tampered.utf8), to: FleetListFile.path(dataDirectory: dir))
        do {
            _ = try FleetListFile.load(dataDirectory: dir)
            Issue.record("a tampered list loaded")
        } catch {
            guard case .badSignature = error else { Issue.record("\(error)"); return }
        }
    }
}
