import Foundation
public import SpamFilter

/// The exhaustive reference for the spam filter: the rules of SPAM-FILTER.md written as plainly as
/// possible, with none of the shortcuts (no bigram index, no upper bound, no scan caps, no cached
/// bucket state, no early exits, no sender eviction, unbounded verdict cache). Used by the
/// equivalence tests and by `bitchat-bridge bench spam` as the side-by-side baseline; never by the bridge.
///
/// It shares only the link counter (a straight translation of the spec with no shortcut to check) and the
/// exact bucket arithmetic (`BucketScale`: milliseconds and integer units) with the real filter; the
/// normaliser is its own, step by step as §3 lists them, to check the filter's ASCII fast path.
public struct ReferenceSpamFilter {
    public struct Verdict: Equatable, Sendable {
        public var hidden: Bool
        public var rule: SpamRule?
    }

    struct StoredText {
        var sender: String
        var id: String
        var time: Double
        var scalars: [UInt32]
    }

    public let config: SpamFilterConfig
    /// Per sender, per bucket: accepted spends as (time ms, cost units), ordered by time.
    private var spends: [String: [[(time: Int64, cost: Int64)]]] = [:]
    private var texts: [StoredText] = []
    private var verdicts: [String: Verdict] = [:]

    public init(config: SpamFilterConfig) { self.config = config }

    public mutating func judge(_ candidate: SpamCandidate, now: Double) -> Verdict {
        if let cached = verdicts[candidate.messageID] { return cached }
        let verdict = evaluate(candidate, now: now)
        verdicts[candidate.messageID] = verdict
        return verdict
    }

    private mutating func evaluate(_ candidate: SpamCandidate, now: Double) -> Verdict {
        // Buckets on whole milliseconds and integer units (`BucketScale`), the text rules on the same instant.
        let nowMilliseconds = BucketScale.milliseconds(now)
        let stamp = candidate.timestamp.isFinite ? BucketScale.milliseconds(candidate.timestamp) : nowMilliseconds
        let milliseconds = min(max(stamp, nowMilliseconds - BucketScale.milliseconds(config.timestampClampSeconds)), nowMilliseconds)
        let time = Double(milliseconds) / 1_000
        let key = candidate.senderKey
        var scalars: [UInt32]?
        if case .text(let text) = candidate.content { scalars = Self.normalize(text) }
        defer {
            if let scalars {
                texts.append(StoredText(sender: key, id: candidate.messageID, time: time, scalars: scalars))
                if texts.count > config.storedTexts { texts.removeFirst() }
            }
        }
        let buckets = [config.messageBucket, config.characterBucket, config.linkBucket].map(BucketScale.init)
        if spends[key] == nil { spends[key] = [[], [], []] }
        func trySpend(_ bucket: Int, _ tokens: Int) -> Bool {
            var list = spends[key]?[bucket] ?? []
            let index = list.firstIndex { $0.time > milliseconds } ?? list.count
            list.insert((milliseconds, buckets[bucket].units(tokens: tokens)), at: index)
            if Self.simulate(list, buckets[bucket]) {
                spends[key]?[bucket] = list
                return true
            }
            return false
        }
        guard trySpend(0, 1) else { return Verdict(hidden: true, rule: .messageRate) }
        guard let s = scalars else { return Verdict(hidden: false, rule: nil) }
        guard trySpend(1, s.count) else { return Verdict(hidden: true, rule: .characterRate) }
        let links = LinkCounter.count(s)
        if links > 0, !trySpend(2, links) { return Verdict(hidden: true, rule: .linkRate) }

        let window = texts.filter { abs($0.time - time) < config.repeatWindowSeconds }
        let own = window.filter { $0.sender == key && Self.isNearCopy(s, $0.scalars, config.nearCopyThreshold) }
        if own.count >= config.repeatedMessagePriorCopies { return Verdict(hidden: true, rule: .repeatedMessage) }
        if s.count >= config.crossUserMinLength {
            let others = Set(
                window.filter { $0.sender != key && Self.isNearCopy(s, $0.scalars, config.nearCopyThreshold) }.map(\.sender))
            if others.count >= config.crossUserOtherSenders { return Verdict(hidden: true, rule: .crossUserCopy) }
        }
        if s.count >= config.repeatedCharactersMinLength, Self.maxAutocorrelation(s) >= config.autocorrelationThreshold {
            return Verdict(hidden: true, rule: .repeatedCharacters)
        }
        return Verdict(hidden: false, rule: nil)
    }

