import BotStorage
import Bridge
import Foundation
import Testing
import BridgeCore

@Suite("Loop rules")
struct LoopGuardTests {
    typealias Guard = LoopGuard<Int, String>

    @Test("rule 1: an event heard as a mesh broadcast is never published or rebroadcast")
    func rule1() {
        var loop = Guard(ownKeys: ["me"])
        loop.recordLearnedFromMesh(1)
        #expect(!loop.mayPublish(1, signer: "alice"))
        #expect(!loop.mayRebroadcast(1, signer: "alice", radioStableID: nil))
        #expect(loop.mayPublish(2, signer: "alice"))
    }

    @Test("rule 2: what we published is never rebroadcast, nor published twice")
    func rule2() {
        var loop = Guard(ownKeys: [])
        loop.recordPublished(1)
        #expect(!loop.mayRebroadcast(1, signer: "alice", radioStableID: nil))
        #expect(!loop.mayPublish(1, signer: "alice"))
    }

    @Test("rule 3: at most one rebroadcast, none when the radio copy is on the island")
    func rule3() {
        var loop = Guard(ownKeys: [])
        #expect(loop.mayRebroadcast(1, signer: "a", radioStableID: "s1"))
        loop.recordRebroadcast(1)
        #expect(!loop.mayRebroadcast(1, signer: "a", radioStableID: "s1"))
        loop.recordRadioCopy(stableID: "s2")
        #expect(!loop.mayRebroadcast(2, signer: "a", radioStableID: "s2"))
        #expect(loop.mayRebroadcast(2, signer: "a", radioStableID: nil))
    }

    @Test("rule 4: own keys are never published or rebroadcast")
    func rule4() {
        let loop = Guard(ownKeys: ["me"])
        #expect(!loop.mayPublish(9, signer: "me") && !loop.mayRebroadcast(9, signer: "me", radioStableID: nil))
        #expect(loop.isOwnKey("me"))
    }

    @Test("sets are bounded at 512 ids (oldest forgotten)")
    func bounded() {
        var loop = Guard(ownKeys: [])
        for i in 0...512 { loop.recordRebroadcast(i) }
        #expect(!loop.wasRebroadcast(0) && loop.wasRebroadcast(1) && loop.wasRebroadcast(512))
    }

    @Test("recent ids survive reopening the database, newest kept within the row bound")
    func persisted() throws {
        let path = NSTemporaryDirectory() + "recent-\(UUID().uuidString).sqlite3"
        do {
            let store = try RecentEventStore(database: SQLiteDatabase(path: path))
            try store.record([1, 2, 3], as: .published)
            try store.record([4, 5, 6], as: .rebroadcast)
            try store.record([1, 2, 3], as: .published)
        }
        let reopened = try RecentEventStore(database: SQLiteDatabase(path: path))
        #expect(try reopened.load(.published, limit: 10) == [[1, 2, 3]])
        #expect(try reopened.load(.rebroadcast, limit: 10) == [[4, 5, 6]])
        for i in 0..<(RecentEventStore.Limits.maxRows + 300) {
            try reopened.record([UInt8(i & 0xff), UInt8(i >> 8)], as: .rebroadcast)
        }
        let kept = try reopened.load(.rebroadcast, limit: 100_000)
        #expect(kept.count <= RecentEventStore.Limits.maxRows + 256)
        #expect(kept.last == [UInt8((RecentEventStore.Limits.maxRows + 299) & 0xff), UInt8((RecentEventStore.Limits.maxRows + 299) >> 8)])
    }
}
