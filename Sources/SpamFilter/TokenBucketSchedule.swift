/// A bucket's configuration in exact integers (SPAM-FILTER.md §6): time in whole milliseconds, levels in
/// units of `1 / unitsPerToken` token, so that refilling `r·Δt` and subtracting whole tokens is exact.
///
/// The configured values are taken in thousandths (the JSON loader accepts nothing finer, see
/// ``SpamFilterConfig/Limits``): with `c` thousandths of a token of capacity, `r` thousandths of a token
/// refilled every `s` ms, one token is `1000·s` units, the capacity `c·s` units and the refill `r` units per
/// millisecond — reduced by their common divisor (the defaults: 1 unit per ms for all three buckets, one
/// message token = 10,000 units). With the loader's ranges every figure stays below 2^57.
public struct BucketScale: Sendable, Equatable {
    /// Units in one token.
    public let unitsPerToken: Int64
    /// Capacity, in units.
    public let capacity: Int64
    /// Refill, in units per millisecond.
    public let refillPerMillisecond: Int64

    public init(_ bucket: SpamFilterConfig.Bucket) {
        typealias Limits = SpamFilterConfig.Limits
        let c = Self.thousandths(bucket.capacity, in: 1_000...Limits.maxBucketTokens * 1_000)
        let r = Self.thousandths(bucket.refillTokens, in: 1...Limits.maxBucketTokens * 1_000)
        let s = Self.thousandths(bucket.refillSeconds, in: 1...Int64(Limits.maxWindowSeconds) * 1_000)
        let divisor = Self.gcd(Self.gcd(1_000 * s, c * s), r)
        unitsPerToken = 1_000 * s / divisor
        capacity = c * s / divisor
        refillPerMillisecond = r / divisor
    }

    /// `value` in thousandths, to the nearest and clamped to `range` (the loader admits only exact
    /// thousandths within range; a value set in code that is neither is taken at the nearest one).
    static func thousandths(_ value: Double, in range: ClosedRange<Int64>) -> Int64 {
        let scaled = (value * 1_000).rounded()
        guard scaled.isFinite else { return scaled > 0 ? range.upperBound : range.lowerBound }
        return min(max(Int64(max(min(scaled, 1e15), -1e15)), range.lowerBound), range.upperBound)
    }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    /// Capacity in tokens.
    public var capacityTokens: Double { Double(capacity) / Double(unitsPerToken) }

    /// `tokens` whole tokens in units (`Int64.max` when that overflows: more than any capacity).
    @inline(__always)
    public func units(tokens: Int) -> Int64 {
        let (product, overflow) = Int64(tokens).multipliedReportingOverflow(by: unitsPerToken)
        return overflow || tokens < 0 ? .max : product
    }

    /// The level `milliseconds` after `level`: `min(capacity, level + refill·Δt)`, exactly (`Δt < 0` counts as 0).
    @inline(__always)
    public func refill(_ level: Int64, over milliseconds: Int64) -> Int64 {
        guard milliseconds > 0 else { return level }
        let (gain, overflow) = refillPerMillisecond.multipliedReportingOverflow(by: milliseconds)
        return overflow || gain >= capacity - level ? capacity : level + gain
    }

    /// Whole milliseconds of a time in seconds, to the nearest; non-finite or beyond ±2^53 ms (285,000 years)
    /// saturates (NaN is 0). Whole seconds and `Double(ms) / 1000` (how mesh timestamps arrive) come back exact.
    public static func milliseconds(_ seconds: Double) -> Int64 {
        let scaled = (seconds * 1_000).rounded()
        if scaled.isNaN { return 0 }
        return Int64(min(max(scaled, -0x20_0000_0000_0000), 0x20_0000_0000_0000))
    }
}

/// A token bucket that runs on message timestamps, not arrival times (SPAM-FILTER.md §6).
///
/// Exact semantics: take the accepted spends ordered by (clamped) timestamp; start full at the first
/// spend; between spends refill `rate·Δt` capped at `capacity`; subtract each spend. A new spend is
/// accepted iff, with it inserted at its timestamp (after any spends with the same timestamp), no spend
/// drives the level below zero. Times are whole milliseconds and levels integer units (``BucketScale``),
/// so every boundary lands exactly: 6 tokens refilled at 1 / 10 s are back to exactly 1 where the
/// arithmetic says so, not at 0.9999999999999996.
///
/// In-order arrivals (timestamp ≥ the last spend's) use the cached level after the last spend: O(1).
/// Out-of-order arrivals re-simulate from the insertion point. Spends older than the clamp window can
/// never have a later insertion before them (every timestamp is clamped to ≥ now − window), so
/// ``prune(before:)`` folds them into a checkpoint holding the exact simulated level; history stays
/// bounded by the window.
public struct TokenBucketSchedule: Sendable {
    struct Spend: Sendable {
        var time: Int64
        var cost: Int64
        /// Simulated level right after this spend.
        var levelAfter: Int64
    }

