import IdentityCache
import Testing
import Identity

/// STRANGER-CACHE §3, driven through `PeerIdentityCache` on both stores with injected days.
@Suite("Retention rules")
struct RetentionTests {
    /// Sightings of a filler identity, one per day from `from` through `through`, so a pass runs every day.
    private func dailyPasses(_ cache: PeerIdentityCache, from: Int, through: Int, filler: Int = 999_999) throws {
        guard from <= through else { return }
        for d in from...through { _ = try cache.recordSighting(try nostrSighting(filler), now: at(d)) }
    }

    @Test(arguments: StoreKind.allCases)
    func keptAt36And37DaysForgottenAt38(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1), now: at(0))
        #expect(try store.record(try meshKey(1))?.lastSeen == day(0))
        try dailyPasses(cache, from: 1, through: 36)
        #expect(try store.record(try meshKey(1)) != nil)
        try dailyPasses(cache, from: 37, through: 37)
        #expect(try store.record(try meshKey(1)) != nil, "kept at 37 days")
        try dailyPasses(cache, from: 38, through: 38)
        #expect(try store.record(try meshKey(1)) == nil, "forgotten at 38 days")
    }

    @Test func ageRuleBoundariesAsPureFunctions() {
        #expect(!RetentionRules.isExpired(stamp: day(0), on: day(37)))
        #expect(RetentionRules.isExpired(stamp: day(0), on: day(38)))
        #expect(!RetentionRules.mayForgetByAge(stamp: day(0), today: day(37), previousPass: day(36)))
        #expect(RetentionRules.mayForgetByAge(stamp: day(0), today: day(38), previousPass: day(37)))
        // Two-day agreement: the previous pass must already have found the stamp expiring.
        #expect(!RetentionRules.mayForgetByAge(stamp: day(0), today: day(38), previousPass: day(35)))
        #expect(!RetentionRules.mayForgetByAge(stamp: day(0), today: day(100), previousPass: nil))
        #expect(!RetentionRules.mayForgetByAge(stamp: day(0), today: day(100), previousPass: day(100)))
        #expect(RetentionRules.forgetCutoff(today: day(38), previousPass: day(37)) == day(0))
    }

    @Test(arguments: StoreKind.allCases)
    func weeklyRestampAndStampsNeverMoveBack(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        let key = try meshKey(1)
        #expect(try cache.recordSighting(try meshSighting(1), now: at(0)).result == .firstContact)
        #expect(try cache.recordSighting(try meshSighting(1), now: at(6)).result == .unchanged)
        #expect(try store.record(key)?.lastSeen == day(0), "6 days: no rewrite")
        #expect(try cache.recordSighting(try meshSighting(1), now: at(7)).result == .refreshed)
        #expect(try store.record(key)?.lastSeen == day(7), "7 days: restamped")
        _ = try cache.recordSighting(try meshSighting(1), now: at(2))
        #expect(try store.record(key)?.lastSeen == day(7), "a clock that went back never moves the stamp back")
    }

    @Test(arguments: StoreKind.allCases)
    func everyRelationshipProtects(kind: StoreKind) throws {
        let changes: [(String, (inout Annotations) -> Void)] = [
            ("allowed", { $0.allowed = true }), ("verified", { $0.verified = true }), ("blocked", { $0.blocked = true }),
            ("petname", { $0.petname = "P" }), ("notes", { $0.notes = "N" }), ("casual", { $0.trust = .casual }),
            ("trusted", { $0.trust = .trusted }), ("trust verified", { $0.trust = .verified }),
        ]
        let (cache, store) = try makeCache(kind)
        for (index, change) in changes.enumerated() {
            _ = try cache.recordSighting(try meshSighting(index), now: at(0))
            try cache.annotate(try meshKey(index), change.1)
            #expect(try store.record(try meshKey(index))?.lastSeen == nil, "\(change.0): protected rows carry no stamp")
        }
        _ = try cache.recordSighting(try meshSighting(100), now: at(0))
        // Policy-file lists protect too.
        _ = try cache.recordSighting(try nostrSighting(200), now: at(0))
        _ = try cache.recordSighting(try nostrSighting(201), now: at(0))
        _ = try cache.recordSighting(try nostrSighting(202), now: at(0))
        cache.setOperatorLists(OperatorLists(allowed: [try nostrKey(200)], verified: [try nostrKey(201)], blocked: [try nostrKey(202)]))
        try dailyPasses(cache, from: 1, through: 120)
        for (index, change) in changes.enumerated() {
            #expect(try store.record(try meshKey(index)) != nil, "\(change.0) protects")
        }
        for index in 200...202 { #expect(try store.record(try nostrKey(index)) != nil, "policy list protects") }
        #expect(try store.record(try meshKey(100)) == nil, "a plain stranger is forgotten")
    }

    /// Staff and the block list in one pass (issue 23): the policy file's lists and the rows the CLI marked.
    @Test(arguments: StoreKind.allCases)
    func operatorMarksJoinThePolicyFileAndTheRows(kind: StoreKind) throws {
        let (cache, _) = try makeCache(kind, lists: OperatorLists(allowed: [try nostrKey(1)], verified: [try nostrKey(2)], blocked: [try nostrKey(3)]))
        try cache.annotate(try meshKey(4)) { $0.allowed = true }
        try cache.annotate(try meshKey(5)) { $0.blocked = true }
        try cache.annotate(try meshKey(6)) { $0.verified = true }
        let marks = try cache.operatorMarks()
        #expect(marks.allowed == [try nostrKey(1), try meshKey(4)])
        #expect(marks.blocked == [try nostrKey(3), try meshKey(5)])
        #expect(try cache.blockedKeys() == marks.blocked)
    }

    @Test(arguments: StoreKind.allCases)
    func unverifyLeavesCasualAndStaysProtected(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1), now: at(0))
        try cache.annotate(try meshKey(1)) {
            $0.verified = true
            $0.trust = .verified
        }
        try cache.annotate(try meshKey(1)) {
            $0.verified = false
            $0.trust = .casual
        }
        #expect(try store.record(try meshKey(1))?.annotations.trust == .casual)
        try dailyPasses(cache, from: 1, through: 100)
        #expect(try store.record(try meshKey(1)) != nil)
    }

    @Test(arguments: StoreKind.allCases)
    func lapsedProtectionGetsAFullPeriod(kind: StoreKind) throws {
        // A favorite unfavorited after 100 days unseen is stamped at the next pass and kept 37 days from then.
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1), now: at(0))
        try cache.annotate(try meshKey(1)) { $0.allowed = true }
        try dailyPasses(cache, from: 1, through: 100)
        try cache.annotate(try meshKey(1)) { $0.allowed = false }
        #expect(try store.record(try meshKey(1))?.lastSeen == nil)
        try dailyPasses(cache, from: 101, through: 101)
        #expect(try store.record(try meshKey(1))?.lastSeen == day(101))
        try dailyPasses(cache, from: 102, through: 138)
        #expect(try store.record(try meshKey(1)) != nil, "kept 37 days after the stamp")
        try dailyPasses(cache, from: 139, through: 139)
        #expect(try store.record(try meshKey(1)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func legacyUnstampedRowsGetAFullPeriod(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        // Written before stamps existed (or by an older build): no stamp, first seen long ago.
        try store.put(IdentityRecord(key: try nostrKey(1), nickname: "old", firstSeen: at(-400), lastSeen: nil))
        try dailyPasses(cache, from: 0, through: 37)
        #expect(try store.record(try nostrKey(1))?.lastSeen == day(0))
        try dailyPasses(cache, from: 38, through: 38)
        #expect(try store.record(try nostrKey(1)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func noPassBeforeThePolicyIsReadable(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind, lists: nil)
        try store.put(IdentityRecord(key: try nostrKey(1), firstSeen: at(-100), lastSeen: day(-100)))
        try store.put(IdentityRecord(key: try nostrKey(2), firstSeen: at(-100), lastSeen: nil))
        for d in 0...60 {
            let outcome = try cache.recordSighting(try nostrSighting(9), now: at(d))
            #expect(outcome.pass == nil)
        }
        #expect(cache.counters.passesHeldForPolicy > 0)
        #expect(try store.record(try nostrKey(1)) != nil)
        #expect(try store.record(try nostrKey(2))?.lastSeen == nil, "not even stamped")
        cache.setOperatorLists(.empty)
        #expect(try cache.recordSighting(try nostrSighting(9), now: at(61)).pass?.reason == .firstAfterStart)
        // And the policy going unreadable again stops passes.
        cache.setOperatorLists(nil)
        #expect(try cache.recordSighting(try nostrSighting(9), now: at(62)).pass == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func passCadence(kind: StoreKind) throws {
        let (cache, _) = try makeCache(kind)
        #expect(try cache.recordSighting(try nostrSighting(1), now: at(0)).pass?.reason == .firstAfterStart)
        #expect(try cache.recordSighting(try nostrSighting(2), now: at(0, ms: 80_000_000)).pass == nil)
        #expect(try cache.recordSighting(try nostrSighting(1), now: at(1)).pass?.reason == .daily)
        #expect(try cache.recordSighting(try nostrSighting(3), now: at(1)).pass == nil)
        #expect(cache.counters.passes == 2)
    }

    @Test(arguments: StoreKind.allCases)
    func afterARestartAgeRemovalsWaitForASecondDay(kind: StoreKind) throws {
        let store = try kind.make()
        try store.put(IdentityRecord(key: try nostrKey(1), firstSeen: at(-100), lastSeen: day(-100)))
        let cache = PeerIdentityCache(store: store, logger: quietLogger)
        cache.setOperatorLists(.empty)
        let first = try cache.recordSighting(try nostrSighting(9), now: at(0))
        #expect(first.pass?.forgottenByAge == 0)
        #expect(try store.record(try nostrKey(1)) != nil)
        let second = try cache.recordSighting(try nostrSighting(9), now: at(1))
        #expect(second.pass?.forgottenByAge == 1, "forgotten one pass after the absence")
        #expect(try store.record(try nostrKey(1)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aGapOfMoreThanTwoDaysHoldsRemovalsBackOnePass(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try nostrSighting(1), now: at(0))
        try dailyPasses(cache, from: 1, through: 35)
        try dailyPasses(cache, from: 40, through: 40)
        #expect(try store.record(try nostrKey(1)) != nil, "the pass on day 35 did not find it expiring")
        try dailyPasses(cache, from: 41, through: 41)
        #expect(try store.record(try nostrKey(1)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aSingleClockJumpForwardForgetsNothing(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try nostrSighting(1), now: at(0))
        try dailyPasses(cache, from: 1, through: 10)
        // One wrong reading, 300 days ahead.
        let jump = try cache.recordSighting(try nostrSighting(999_999), now: at(310))
        #expect(jump.pass != nil)
        #expect(jump.pass?.forgottenByAge == 0)
        #expect(try store.record(try nostrKey(1)) != nil)
        // Back to the right time: the pass after the wrong one forgets nothing either.
        try dailyPasses(cache, from: 11, through: 11)
        #expect(try store.record(try nostrKey(1)) != nil)
        #expect(try store.record(try nostrKey(1))?.lastSeen == day(0))
        // A clock that stays wrong across two days ages strangers by its error.
        try dailyPasses(cache, from: 311, through: 312)
        #expect(try store.record(try nostrKey(1)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func aClockStepBackForgetsNothingAndKeepsStamps(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try nostrSighting(1), now: at(50))
        try dailyPasses(cache, from: 51, through: 60)
        let back = try cache.recordSighting(try nostrSighting(1), now: at(5))
        #expect(back.pass?.forgottenByAge == 0)
        #expect(try store.record(try nostrKey(1))?.lastSeen == day(50))
        try dailyPasses(cache, from: 6, through: 20)
        #expect(try store.record(try nostrKey(1)) != nil)
    }

    @Test(arguments: StoreKind.allCases)
    func evictionForgetsPinsPeerMappingAndNickname(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1, nickname: "carol"), now: at(0))
        #expect(try cache.signingKey(peerID: 0x1000_0001) == bytes32(1, salt: 0x53))
        try dailyPasses(cache, from: 1, through: 38)
        #expect(try cache.record(try meshKey(1)) == nil)
        #expect(try cache.signingKey(peerID: 0x1000_0001) == nil)
        #expect(try store.keys(nickname: "carol", limit: 5).isEmpty)
        // TOFU again: the next announce is first contact, even with another signing key.
        #expect(try cache.recordSighting(try meshSighting(1, signingSalt: 0x77), now: at(39)).result == .firstContact)
    }

    @Test(arguments: StoreKind.allCases)
    func pinRefusalsAreCountedOnTheRecordAndRefreshNothing(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1, nickname: "a"), now: at(0))
        let before = try #require(try store.record(try meshKey(1)))
        #expect(try cache.recordPinRefusal(noiseKey: bytes32(1, salt: 0x4d), now: at(9)) == 1)
        // A refused sighting through the cache itself counts on the same record.
        #expect(try cache.recordSighting(try meshSighting(1, signingSalt: 0x66, nickname: "evil"), now: at(9, ms: 5)).result == .rejectedPinMismatch)
        let after = try #require(try store.record(try meshKey(1)))
        #expect(after.pinRefusals == 2 && after.lastPinRefusal == at(9, ms: 5))
        #expect(after.lastSeen == before.lastSeen && after.nickname == "a" && after.pins == before.pins)
        #expect(cache.counters.rejectedPinMismatches == 2)
        // No pin held: counted, nothing written.
        #expect(try cache.recordPinRefusal(noiseKey: bytes32(2, salt: 0x4d), now: at(9)) == nil)
        #expect(try store.record(try meshKey(2)) == nil && cache.counters.rejectedPinMismatches == 3)
    }

    @Test(arguments: StoreKind.allCases)
    func pinnedMeshRecordsListsEveryMeshPinAcrossPages(kind: StoreKind) throws {
        let (cache, _) = try makeCache(kind)
        let count = PeerIdentityCache.Limits.pinPage + 5
        for i in 0..<count { _ = try cache.recordSighting(try meshSighting(i), now: at(0, ms: Int64(i))) }
        _ = try cache.recordSighting(try nostrSighting(1), now: at(0))
        try cache.annotate(try meshKey(count + 1)) { $0.blocked = true }  // annotated, never seen: no pins
        let pinned = try cache.pinnedMeshRecords()
        #expect(pinned.count == count)
        #expect(Set(pinned.compactMap { $0.pins?.noiseKey }) == Set((0..<count).map { bytes32($0, salt: 0x4d) }))
    }

    @Test(arguments: StoreKind.allCases)
    func aDifferentSigningKeyIsRefusedAndRefreshesNothing(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        _ = try cache.recordSighting(try meshSighting(1, nickname: "a"), now: at(0))
        let outcome = try cache.recordSighting(try meshSighting(1, signingSalt: 0x66, nickname: "evil"), now: at(10))
        #expect(outcome.result == .rejectedPinMismatch)
        #expect(outcome.pass == nil)
        let record = try #require(try store.record(try meshKey(1)))
        #expect(record.lastSeen == day(0))
        #expect(record.nickname == "a")
        #expect(record.pins?.signingKey == bytes32(1, salt: 0x53))
    }

    @Test(arguments: StoreKind.allCases)
    func blockBeforeFirstSightingAndForget(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        try cache.annotate(try nostrKey(5)) { $0.blocked = true }
        #expect(try cache.isBlocked(try nostrKey(5)))
        #expect(try cache.recordSighting(try nostrSighting(5), now: at(0)).result == .refreshed)
        #expect(try store.record(try nostrKey(5))?.firstSeen == at(0))
        #expect(try cache.forget(try nostrKey(5)))
        #expect(try !cache.isBlocked(try nostrKey(5)))
        #expect(try !cache.forget(try nostrKey(5)))
        // Clearing the only annotation of a never-seen key leaves no row behind.
        try cache.annotate(try nostrKey(6)) { $0.notes = "watch" }
        #expect(try cache.annotate(try nostrKey(6)) { $0.notes = nil } == nil)
        #expect(try store.record(try nostrKey(6)) == nil)
    }

    @Test(arguments: StoreKind.allCases)
    func longNicknamesAndAnnotationsAreCutAtTheirLimit(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        let exact = String(repeating: "é", count: IdentityRecord.Limits.maxNicknameBytes / 2)
        _ = try cache.recordSighting(try nostrSighting(1, nickname: exact), now: at(0))
        #expect(try store.record(try nostrKey(1))?.nickname == exact)
        _ = try cache.recordSighting(try nostrSighting(2, nickname: exact + "x"), now: at(0))
        #expect(try store.record(try nostrKey(2))?.nickname == exact)
        let notes = String(repeating: "n", count: Annotations.Limits.maxNotesBytes + 1)
        let record = try cache.annotate(try nostrKey(1)) { $0.notes = notes }
        #expect(record?.annotations.notes?.utf8.count == Annotations.Limits.maxNotesBytes)
        let petname = String(repeating: "p", count: Annotations.Limits.maxPetnameBytes + 1)
        #expect(try cache.annotate(try nostrKey(1)) { $0.petname = petname }?.annotations.petname?.utf8.count == Annotations.Limits.maxPetnameBytes)
    }
}

@Suite("Operator policy reload")
struct PolicyReloadTests {
    @Test(arguments: StoreKind.allCases)
    func anUnreadablePolicyKeepsTheLastBlockListAndHoldsPasses(kind: StoreKind) throws {
        let store = try kind.make()
        let cache = PeerIdentityCache(store: store, logger: quietLogger)
        #expect(try !cache.isBlocked(try nostrKey(1)))
        cache.setOperatorLists(OperatorLists(blocked: [try nostrKey(1)]))
        #expect(try cache.isBlocked(try nostrKey(1)))
        cache.setOperatorLists(nil)  // a failed reload
        #expect(cache.operatorLists == nil)
        #expect(try cache.isBlocked(try nostrKey(1)), "an editing mistake never unblocks")
        #expect(try !cache.isBlocked(try nostrKey(2)))
        let result = try cache.recordSighting(try nostrSighting(9), now: at(0))
        #expect(result.pass == nil, "no retention pass while the policy is unreadable")
        cache.setOperatorLists(.empty)  // readable again, key 1 removed
        #expect(try !cache.isBlocked(try nostrKey(1)))
    }
}
