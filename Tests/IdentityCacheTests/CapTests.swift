import IdentityCache
import Testing
import Identity

/// The stranger cap (§3): above 2,000 strangers, trim to 1,500 by latest possible sighting.
@Suite("Stranger cap")
struct CapTests {
    private func row(_ index: Int, stamp: Int?, firstSeenMs: Int64) throws -> RetentionRow {
        RetentionRow(key: try nostrKey(index), lastSeen: stamp.map(day), firstSeen: at(0, ms: firstSeenMs))
    }

    @Test func capBoundaryAt2000And2001() throws {
        let at2000 = try (0..<2_000).map { try row($0, stamp: 0, firstSeenMs: Int64($0)) }
        #expect(RetentionRules.capEvictions(strangers: at2000, today: day(0), announcer: nil).isEmpty)
        let at2001 = try (0..<2_001).map { try row($0, stamp: 0, firstSeenMs: Int64($0)) }
        #expect(RetentionRules.capEvictions(strangers: at2001, today: day(0), announcer: nil).count == 501)
    }

    @Test func orderIsLatestPossibleSightingThenNewestArrivalFirst() throws {
        // 2,001 strangers: 1,995 seen today (arrival order = index), plus six older stamps.
        var rows = try (0..<1_995).map { try row($0, stamp: 100, firstSeenMs: Int64($0)) }
        rows.append(try row(5_000, stamp: 90, firstSeenMs: 1))  // latest possible 97: first out
        rows.append(try row(5_001, stamp: 92, firstSeenMs: 1))  // 99
        rows.append(try row(5_002, stamp: 94, firstSeenMs: 1))  // 101 → ranks as today (100)
        rows.append(try row(5_003, stamp: 92, firstSeenMs: 2))  // 99, newer arrival than 5_001: before it
        rows.append(try row(5_004, stamp: nil, firstSeenMs: 0))  // unstamped: stamped today by the pass
        rows.append(try row(5_005, stamp: 120, firstSeenMs: -1))  // future stamp: ranks as today
        let victims = RetentionRules.capEvictions(strangers: rows, today: day(100), announcer: nil)
        #expect(victims.count == 501)
        #expect(Array(victims.prefix(3)) == [try nostrKey(5_000), try nostrKey(5_003), try nostrKey(5_001)])
        // Then this week's strangers, newest arrival first: 1,994, 1,993, …
        #expect(victims[3] == (try nostrKey(1_994)))
        #expect(victims[4] == (try nostrKey(1_993)))
        #expect(!victims.contains(try nostrKey(0)))
        #expect(!victims.contains(try nostrKey(5_005)))
    }

    @Test func trimsByLatestPossibleSightingNotRawStamp() throws {
        // Stamps 95 and 97 both rank as "seen today" on day 100; the raw stamp must not order them.
        var rows = try (0..<1_999).map { try row($0, stamp: 100, firstSeenMs: Int64($0)) }
        rows.append(try row(8_000, stamp: 95, firstSeenMs: 10_000))  // newest arrival
        rows.append(try row(8_001, stamp: 97, firstSeenMs: -10))  // oldest arrival
        let victims = RetentionRules.capEvictions(strangers: rows, today: day(100), announcer: nil)
        #expect(victims.first == (try nostrKey(8_000)))
        #expect(!victims.contains(try nostrKey(8_001)))
    }

