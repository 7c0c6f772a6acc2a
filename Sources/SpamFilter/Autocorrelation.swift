/// The repeated-characters measure of SPAM-FILTER.md §4 rule 6:
/// `A(k) = #{ i : s[i] == s[i+k] } / (n − k)` for `k = 1 … n/2`.
public enum Autocorrelation {
    /// The first shift whose `A(k)` reaches `threshold` (with its value), or nil when none does.
    ///
    /// Each shift stops as soon as its mismatches make the threshold unreachable, so random text costs
    /// about `0.15·n/(1 − p)` comparisons per shift instead of `n − k`. The verdict equals
    /// `max_k A(k) ≥ threshold`; only the figure differs (the first reaching shift, not the maximum).
    ///
    /// `distinctBigrams` (the number of distinct bigrams of `s`, 0 when unknown) skips the shifts that
    /// cannot reach the threshold, without comparing: if shift k has at most `M` mismatches, at least
    /// `(n − k − 1) − 2M` bigram positions `i` have `bigram(i) == bigram(i + k)` (a mismatch spoils at most
    /// the two bigrams that contain it); those links join the `n − 1` bigram positions into chains of equal
    /// bigrams, so `s` has at most `k + 2M` distinct bigrams. Ordinary chat has far more distinct bigrams
    /// than `k + 2·allowed` for every shift up to `n/2`, so none is scanned.
    public static func firstReaching(_ s: [UInt32], threshold: Double, distinctBigrams: Int = 0) -> (value: Double, shift: Int)? {
        let n = s.count
        guard n >= 2 else { return nil }
        return s.withUnsafeBufferPointer { s -> (value: Double, shift: Int)? in
            // Most mismatches A(k) ≥ threshold allows: mismatches ≤ total − ⌈threshold·total⌉, settled by
            // the exact comparisons below. `total` drops by one per shift, so the previous shift's figure is
            // the starting guess (the two loops reach the same fixpoint from any start).
            var allowed = (n - 1) - Int((threshold * Double(n - 1)).rounded(.up))
            for k in 1...(n / 2) {
                let total = n - k
                allowed = settle(allowed, total: total, threshold: threshold)
                guard allowed >= 0, distinctBigrams <= k + 2 * allowed else { continue }
                if let mismatches = mismatches(s, shift: k, allowed: allowed) {
                    return (Double(total - mismatches) / Double(total), k)
                }
            }
            return nil
        }
    }

    /// ``firstReaching(_:threshold:distinctBigrams:)`` with the allowances looked up instead of computed:
    /// `allowances[t]` must be ``allowedMismatches(total:threshold:)`` for every `t < s.count` (the same
    /// threshold). Same result, without the two divisions per shift that settling the allowance costs.
    static func firstReaching(_ s: [UInt32], allowances: [Int32], distinctBigrams: Int = 0) -> (value: Double, shift: Int)? {
        let n = s.count
        guard n >= 2 else { return nil }
        precondition(allowances.count >= n, "an allowance for every total below the length")
        return s.withUnsafeBufferPointer { s -> (value: Double, shift: Int)? in
            allowances.withUnsafeBufferPointer { allowances -> (value: Double, shift: Int)? in
                for k in 1...(n / 2) {
                    let total = n - k
                    let allowed = Int(allowances[total])
                    guard allowed >= 0, distinctBigrams <= k + 2 * allowed else { continue }
                    if let mismatches = mismatches(s, shift: k, allowed: allowed) {
                        return (Double(total - mismatches) / Double(total), k)
                    }
                }
                return nil
            }
        }
    }

    /// The most mismatches over `total` compared pairs with `A(k) ≥ threshold`: the largest `a` with
    /// `Double(total − a) / Double(total) ≥ threshold` (the definition's own division), −1 when none.
    static func allowedMismatches(total: Int, threshold: Double) -> Int {
        guard total > 0 else { return -1 }
        let guess = total - Int((threshold * Double(total)).rounded(.up))
        return max(-1, settle(guess, total: total, threshold: threshold))
    }

    /// Moves a guess to the largest allowance for `total`. `Double(total − a) / Double(total)` falls as `a`
    /// grows (correctly rounded division is monotone), so the allowed `a` are those up to one bound: the
    /// loops reach it from any start (a result below 0 means no shift of this total can reach).
    @inline(__always)
    private static func settle(_ guess: Int, total: Int, threshold: Double) -> Int {
        var allowed = guess
        while allowed + 1 <= total, Double(total - allowed - 1) / Double(total) >= threshold { allowed += 1 }
        while allowed >= 0, Double(total - allowed) / Double(total) < threshold { allowed -= 1 }
        return allowed
    }

    /// `#{ i < n − k : s[i] != s[i + k] }`, or nil as soon as it exceeds `allowed`. Eight pairs at a time
    /// (the count is checked after each block, so it may pass `allowed` by up to 7 before stopping: the
    /// answer is nil either way), then one at a time for the tail.
    @inline(__always)
    private static func mismatches(_ s: UnsafeBufferPointer<UInt32>, shift k: Int, allowed: Int) -> Int? {
        let total = s.count - k
        var mismatches = 0
        var i = 0
        if let base = s.baseAddress {
            let raw = UnsafeRawPointer(base)
            let one = SIMD8<UInt32>(repeating: 1)
            while i + 8 <= total {
                let a = raw.loadUnaligned(fromByteOffset: i &* 4, as: SIMD8<UInt32>.self)
                let b = raw.loadUnaligned(fromByteOffset: (i &+ k) &* 4, as: SIMD8<UInt32>.self)
                mismatches &+= Int(one.replacing(with: 0, where: a .== b).wrappedSum())
                if mismatches > allowed { return nil }
                i &+= 8
            }
        }
        while i < total {
            if s[i] != s[i &+ k] {
                mismatches &+= 1
                if mismatches > allowed { return nil }
            }
            i &+= 1
        }
        return mismatches
    }

    /// `max_k A(k)` and its shift (the smallest shift among equal maxima), computed in full.
    public static func maximum(_ s: [UInt32]) -> (value: Double, shift: Int) {
        let n = s.count
        guard n >= 2 else { return (0, 0) }
        var best = (value: -1.0, shift: 0)
        for k in 1...(n / 2) {
            var same = 0
            for i in 0..<(n - k) where s[i] == s[i + k] { same += 1 }
            let value = Double(same) / Double(n - k)
            if value > best.value { best = (value, k) }
        }
        return best
    }
}
