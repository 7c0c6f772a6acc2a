import IdentityCache
import Testing
import Identity
import BotSupport

/// One suite, both stores: every `IdentityStore` must behave identically.
@Suite("IdentityStore conformance")
struct IdentityStoreConformanceTests {
    private func meshRecord(_ index: Int, peerID: UInt64? = nil, nickname: String? = nil, stamp: UTCDay? = day(0)) throws -> IdentityRecord {
        IdentityRecord(
            key: try meshKey(index),
            pins: try MeshPins(noiseKey: bytes32(index, salt: 0x4d), signingKey: bytes32(index, salt: 0x53)),
            peerID: peerID ?? UInt64(0x1000_0000 + index), nickname: nickname ?? "m\(index)", firstSeen: at(0, ms: Int64(index)),
            lastSeen: stamp)
    }

    @Test(arguments: StoreKind.allCases)
    func putThenReadBackEveryField(kind: StoreKind) throws {
        let store = try kind.make()
        var record = try meshRecord(1)
        record.annotations = Annotations(allowed: true, verified: true, blocked: true, trust: .trusted, petname: "Pat", notes: "n ✓")
        try store.put(record)
        #expect(try store.record(record.key) == record)
        let nostr = IdentityRecord(key: try nostrKey(1), nickname: "nick", firstSeen: at(1), lastSeen: nil)
        try store.put(nostr)
        #expect(try store.record(nostr.key) == nostr)
        #expect(try store.record(try nostrKey(2)) == nil)
        #expect(try store.count() == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func meshAndNostrKeysWithTheSameBytesAreDistinct(kind: StoreKind) throws {
        let store = try kind.make()
        let bytes = bytes32(7, salt: 1)
        try store.put(IdentityRecord(key: try IdentityKey(kind: .mesh, bytes: bytes), nickname: "a", firstSeen: at(0)))
        try store.put(IdentityRecord(key: try IdentityKey(kind: .nostr, bytes: bytes), nickname: "b", firstSeen: at(0)))
        #expect(try store.count() == 2)
        #expect(try store.record(try IdentityKey(kind: .nostr, bytes: bytes))?.nickname == "b")
    }

