import BotSupport
import Testing

@Suite("Bounded sets and rate windows")
struct BoundedSetTests {
    @Test("keeps the newest `capacity` elements; evicts oldest first and counts it")
    func boundedSet() {
        var set = BoundedSet<Int>(capacity: 3)
        for i in 1...3 { #expect(set.insert(i).inserted) }
        let again = set.insert(2)
        #expect(!again.inserted)
        let fourth = set.insert(4)
        #expect(fourth.inserted && fourth.evicted == 1)
        #expect(!set.contains(1) && set.contains(4) && set.count == 3)
        #expect(set.elementsOldestFirst == [2, 3, 4])
        #expect(set.evictions == 1)
        for i in 5..<1000 { set.insert(i) }
        #expect(set.count == 3 && set.elementsOldestFirst == [997, 998, 999])
    }

    @Test("sliding window: `limit` events per window admitted, the next refused until the oldest leaves")
    func window() {
        var limiter = SlidingWindowLimiter(limit: 3, window: 60)
        let results = [0, 1, 2, 59.9, 60, 60.5, 61].map { limiter.admit(now: $0) }
        // The 4th event at 59.9 is refused; at 60 the event of t=0 has left the window.
        #expect(results == [true, true, true, false, true, false, true])
        #expect(!limiter.wouldAdmit(now: 61.5))
    }

    @Test("keyed limiter: independent keys, bounded key table")
    func keyed() {
        var limiter = KeyedWindowLimiter<String>(limit: 1, window: 60, maxKeys: 2)
        let results = [("a", 0.0), ("a", 1), ("b", 1), ("c", 1)].map { limiter.admit($0.0, now: $0.1) }
        #expect(results == [true, false, true, true])
        #expect(limiter.trackedKeys == 2)
        // "a" was forgotten to make room, so it starts afresh.
        let again = limiter.admit("a", now: 2)
        #expect(again)
    }
}
