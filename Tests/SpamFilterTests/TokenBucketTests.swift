import Testing
import SpamFilter

@Suite("Timestamp-clamped token buckets")
struct TokenBucketTests {
    @Test func burstThenRefill() {
        var bucket = TokenBucketSchedule(capacity: 6, rate: 0.1)
        for _ in 0..<6 { #expect(bucket.spend(1, at: 100).accepted) }
        #expect(!bucket.spend(1, at: 100).accepted)  // n+1
        #expect(!bucket.spend(1, at: 109.9).accepted)
        #expect(bucket.spend(1, at: 110).accepted)
    }

    @Test func costAboveCapacityIsAlwaysRejected() {
        var bucket = TokenBucketSchedule(capacity: 1200, rate: 20)
        #expect(bucket.spend(1200, at: 0).accepted)
        var fresh = TokenBucketSchedule(capacity: 1200, rate: 20)
        #expect(!fresh.spend(1201, at: 0).accepted)
    }

    @Test func outOfOrderInsertionMustNotOverdrawLaterSpends() {
        var bucket = TokenBucketSchedule(capacity: 2, rate: 0.1)
        #expect(bucket.spend(1, at: 100).accepted)
        #expect(bucket.spend(1, at: 101).accepted)
        // Inserting at 50 starts the simulation full at 50: 2 → 1 at 50; refill to 2 by 100; 1; 0.1 left at 101 → ok.
        #expect(bucket.spend(1, at: 50).accepted)
        // Another at 99 would leave -0.x at 101.
        #expect(!bucket.spend(1, at: 99).accepted)
    }

    /// The cached and pruned bucket agrees with a from-scratch simulation on random arrival orders.
    @Test func matchesFullSimulationOnRandomArrivals() {
        var rng = SeededRandom(seed: 42)
        for _ in 0..<300 {
            let capacity = Double(1 + rng.next() % 6)
            let rate = Double(1 + rng.next() % 10) / 20
            var bucket = TokenBucketSchedule(capacity: capacity, rate: rate)
            var accepted: [(time: Double, cost: Double)] = []
            var now = 0.0
            for _ in 0..<40 {
                now += Double(rng.next() % 30)
                let time = min(max(now - Double(rng.next() % 120), now - 3600), now)
                let cost = Double(1 + rng.next() % 2)
                bucket.prune(before: now - 3600)
                var trial = accepted
                trial.insert((time, cost), at: trial.firstIndex { $0.time > time } ?? trial.count)
                let expected = simulate(trial, capacity: capacity, rate: rate)
                let got = bucket.spend(cost, at: time).accepted
                #expect(got == expected)
                if expected { accepted = trial }
            }
        }
    }

    private func simulate(_ list: [(time: Double, cost: Double)], capacity: Double, rate: Double) -> Bool {
        var level = capacity
        var previous = list.first?.time ?? 0
        for spend in list {
            level = min(capacity, level + rate * (spend.time - previous)) - spend.cost
            previous = spend.time
            if level < 0 { return false }
        }
        return true
    }

    @Test func pruningKeepsHistoryBoundedByTheWindow() {
        var bucket = TokenBucketSchedule(capacity: 6, rate: 0.1)
        var accepted = 0
        for second in stride(from: 0.0, to: 4 * 3600, by: 5) {
            bucket.prune(before: second - 3600)
            if bucket.spend(1, at: second).accepted { accepted += 1 }
        }
        #expect(bucket.retainedSpends <= 6 + 360 + 1)
        #expect(accepted >= 4 * 360)
    }
}