    @Test(arguments: StoreKind.allCases)
    func regularsPlusFloodThroughTheCache(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        // 1,000 regulars seen on day 0 and again on day 10 (stamps: day 0 → kept, not weekly-restamped until 7).
        for i in 0..<1_000 { _ = try cache.recordSighting(try meshSighting(i), now: at(0, ms: Int64(i))) }
        for i in 0..<300 { _ = try cache.recordSighting(try meshSighting(i), now: at(10, ms: Int64(i))) }
        // A flood of 1,001 minted identities on day 10 takes strangers to 2,001.
        var capPass: PeerIdentityCache.PassReport?
        for i in 0..<1_001 {
            let outcome = try cache.recordSighting(try nostrSighting(i), now: at(10, ms: 1_000_000 + Int64(i)))
            if let pass = outcome.pass, pass.reason == .cap { capPass = pass }
        }
        let pass = try #require(capPass)
        #expect(pass.evictedByCap == 501)
        // The report names whom it removed, so the mesh engine forgets those pins too.
        #expect(Set(pass.removed) == Set(try (499..<1_000).map(meshKey)))
        #expect(try store.strangerCount() == 1_500)
        // The flood pushes out older stamps first (700 regulars stamped day 0, latest possible day 7), newest
        // arrival first among them: regulars 499…999 go, 300…498 stay; nobody stamped this week is touched.
        for i in 499..<1_000 { #expect(try store.record(try meshKey(i)) == nil) }
        for i in 300..<499 { #expect(try store.record(try meshKey(i)) != nil) }
        for i in 0..<300 { #expect(try store.record(try meshKey(i)) != nil, "regular restamped this week is kept") }
        for i in 0..<1_001 { #expect(try store.record(try nostrKey(i)) != nil, "the flood is this week's") }
    }

    @Test(arguments: StoreKind.allCases)
    func floodReachesThisWeeksStrangersNewestFirstAndSparesTheAnnouncer(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        for i in 0..<2_001 {
            _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: Int64(i)))
        }
        // All seen today: the newest 501 arrivals go, except the announcer (#2000), so #1499 goes instead.
        #expect(try store.record(try nostrKey(2_000)) != nil)
        for i in 1_499..<2_000 { #expect(try store.record(try nostrKey(i)) == nil) }
        for i in stride(from: 0, to: 1_499, by: 97) { #expect(try store.record(try nostrKey(i)) != nil) }
        #expect(try store.strangerCount() == 1_500)
    }

    @Test(arguments: StoreKind.allCases)
    func capCountsStrangersOnly(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        for i in 0..<600 {
            try cache.annotate(try meshKey(i)) { $0.allowed = true }
        }
        for i in 0..<2_000 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: Int64(i))) }
        #expect(try store.count() == 2_600)
        #expect(cache.strangerCount == 2_000)
        #expect(cache.counters.evictedByCap == 0, "600 protected + 2,000 strangers is not over the cap")
        cache.setOperatorLists(OperatorLists(blocked: [try nostrKey(0)]))
        _ = try cache.recordSighting(try nostrSighting(2_000), now: at(0, ms: 5_000))
        #expect(cache.strangerCount == 2_000, "a listed key is not a stranger")
        #expect(cache.counters.evictedByCap == 0)
        _ = try cache.recordSighting(try nostrSighting(2_001), now: at(0, ms: 5_001))
        #expect(cache.counters.evictedByCap == 501)
        #expect(try store.record(try nostrKey(0)) != nil)
        for i in 0..<600 { #expect(try store.record(try meshKey(i)) != nil) }
    }

    /// The O(1) trigger's counter moves only for strangers: a first contact with a key the policy file lists is
    /// protected and must not bring the next cap pass closer.
    @Test(arguments: StoreKind.allCases)
    func protectedFirstContactsDoNotAdvanceTheCapCounter(kind: StoreKind) throws {
        let (cache, _) = try makeCache(kind, lists: OperatorLists(allowed: Set(try (100..<150).map(nostrKey))))
        _ = try cache.recordSighting(try nostrSighting(0), now: at(0))
        #expect(cache.strangerCount == 1)
        for i in 100..<150 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: Int64(i))) }
        #expect(cache.strangerCount == 1)
        for i in 1..<6 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: 1_000 + Int64(i))) }
        #expect(cache.strangerCount == 6)
        #expect(cache.counters.passes == 1)
    }

    /// The counter can run ahead of the store (the operator's CLI forgets rows from another process): when it
    /// fires, the cap pass counts the rows it reads and trims only a real excess.
    @Test(arguments: StoreKind.allCases)
    func aCapPassCountsTheRowsWhenTheCounterRanAhead(kind: StoreKind) throws {
        let (cache, store) = try makeCache(kind)
        for i in 0..<2_000 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: Int64(i))) }
        #expect(cache.strangerCount == 2_000)
        #expect(try store.delete(try (0..<10).map(nostrKey)) == 10)
        let outcome = try cache.recordSighting(try nostrSighting(2_000), now: at(0, ms: 9_999))
        #expect(outcome.pass?.reason == .cap)
        #expect(outcome.pass?.evictedByCap == 0)
        #expect(outcome.pass?.strangersAfter == 1_991)
        #expect(cache.strangerCount == 1_991)
        #expect(try store.strangerCount() == 1_991)
    }

    @Test(arguments: StoreKind.allCases)
    func theCapTriggerIsAnO1CounterCheck(kind: StoreKind) throws {
        let counting = CountingStore(try kind.make())
        let cache = PeerIdentityCache(store: counting, logger: quietLogger)
        cache.setOperatorLists(.empty)
        for i in 0..<2_000 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: Int64(i))) }
        let scansAfterFirstPass = counting.scans
        #expect(cache.counters.passes == 1)
        #expect(scansAfterFirstPass > 0)
        // 1,999 inserts after the first pass: no scan at all, the counter decides.
        #expect(cache.strangerCount == 2_000)
        let outcome = try cache.recordSighting(try nostrSighting(2_000), now: at(0, ms: 9_999))
        #expect(outcome.pass?.reason == .cap, "the cap pass runs at once, same day")
        #expect(counting.scans > scansAfterFirstPass)
        let scansAfterCap = counting.scans
        for i in 2_001..<2_400 { _ = try cache.recordSighting(try nostrSighting(i), now: at(0, ms: 10_000 + Int64(i))) }
        #expect(counting.scans == scansAfterCap, "below the cap again: inserts scan nothing")
    }
}
