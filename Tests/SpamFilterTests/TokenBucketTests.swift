import BotSupport
import Testing
import SpamFilter

@Suite("Timestamp-clamped token buckets")
struct TokenBucketTests {
    static func bucket(_ capacity: Double, _ tokens: Double, per seconds: Double) -> TokenBucketSchedule {
        TokenBucketSchedule(SpamFilterConfig.Bucket(capacity: capacity, refillTokens: tokens, refillSeconds: seconds))
    }

    @Test func burstThenRefill() {
        var bucket = Self.bucket(6, 1, per: 10)
        for _ in 0..<6 { #expect(bucket.spend(1, at: 100_000).accepted) }
        #expect(!bucket.spend(1, at: 100_000).accepted)  // n+1
        #expect(!bucket.spend(1, at: 109_999).accepted)
        #expect(bucket.spend(1, at: 110_000).accepted)
    }

    @Test func costAboveCapacityIsAlwaysRejected() {
        var bucket = Self.bucket(1200, 1200, per: 60)
        #expect(bucket.spend(1200, at: 0).accepted)
        var fresh = Self.bucket(1200, 1200, per: 60)
        #expect(!fresh.spend(1201, at: 0).accepted)
        #expect(!fresh.spend(Int.max, at: 0).accepted)  // its units overflow: more than any capacity
    }

    @Test func outOfOrderInsertionMustNotOverdrawLaterSpends() {
        var bucket = Self.bucket(2, 1, per: 10)
        #expect(bucket.spend(1, at: 100_000).accepted)
        #expect(bucket.spend(1, at: 101_000).accepted)
        // Inserting at 50 s starts the simulation full at 50 s: 2 → 1; refill to 2 by 100 s; 1; 0.1 left at 101 s → ok.
        #expect(bucket.spend(1, at: 50_000).accepted)
        // Another at 99 s would leave -0.x at 101 s.
        #expect(!bucket.spend(1, at: 99_000).accepted)
    }

    /// The scales of the defaults: whole units per millisecond, so every millisecond lands exactly.
    @Test func defaultScalesAreSmallIntegers() {
        let config = SpamFilterConfig()
        func figures(_ bucket: SpamFilterConfig.Bucket) -> [Int64] {
            let scale = BucketScale(bucket)
            return [scale.unitsPerToken, scale.capacity, scale.refillPerMillisecond]
        }
        #expect(figures(config.messageBucket) == [10_000, 60_000, 1])
        #expect(figures(config.characterBucket) == [50, 60_000, 1])
        #expect(figures(config.linkBucket) == [30_000, 60_000, 1])
        // Decimals mean what they say: 0.1 token per 0.3 s is a third of a token per second.
        let third = BucketScale(.init(capacity: 2.5, refillTokens: 0.1, refillSeconds: 0.3))
        #expect(third.refillPerMillisecond * 3_000 == third.unitsPerToken)
        #expect(third.capacity * 2 == third.unitsPerToken * 5)
        // The largest configuration the loader admits stays far from overflow.
        let largest = BucketScale(.init(capacity: 1e6, refillTokens: 999_999.999, refillSeconds: 86_399.999))
        #expect(largest.capacity < 1 << 57 && largest.unitsPerToken < 1 << 37)
    }

    /// The cached and pruned bucket agrees with a from-scratch simulation in exact rationals on random
    /// arrival orders, decimal configurations and millisecond timestamps.
    @Test func matchesAnExactRationalSimulationOnRandomArrivals() {
        var rng = SeededRandom(seed: 42)
        var boundaryHits = 0
        for _ in 0..<400 {
            // Whole and decimal figures as an operator writes them, and now and then any thousandths.
            let capacity = Rational(Int([1_000, 2_000, 6_000, 2_500, 1_000 + rng.next() % 5_001][Int(rng.next() % 5)]), 1_000)
            let tokens = Rational(Int([1_000, 2_000, 100, 500, 1 + rng.next() % 3_000][Int(rng.next() % 5)]), 1_000)
            let seconds = Rational(Int([1_000, 10_000, 30_000, 60_000, 300, 1 + rng.next() % 90_000][Int(rng.next() % 6)]), 1_000)
            let rate = tokens / (seconds * Rational(1_000, 1))  // tokens per ms
            var bucket = Self.bucket(capacity.double, tokens.double, per: seconds.double)
            var accepted: [(time: Int, cost: Int)] = []
            var now = 0
            for _ in 0..<40 {
                // Steps of whole seconds, tenths and milliseconds, so boundaries are often hit exactly.
                now += Int(rng.next() % 30) * [1_000, 100, 1][Int(rng.next() % 3)]
                let time = min(max(now - Int(rng.next() % 120) * 500, now - 3_600_000), now)
                let cost = Int(1 + rng.next() % 2)
                bucket.prune(before: Int64(now - 3_600_000))
                var trial = accepted
                trial.insert((time, cost), at: trial.firstIndex { $0.time > time } ?? trial.count)
                let (expected, tight) = simulate(trial, capacity: capacity, rate: rate)
                if tight { boundaryHits += 1 }
                let got = bucket.spend(cost, at: Int64(time)).accepted
                #expect(got == expected)
                if expected { accepted = trial }
            }
        }
        #expect(boundaryHits > 100, "\(boundaryHits) spends left a level of exactly 0")
    }

    /// Whether the spends fit, and whether some spend left exactly 0 (a boundary landing).
    private func simulate(_ list: [(time: Int, cost: Int)], capacity: Rational, rate: Rational) -> (Bool, Bool) {
        var level = capacity
        var previous = list.first?.time ?? 0
        var tight = false
        for spend in list {
            level = min(capacity, level + rate * Rational(max(0, spend.time - previous), 1)) - Rational(spend.cost, 1)
            previous = spend.time
            if level < Rational(0, 1) { return (false, tight) }
            if level == Rational(0, 1) { tight = true }
        }
        return (true, tight)
    }

    @Test func pruningKeepsHistoryBoundedByTheWindow() {
        var bucket = Self.bucket(6, 1, per: 10)
        var accepted = 0
        for second in stride(from: Int64(0), to: 4 * 3600, by: 5) {
            bucket.prune(before: (second - 3600) * 1000)
            if bucket.spend(1, at: second * 1000).accepted { accepted += 1 }
        }
        #expect(bucket.retainedSpends <= 6 + 360 + 1)
        #expect(accepted >= 4 * 360)
    }

    @Test func millisecondsOfSecondsAreExact() {
        #expect(BucketScale.milliseconds(1_750_000_000) == 1_750_000_000_000)
        for ms in [Int64(0), 1, 999, 1_750_000_000_001, 1_750_000_000_999, 4_102_444_800_123] {
            #expect(BucketScale.milliseconds(Double(ms) / 1000) == ms)
        }
        #expect(BucketScale.milliseconds(.nan) == 0)
        #expect(BucketScale.milliseconds(.infinity) == 1 << 53)
        #expect(BucketScale.milliseconds(-.infinity) == -(1 << 53))
    }
}

/// An exact fraction for the model (the test's values keep numerators and denominators far below 2^63).
struct Rational: Comparable {
    var numerator: Int
    var denominator: Int

    init(_ numerator: Int, _ denominator: Int) {
        var (a, b) = (abs(numerator), denominator)
        while b != 0 { (a, b) = (b, a % b) }
        let divisor = max(a, 1)
        self.numerator = numerator / divisor
        self.denominator = denominator / divisor
    }

    var double: Double { Double(numerator) / Double(denominator) }

    static func + (x: Rational, y: Rational) -> Rational {
        Rational(x.numerator * y.denominator + y.numerator * x.denominator, x.denominator * y.denominator)
    }
    static func - (x: Rational, y: Rational) -> Rational { x + Rational(-y.numerator, y.denominator) }
    static func * (x: Rational, y: Rational) -> Rational {
        Rational(x.numerator * y.numerator, x.denominator * y.denominator)
    }
    static func / (x: Rational, y: Rational) -> Rational {
        Rational(x.numerator * y.denominator, x.denominator * y.numerator)
    }
    static func < (x: Rational, y: Rational) -> Bool { x.numerator * y.denominator < y.numerator * x.denominator }
}