    /// SPAM-FILTER §3 in its order: NFKD; drop combining marks (Mn, Mc, Me), format characters (Cf) and
    /// controls (Cc) other than newline and tab; case-fold (each scalar's lowercase mapping, as the filter
    /// decides); collapse runs of whitespace (Unicode White_Space) to one space; trim.
    public static func normalize(_ text: String) -> [UInt32] {
        var kept: [Unicode.Scalar] = []
        for scalar in text.decomposedStringWithCompatibilityMapping.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .nonspacingMark, .spacingMark, .enclosingMark, .format: continue
            case .control where scalar != "\n" && scalar != "\t": continue
            default: kept.append(scalar)
            }
        }
        let folded = kept.flatMap { $0.properties.lowercaseMapping.unicodeScalars }
        var out: [UInt32] = []
        for scalar in folded {
            if scalar.properties.isWhitespace {
                if let last = out.last, last != 0x20 { out.append(0x20) }
            } else {
                out.append(scalar.value)
            }
        }
        if out.last == 0x20 { out.removeLast() }
        return out
    }

    /// Starts full at the first spend, refills `rate·Δt` capped at capacity, subtracts each spend (exact units).
    static func simulate(_ list: [(time: Int64, cost: Int64)], _ scale: BucketScale) -> Bool {
        var level = scale.capacity
        var previous = list.first?.time ?? 0
        for spend in list {
            level = scale.refill(level, over: spend.time - previous) - spend.cost
            previous = spend.time
            if level < 0 { return false }
        }
        return true
    }

    static func isNearCopy(_ a: [UInt32], _ b: [UInt32], _ threshold: Double) -> Bool {
        let maxLength = max(a.count, b.count)
        if maxLength == 0 { return true }
        return Double(align(a, b)) / Double(maxLength) >= threshold
    }

    /// `similarity(a, b)` by the definition, in O(m·n).
    public static func similarity(_ a: [UInt32], _ b: [UInt32]) -> Double {
        let maxLength = max(a.count, b.count)
        if maxLength == 0 { return 1 }
        return Double(align(a, b)) / Double(maxLength)
    }

    /// The 3 fullest diagonals by direct counting over all pairs (ties: smaller |d|, then smaller d).
    public static func peaks(_ a: [UInt32], _ b: [UInt32]) -> [(d: Int, c: Int)] {
        let m = a.count
        let n = b.count
        guard m > 0, n > 0 else { return [] }
        var counts = [Int](repeating: 0, count: m + n - 1)
        for i in 0..<m {
            for j in 0..<n where a[i] == b[j] { counts[i - j + n - 1] += 1 }
        }
        func better(_ x: (d: Int, c: Int), _ y: (d: Int, c: Int)) -> Bool {
            if x.c != y.c { return x.c > y.c }
            if abs(x.d) != abs(y.d) { return abs(x.d) < abs(y.d) }
            return x.d < y.d
        }
        var best: [(d: Int, c: Int)] = []
        for _ in 0..<min(3, counts.count) {
            var pick: (d: Int, c: Int)?
            for (index, c) in counts.enumerated() {
                let candidate = (d: index - (n - 1), c: c)
                if best.contains(where: { $0.d == candidate.d }) { continue }
                if let current = pick, !better(candidate, current) { continue }
                pick = candidate
            }
            if let pick { best.append(pick) }
        }
        return best
    }

    /// LCS restricted to matched pairs on the 3 peak diagonals, by the textbook O(m·n) table.
    public static func align(_ a: [UInt32], _ b: [UInt32]) -> Int {
        let m = a.count
        let n = b.count
        guard m > 0, n > 0 else { return 0 }
        let diagonals = peaks(a, b).map(\.d)
        var previous = [Int](repeating: 0, count: n + 1)
        var current = [Int](repeating: 0, count: n + 1)
        for i in 1...m {
            current[0] = 0
            for j in 1...n {
                var best = max(previous[j], current[j - 1])
                if a[i - 1] == b[j - 1], diagonals.contains((i - 1) - (j - 1)) { best = max(best, previous[j - 1] + 1) }
                current[j] = best
            }
            swap(&previous, &current)
        }
        return previous[n]
    }

    /// `max_k A(k)` for `k = 1 … n/2`.
    public static func maxAutocorrelation(_ s: [UInt32]) -> Double {
        let n = s.count
        guard n >= 2 else { return 0 }
        var best = 0.0
        for k in 1...(n / 2) {
            var same = 0
            for i in 0..<(n - k) where s[i] == s[i + k] { same += 1 }
            best = max(best, Double(same) / Double(n - k))
        }
        return best
    }
}