    /// History slots reserved at a bucket's first spend: a chat sender posts a few messages within the
    /// window, so the history then grows without reallocating for the first four spends.
    static let initialHistory = 4

    public let scale: BucketScale
    /// The state right after the last pruned spend, if any.
    private var checkpoint: (time: Int64, level: Int64)?
    private var spends: [Spend] = []
    private var pruned = 0
    /// Copies of the history's ends kept beside it, so the common calls read no history (a sender's
    /// history is seldom in cache): `spends[pruned].time` (`Int64.max` when every spend is pruned) and
    /// `spends.last` (nil when every spend is pruned).
    private var oldestKept = Int64.max
    private var newest: Spend?

    public init(_ scale: BucketScale) { self.scale = scale }

    public init(_ bucket: SpamFilterConfig.Bucket) { self.init(BucketScale(bucket)) }

    /// Spends kept for out-of-order insertions.
    public var retainedSpends: Int { spends.count - pruned }

    /// Level (units) available at `time` just before a spend inserted at `time` (after equal timestamps).
    private func levelBefore(insertionIndex index: Int, time: Int64) -> Int64 {
        if index > pruned {
            let previous = spends[index - 1]
            return scale.refill(previous.levelAfter, over: time - previous.time)
        }
        if let checkpoint { return scale.refill(checkpoint.level, over: time - checkpoint.time) }
        return scale.capacity
    }

    /// Tries to spend `tokens` whole tokens at `time` (ms). Returns whether it was accepted and the level
    /// (units) available at `time` before it. A rejected spend changes nothing.
    public mutating func spend(_ tokens: Int, at time: Int64) -> (accepted: Bool, level: Int64) {
        let cost = scale.units(tokens: tokens)
        let time = max(time, checkpoint?.time ?? .min)
        guard let last = newest, time < last.time else {
            // In order (`levelBefore(insertionIndex: spends.count, …)`, from the copy of the last spend).
            let level: Int64
            if let last = newest {
                level = scale.refill(last.levelAfter, over: time - last.time)
            } else if let checkpoint {
                level = scale.refill(checkpoint.level, over: time - checkpoint.time)
            } else {
                level = scale.capacity
            }
            guard level >= cost else { return (false, level) }
            let spend = Spend(time: time, cost: cost, levelAfter: level - cost)
            if spends.capacity == 0 { spends.reserveCapacity(Self.initialHistory) }
            spends.append(spend)
            if newest == nil { oldestKept = time }
            newest = spend
            return (true, level)
        }
        // Out of order: insertion point after every spend with time ≤ `time`.
        var low = pruned
        var high = spends.count
        while low < high {
            let mid = (low + high) / 2
            if spends[mid].time <= time { low = mid + 1 } else { high = mid }
        }
        let index = low
        let level = levelBefore(insertionIndex: index, time: time)
        guard level >= cost else { return (false, level) }
        var running = level - cost
        var updated: [Int64] = []
        updated.reserveCapacity(spends.count - index)
        var previousTime = time
        for k in index..<spends.count {
            running = scale.refill(running, over: spends[k].time - previousTime)
            guard running >= spends[k].cost else { return (false, level) }
            running -= spends[k].cost
            updated.append(running)
            previousTime = spends[k].time
        }
        for (offset, value) in updated.enumerated() { spends[index + offset].levelAfter = value }
        spends.insert(Spend(time: time, cost: cost, levelAfter: level - cost), at: index)
        // The insertion point is before the last spend (out of order), at or after the oldest kept one.
        newest = spends[spends.count - 1]
        if index == pruned { oldestKept = time }
        return (true, level)
    }

    /// Level (units) available at `time` for an in-order spend (for figures only; spends nothing).
    public func level(at time: Int64) -> Int64 {
        levelBefore(insertionIndex: spends.count, time: max(time, spends.last?.time ?? .min))
    }

    /// Folds spends older than `time` into the checkpoint (their effect on later levels is kept exactly).
    public mutating func prune(before time: Int64) {
        // Nothing older than `time`: nothing to fold, and the compaction below was already settled when
        // `pruned` last grew (appends and insertions only make it less due).
        guard oldestKept < time else { return }
        while pruned < spends.count, spends[pruned].time < time {
            checkpoint = (spends[pruned].time, spends[pruned].levelAfter)
            pruned += 1
        }
        if pruned < spends.count {
            oldestKept = spends[pruned].time
        } else {
            oldestKept = .max
            newest = nil
        }
        // Compact occasionally so pruning stays O(1) amortised.
        if pruned > 32, pruned * 2 > spends.count {
            spends.removeFirst(pruned)
            pruned = 0
        }
    }
}
