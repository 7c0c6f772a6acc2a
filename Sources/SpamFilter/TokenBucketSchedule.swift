/// A token bucket that runs on message timestamps, not arrival times (SPAM-FILTER.md §6).
///
/// Exact semantics: take the accepted spends ordered by (clamped) timestamp; start full at the first
/// spend; between spends refill `rate·Δt` capped at `capacity`; subtract each spend. A new spend is
/// accepted iff, with it inserted at its timestamp (after any spends with the same timestamp), no spend
/// drives the level below zero.
///
/// In-order arrivals (timestamp ≥ the last spend's) use the cached level after the last spend: O(1).
/// Out-of-order arrivals re-simulate from the insertion point. Spends older than the clamp window can
/// never have a later insertion before them (every timestamp is clamped to ≥ now − window), so
/// ``prune(before:)`` folds them into a checkpoint holding the exact simulated level; history stays
/// bounded by the window.
public struct TokenBucketSchedule: Sendable {
    struct Spend: Sendable {
        var time: Double
        var cost: Double
        /// Simulated level right after this spend.
        var levelAfter: Double
    }

    /// History slots reserved at a bucket's first spend: a chat sender posts a few messages within the
    /// window, so the history then grows without reallocating for the first four spends.
    static let initialHistory = 4

    public let capacity: Double
    public let rate: Double
    /// The state right after the last pruned spend, if any.
    private var checkpoint: (time: Double, level: Double)?
    private var spends: [Spend] = []
    private var pruned = 0
    /// Copies of the history's ends kept beside it, so the common calls read no history (a sender's
    /// history is seldom in cache): `spends[pruned].time` (+∞ when every spend is pruned) and
    /// `spends.last` (nil when every spend is pruned).
    private var oldestKept = Double.infinity
    private var newest: Spend?

    public init(capacity: Double, rate: Double) {
        self.capacity = capacity
        self.rate = rate
    }

    /// Spends kept for out-of-order insertions.
    public var retainedSpends: Int { spends.count - pruned }

    @inline(__always)
    private func refill(from level: Double, over seconds: Double) -> Double {
        min(capacity, level + rate * max(0, seconds))
    }

    /// Level available at `time` just before a spend inserted at `time` (after equal timestamps).
    private func levelBefore(insertionIndex index: Int, time: Double) -> Double {
        if index > pruned {
            let previous = spends[index - 1]
            return refill(from: previous.levelAfter, over: time - previous.time)
        }
        if let checkpoint { return refill(from: checkpoint.level, over: time - checkpoint.time) }
        return capacity
    }

    /// Tries to spend `cost` at `time`. Returns whether it was accepted and the level available at
    /// `time` before it. A rejected spend changes nothing.
    public mutating func spend(_ cost: Double, at time: Double) -> (accepted: Bool, level: Double) {
        let time = max(time, checkpoint?.time ?? -.infinity)
        guard let last = newest, time < last.time else {
            // In order (`levelBefore(insertionIndex: spends.count, …)`, from the copy of the last spend).
            let level: Double
            if let last = newest {
                level = refill(from: last.levelAfter, over: time - last.time)
            } else if let checkpoint {
                level = refill(from: checkpoint.level, over: time - checkpoint.time)
            } else {
                level = capacity
            }
            guard level - cost >= 0 else { return (false, level) }
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
        var running = level - cost
        guard running >= 0 else { return (false, level) }
        var updated: [Double] = []
        updated.reserveCapacity(spends.count - index)
        var previousTime = time
        for k in index..<spends.count {
            running = refill(from: running, over: spends[k].time - previousTime) - spends[k].cost
            guard running >= 0 else { return (false, level) }
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

    /// Level available at `time` for an in-order spend (for figures only; spends nothing).
    public func level(at time: Double) -> Double {
        levelBefore(insertionIndex: spends.count, time: max(time, spends.last?.time ?? -.infinity))
    }

    /// Folds spends older than `time` into the checkpoint (their effect on later levels is kept exactly).
    public mutating func prune(before time: Double) {
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
            oldestKept = .infinity
            newest = nil
        }
        // Compact occasionally so pruning stays O(1) amortised.
        if pruned > 32, pruned * 2 > spends.count {
            spends.removeFirst(pruned)
            pruned = 0
        }
    }
}