    @Test(arguments: StoreKind.allCases)
    func signingKeyByPeerID(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1))
        #expect(try store.signingKey(peerID: 0x1000_0001) == bytes32(1, salt: 0x53))
        #expect(try store.signingKey(peerID: 0x1000_0002) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aPeerIDMapsToOneIdentityTheNewestAnnouncer(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1, peerID: 42))
        try store.put(try meshRecord(2, peerID: 42))
        #expect(try store.signingKey(peerID: 42) == bytes32(2, salt: 0x53))
        #expect(try store.record(try meshKey(1))?.peerID == nil)
        #expect(try store.record(try meshKey(1))?.pins != nil)
        // Re-putting the holder itself keeps its mapping.
        try store.put(try meshRecord(2, peerID: 42))
        #expect(try store.signingKey(peerID: 42) == bytes32(2, salt: 0x53))
    }

    @Test(arguments: StoreKind.allCases)
    func nicknameIndexFollowsRewritesAndDeletes(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1, nickname: "alice"))
        try store.put(try meshRecord(2, nickname: "alice"))
        try store.put(IdentityRecord(key: try nostrKey(3), nickname: "alice", firstSeen: at(0)))
        #expect(try store.keys(nickname: "alice", limit: 10).count == 3)
        #expect(try store.keys(nickname: "alice", limit: 2).count == 2)
        try store.put(try meshRecord(1, nickname: "bob"))
        #expect(try Set(store.keys(nickname: "alice", limit: 10)) == [try meshKey(2), try nostrKey(3)])
        #expect(try store.keys(nickname: "bob", limit: 10) == [try meshKey(1)])
        try store.delete([try meshKey(2)])
        #expect(try store.keys(nickname: "alice", limit: 10) == [try nostrKey(3)])
    }

    /// `identities block nostr:834c59a1` (issue 23 finding 5): the prefix a table shows finds its key.
    @Test(arguments: StoreKind.allCases)
    func keysByHexPrefix(kind: StoreKind) throws {
        let store = try kind.make()
        let keys = try (1...6).map { try meshKey($0) }
        for (index, key) in keys.enumerated() { try store.put(IdentityRecord(key: key, nickname: "m\(index)", firstSeen: at(0))) }
        try store.put(IdentityRecord(key: try nostrKey(1), nickname: "n", firstSeen: at(0)))
        for key in keys {
            let hex = Hex.encode(key.bytes)
            for length in [8, 9, 16, 64] {
                #expect(try store.keys(hexPrefix: String(hex.prefix(length)), kind: .mesh, limit: 10) == [key], "\(length)")
            }
            #expect(try store.keys(hexPrefix: String(hex.prefix(8)), kind: .nostr, limit: 10).isEmpty)
        }
        // A one-character prefix covers a sixteenth of the space: the keys that start with it, in key order.
        let first = String(Hex.encode(keys[0].bytes).prefix(1))
        let expected = keys.filter { Hex.encode($0.bytes).hasPrefix(first) }.sorted()
        #expect(try store.keys(hexPrefix: first, kind: .mesh, limit: 10) == expected)
        #expect(try store.keys(hexPrefix: "", kind: .mesh, limit: 2).count == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func deleteRemovesPinsPeerMappingAndNickname(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1, nickname: "zed"))
        #expect(try store.delete([try meshKey(1), try meshKey(9)]) == 1)
        #expect(try store.record(try meshKey(1)) == nil)
        #expect(try store.signingKey(peerID: 0x1000_0001) == nil)
        #expect(try store.keys(nickname: "zed", limit: 10).isEmpty)
        #expect(try store.count() == 0)
    }

    /// A cap pass deletes hundreds of keys at once: both kinds mixed, repeated and missing keys, more than one batch
    /// of the SQLite store's multi-key statement plus a remainder.
    @Test(arguments: StoreKind.allCases)
    func deletingManyKeysRemovesExactlyThoseRows(kind: StoreKind) throws {
        let store = try kind.make()
        for i in 0..<300 { try store.put(try meshRecord(i)) }
        for i in 0..<100 { try store.put(IdentityRecord(key: try nostrKey(i), nickname: "n\(i)", firstSeen: at(0), lastSeen: day(0))) }
        let meshVictims = try (0..<300).filter { $0 % 2 == 0 }.map(meshKey)
        let nostrVictims = try (0..<100).filter { $0 % 3 == 0 }.map(nostrKey)
        let missing = try (1_000..<1_070).map(meshKey)
        let keys = meshVictims + nostrVictims + missing + Array(meshVictims.prefix(70))
        #expect(try store.delete(keys.shuffled()) == meshVictims.count + nostrVictims.count)
        #expect(try store.count() == 400 - meshVictims.count - nostrVictims.count)
        for i in 0..<300 {
            let kept = i % 2 != 0
            #expect(try (store.record(try meshKey(i)) != nil) == kept)
            #expect(try (store.signingKey(peerID: UInt64(0x1000_0000 + i)) != nil) == kept)
            #expect(try store.keys(nickname: "m\(i)", limit: 2) == (kept ? [try meshKey(i)] : []))
        }
        for i in 0..<100 {
            #expect(try (store.record(try nostrKey(i)) != nil) == (i % 3 != 0))
        }
        #expect(try store.strangerRows(stampedAtOrBefore: nil).count == store.count())
    }

    @Test(arguments: StoreKind.allCases)
    func strangerQueriesSeeOnlyUnannotatedRows(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1, stamp: day(0)))
        try store.put(try meshRecord(2, stamp: day(5)))
        try store.put(try meshRecord(3, stamp: nil))
        var protected = try meshRecord(4, stamp: nil)
        protected.annotations.notes = "x"
        try store.put(protected)
        #expect(try store.strangerCount() == 3)
        #expect(try store.count() == 4)
        #expect(try Set(store.strangerRows(stampedAtOrBefore: nil).map(\.key)) == [try meshKey(1), try meshKey(2), try meshKey(3)])
        #expect(try store.strangerRows(stampedAtOrBefore: day(4)).map(\.key) == [try meshKey(1)])
        #expect(try store.strangerRows(stampedAtOrBefore: day(5)).count == 2)
        #expect(try store.unstampedStrangerKeys() == [try meshKey(3)])
        try store.setLastSeen(day(9), keys: [try meshKey(3), try meshKey(99)])
        #expect(try store.unstampedStrangerKeys().isEmpty)
        #expect(try store.record(try meshKey(3))?.lastSeen == day(9))
    }

    @Test(arguments: StoreKind.allCases)
    func listingPagesInKeyOrder(kind: StoreKind) throws {
        let store = try kind.make()
        for i in 0..<5 { try store.put(try meshRecord(i)) }
        var annotated = IdentityRecord(key: try nostrKey(1), firstSeen: at(0))
        annotated.annotations.blocked = true
        try store.put(annotated)
        let first = try store.records(.all, limit: 4, after: nil)
        #expect(first.count == 4)
        let rest = try store.records(.all, limit: 4, after: first.last?.key)
        #expect(rest.count == 2)
        #expect((first + rest).map(\.key) == (first + rest).map(\.key).sorted())
        #expect(try store.records(.annotated, limit: 10, after: nil).map(\.key) == [try nostrKey(1)])
        #expect(try store.records(.strangers, limit: 10, after: nil).count == 5)
    }

    @Test(arguments: StoreKind.allCases)
    func aFailedTransactionLeavesNothing(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(try meshRecord(1))
        #expect(throws: IdentityStoreError.self) {
            try store.transaction { () throws(IdentityStoreError) in
                try store.put(try! meshRecord(2))
                try store.delete([try! meshKey(1)])
                throw IdentityStoreError.corruptRow("test abort")
            }
        }
        #expect(try store.count() == 1)
        #expect(try store.record(try meshKey(1)) != nil)
        #expect(try store.signingKey(peerID: 0x1000_0002) == nil)
    }
}
