/// The spam filter (shared/spec/SPAM-FILTER.md): six rules over a neutral ``SpamCandidate``, per-sender
/// timestamp-clamped token buckets, a store of recent texts with a bigram index, and a verdict cache.
///
/// A plain value type with mutating methods, meant to be owned by one actor (the bridge coordinator)
/// as a stored property. It never reads the clock: every call takes `now` (Unix seconds).
///
/// Decisions where the spec is silent (a festival moderator's expectations):
/// - "Within the window" means `|t_stored − t| < repeat window` on clamped message timestamps.
/// - Every judged text is stored, whichever rule hid it (a copy swarm keeps counting); attachments are not.
/// - Shadow mode spends and stores exactly as live mode does, so its log shows what live mode would hide.
/// - Toggling the filter resets every sender's budgets (buckets); stored texts and cached verdicts stay.
///   While off, nothing is judged, counted, stored or cached.
/// - An evicted sender loses its buckets only; its texts stay in the store for the similarity rules.
/// - A re-delivered message id returns the cached verdict as long as it is among the last
///   ``Limits/verdictCacheSize`` judged ids.
public struct AdmissionPolicy: Sendable {
    public enum Limits {
        /// Re-deliveries (other relays, other mesh links, gossip sync) come within minutes; 16,384 ids
        /// cover well over 10 min of the busiest channel and cost about 6.5 MB (a ring slot holds the id and
        /// its ~270-byte verdict; the id table adds ~1.4 MB).
        public static let verdictCacheSize = 16_384
        /// The shared-bigram requirement is memoised for lengths below this (longer texts compute it).
        static let fullScanMemoLength = 4096
        /// The repeated-characters rule looks its mismatch allowances up for texts up to this long (16 KB of
        /// table, more than the default character capacity of 1,200 admits); a longer text settles them
        /// shift by shift (``Autocorrelation/firstReaching(_:threshold:distinctBigrams:)``, same result).
        static let allowanceMemoLength = 4096
        /// Senders reserved for at init: the default `max_tracked_senders` (4,096) plus the one a new sender
        /// briefly adds before eviction, so neither the states (~340 bytes each, touched in order as senders
        /// arrive) nor their index (~360 KB) is moved or rehashed under the default cap; a larger cap grows
        /// them on demand.
        static let reservedSenders = 4097
    }

    /// Counters for the periodic stats line.
    public struct Stats: Sendable, Equatable {
        public var trackedSenders = 0
        public var storedTexts = 0
        public var cachedVerdicts = 0
        public var senderEvictions = 0
        public var judged = 0
        public var hidden = 0
    }

    struct SenderState: Sendable {
        enum Bucket { case message, characters, links }

        var key: TableKey
        var message: TokenBucketSchedule
        var characters: TokenBucketSchedule
        var links: TokenBucketSchedule
        var lastActive: UInt64

        /// Spends `cost` whole tokens from one bucket in place at `time` (ms) and reads its scale in the same
        /// access (no copy of the state).
        mutating func spend(_ bucket: Bucket, _ cost: Int, at time: Int64) -> (accepted: Bool, figures: BucketFigures) {
            switch bucket {
            case .message: Self.spend(&message, cost, at: time)
            case .characters: Self.spend(&characters, cost, at: time)
            case .links: Self.spend(&links, cost, at: time)
            }
        }

        @inline(__always)
        private static func spend(
            _ schedule: inout TokenBucketSchedule, _ cost: Int, at time: Int64
        ) -> (accepted: Bool, figures: BucketFigures) {
            let outcome = schedule.spend(cost, at: time)
            return (outcome.accepted, BucketFigures(levelUnits: outcome.level, cost: cost, scale: schedule.scale))
        }

        /// Marks the sender active and folds spends older than the clamp window into checkpoints.
        mutating func touch(activity: UInt64, horizon: Int64) -> Bool {
            lastActive = activity
            message.prune(before: horizon)
            characters.prune(before: horizon)
            links.prune(before: horizon)
            return true
        }
    }

    /// One cached verdict and the id it is cached under (to drop that id when its ring slot is reused).
    struct CachedVerdict: Sendable {
        var key: TableKey
        var verdict: SpamVerdict
    }

    public private(set) var config: SpamFilterConfig
    /// Keys whose messages are never judged: the bridge's own identities (its echoes).
    public var exemptSenders: Set<String> {
        didSet { exemptKeys = Set(exemptSenders.map(TableKey.init)) }
    }
    /// ``exemptSenders`` as table keys (the form every judged sender key is converted to once).
    private var exemptKeys: Set<TableKey>
    /// Tracked senders, densely (a new sender is appended; an evicted one is replaced by the last), so
    /// their states share pages instead of spreading over a sparse hash table.
    private var senders: [SenderState] = []
    /// Sender key → position in ``senders``.
    private var senderSlots: [TableKey: Int32] = [:]
    private var activity: UInt64 = 0
    private var store: TextStore
    /// Cached message id → its slot in ``verdictRing``. The verdicts themselves (a few hundred bytes each)
    /// are written once into the ring and never moved: the table holds small entries and rehashes cheaply.
    private var verdicts: [TableKey: Int32] = [:]
    /// The last ``Limits/verdictCacheSize`` judged ids with their verdicts; grows to the limit, then
    /// overwrites its oldest slot (`verdictNext`).
    private var verdictRing: [CachedVerdict] = []
    private var verdictNext = 0
    /// The three buckets' exact scales (``BucketScale``), derived once from the configuration.
    private let scales: (message: BucketScale, characters: BucketScale, links: BucketScale)
    /// `timestamp_clamp_seconds` in milliseconds.
    private let clampMilliseconds: Int64
    private var comparator = Similarity.Comparator()
    /// Whether `comparator` holds the text under judgment: loaded on its first comparison, since most
    /// texts meet no candidate that the scans compare.
    private var comparatorLoaded = false
    private var fullScanMemo: [Int32]
    /// `Similarity.minimumAlignment(maxLength: M, threshold:)` for every M computed so far (grows on demand).
    private var minimumAlignments: [Int32] = []
    /// `Autocorrelation.allowedMismatches(total: t, threshold:)` for every t computed so far (grows on
    /// demand up to ``Limits/allowanceMemoLength``; the threshold never changes after init).
    private var autocorrelationAllowances: [Int32] = []
    public private(set) var stats = Stats()

    public init(config: SpamFilterConfig, exemptSenders: Set<String> = []) {
        self.config = config
        self.exemptSenders = exemptSenders
        exemptKeys = Set(exemptSenders.map(TableKey.init))
        store = TextStore(capacity: config.storedTexts)
        scales = (BucketScale(config.messageBucket), BucketScale(config.characterBucket), BucketScale(config.linkBucket))
        clampMilliseconds = BucketScale.milliseconds(config.timestampClampSeconds)
        // The verdict ring fills to its limit within minutes of traffic and then stays full: reserved once
        // (its pages are touched in order as it fills) instead of moving its ~5 MB as it grows. The id
        // table grows on demand: reserved, its 1.3 MB of keys would be touched at random from the start
        // (measured slower on `bench ingest`), and rehashing its small entries is cheap.
        verdictRing.reserveCapacity(Limits.verdictCacheSize)
        senders.reserveCapacity(min(config.maxTrackedSenders + 1, Limits.reservedSenders))
        senderSlots.reserveCapacity(min(config.maxTrackedSenders + 1, Limits.reservedSenders))
        fullScanMemo = Array(repeating: Int32.min, count: Limits.fullScanMemoLength)
    }

    // MARK: Operator controls

    public var isEnabled: Bool { config.enabled }
    public var isShadowMode: Bool { config.shadowMode }

    /// Turns the filter on or off; either way every sender starts again with a full budget.
    public mutating func setEnabled(_ enabled: Bool) {
        config.enabled = enabled
        senders.removeAll(keepingCapacity: true)
        senderSlots.removeAll(keepingCapacity: true)
    }

    public mutating func setShadowMode(_ shadow: Bool) { config.shadowMode = shadow }

    /// Forgets all history: stored texts, senders and cached verdicts.
    public mutating func wipe() {
        senders.removeAll(keepingCapacity: true)
        senderSlots.removeAll(keepingCapacity: true)
        store.removeAll()
        verdicts.removeAll(keepingCapacity: true)
        verdictRing.removeAll(keepingCapacity: true)
        verdictNext = 0
    }

    /// The cached verdict for a message id, without counting anything.
    public func cachedVerdict(_ messageID: String) -> SpamVerdict? {
        verdicts[TableKey(messageID)].map { verdictRing[Int($0)].verdict }
    }

    /// Whether the message with this id was hidden (reads the cache only; false when unknown).
    public func wasHidden(_ messageID: String) -> Bool { cachedVerdict(messageID)?.isHidden ?? false }

    public var currentStats: Stats {
        var s = stats
        s.trackedSenders = senders.count
        s.storedTexts = store.count
        s.cachedVerdicts = verdicts.count
        return s
    }

    // MARK: Judging

    /// Judges one message once: a repeated message id returns the cached verdict and spends nothing.
    public mutating func judge(_ candidate: SpamCandidate, now: Double) -> SpamVerdict {
        let sender = TableKey(candidate.senderKey)
        if !exemptKeys.isEmpty, exemptKeys.contains(sender) {
            return SpamVerdict(outcome: .exempt, rule: nil, figures: SpamFigures(), fromCache: false)
        }
        guard config.enabled else {
            return SpamVerdict(outcome: .disabled, rule: nil, figures: SpamFigures(), fromCache: false)
        }
        let id = TableKey(candidate.messageID)
        if let slot = verdicts[id] {
            var cached = verdictRing[Int(slot)].verdict
            cached.fromCache = true
            return cached
        }
        let evaluation = evaluate(candidate, sender: sender, now: now, explaining: false)
        let rule = evaluation.fired.first
        let outcome: SpamVerdict.Outcome = rule == nil ? .accepted : (config.shadowMode ? .wouldHide : .hidden)
        let verdict = SpamVerdict(outcome: outcome, rule: rule, figures: evaluation.figures, fromCache: false)
        remember(id, verdict)
        stats.judged += 1
        if rule != nil { stats.hidden += 1 }
        return verdict
    }

    /// What every rule says about `candidate` against the current history, without changing anything:
    /// each rule's figures are computed even when an earlier rule fires, and `fired` lists every rule
    /// that would fire on its own (the verdict is the first).
    public func explain(_ candidate: SpamCandidate, now: Double) -> (figures: SpamFigures, fired: [SpamRule]) {
        var copy = self
        let evaluation = copy.evaluate(candidate, sender: TableKey(candidate.senderKey), now: now, explaining: true)
        return (evaluation.figures, evaluation.fired)
    }

    /// Caches a verdict for an id not in the cache; the ring grows to the limit, then overwrites its
    /// oldest slot and drops that slot's id (O(1) eviction).
    private mutating func remember(_ id: TableKey, _ verdict: SpamVerdict) {
        if verdictRing.count < Limits.verdictCacheSize {
            verdicts[id] = Int32(verdictRing.count)
            verdictRing.append(CachedVerdict(key: id, verdict: verdict))
        } else {
            verdicts[verdictRing[verdictNext].key] = nil
            verdicts[id] = Int32(verdictNext)
            verdictRing[verdictNext] = CachedVerdict(key: id, verdict: verdict)
            verdictNext = (verdictNext + 1) % Limits.verdictCacheSize
        }
    }

    /// Smallest alignment that reaches the near-copy threshold for texts of maximum length `maxLength`.
    @inline(__always)
    private func minimumAlignment(_ maxLength: Int) -> Int {
        maxLength < minimumAlignments.count
            ? Int(minimumAlignments[maxLength])
            : Similarity.minimumAlignment(maxLength: maxLength, threshold: config.nearCopyThreshold)
    }

    /// Extends the memo of ``minimumAlignment(_:)`` to every length up to `length` (bounded by the memo limit).
    private mutating func memoiseMinimumAlignments(upTo length: Int) {
        let target = min(length, Limits.fullScanMemoLength - 1)
        while minimumAlignments.count <= target {
            minimumAlignments.append(
                Int32(Similarity.minimumAlignment(maxLength: minimumAlignments.count, threshold: config.nearCopyThreshold)))
        }
    }

    /// The message timestamp in whole milliseconds (``BucketScale/milliseconds(_:)``), clamped to
    /// `[now − clamp window, now]`; a non-finite timestamp counts as `now`.
    private func clamp(_ timestamp: Double, now: Int64) -> Int64 {
        guard timestamp.isFinite else { return now }
        return min(max(BucketScale.milliseconds(timestamp), now - clampMilliseconds), now)
    }

    /// Marks the sender active (tracking it when new) and returns its position in ``senders``, valid
    /// until the next insertion or removal: the spends of this evaluation use it without hashing the key.
    private mutating func touchSender(_ key: TableKey, now: Int64) -> Int {
        activity += 1
        let horizon = now - clampMilliseconds
        let activity = self.activity
        if let slot = senderSlots[key] {
            _ = senders[Int(slot)].touch(activity: activity, horizon: horizon)
            return Int(slot)
        }
        senderSlots[key] = Int32(senders.count)
        senders.append(SenderState(
            key: key,
            message: TokenBucketSchedule(scales.message),
            characters: TokenBucketSchedule(scales.characters),
            links: TokenBucketSchedule(scales.links),
            lastActive: activity
        ))
        if senders.count > config.maxTrackedSenders { evictSenders(keeping: key) }
        guard let slot = senderSlots[key] else { preconditionFailure("a touched sender is tracked") }
        return Int(slot)
    }

    /// Evicts the least recently active senders down to 3/4 of the cap (amortised O(log n) per new sender).
    private mutating func evictSenders(keeping key: TableKey) {
        let target = config.maxTrackedSenders * 3 / 4
        let ordered = senders.map { ($0.key, $0.lastActive) }.sorted { $0.1 < $1.1 }
        var excess = senders.count - target
        for (candidate, _) in ordered where excess > 0 && candidate != key {
            removeSender(candidate)
            excess -= 1
            stats.senderEvictions += 1
        }
    }

    /// Stops tracking a sender: the last state takes its position (which order the states are in
    /// does not matter; eviction orders by `lastActive`, which is distinct per sender).
    private mutating func removeSender(_ key: TableKey) {
        guard let removed = senderSlots.removeValue(forKey: key) else { return }
        let slot = Int(removed)
        let last = senders.count - 1
        if slot != last {
            senders.swapAt(slot, last)
            senderSlots[senders[slot].key] = removed
        }
        senders.removeLast()
    }

    struct Evaluation: Sendable {
        var figures = SpamFigures()
        var fired: [SpamRule] = []
    }

    /// `sender` is `TableKey(candidate.senderKey)`, converted once by the caller.
    private mutating func evaluate(_ candidate: SpamCandidate, sender senderKey: TableKey, now: Double, explaining: Bool) -> Evaluation {
        var result = Evaluation()
        let key = candidate.senderKey
        let nowMilliseconds = BucketScale.milliseconds(now)
        let milliseconds = clamp(candidate.timestamp, now: nowMilliseconds)
        // The text rules take the same clamped instant in seconds (a whole number of milliseconds).
        let time = Double(milliseconds) / 1_000
        result.figures.clampedTimestamp = time
        let sender = touchSender(senderKey, now: nowMilliseconds)
        func fire(_ rule: SpamRule) -> Bool {
            result.fired.append(rule)
            return !explaining
        }

        // 1. Message rate.
        let message = senders[sender].spend(.message, 1, at: milliseconds)
        result.figures.messageBucket = message.figures
        if !message.accepted, fire(.messageRate) {
            if case .text(let text) = candidate.content { storeText(text, key, candidate.messageID, time) }
            return result
        }
        guard case .text(let text) = candidate.content else { return result }
        let scalars = TextNormalizer.normalize(text)
        let bigrams = TextStore.bigrams(of: scalars)
        result.figures.normalizedLength = scalars.count
        defer { if !explaining { storeScalars(scalars, bigrams, key, candidate.messageID, time) } }

        // 2. Character rate.
        let characters = senders[sender].spend(.characters, scalars.count, at: milliseconds)
        result.figures.characterBucket = characters.figures
        if !characters.accepted, fire(.characterRate) { return result }

        // 3. Link rate.
        let links = LinkCounter.count(scalars)
        result.figures.links = links
        if links > 0 {
            let spent = senders[sender].spend(.links, links, at: milliseconds)
            result.figures.linkBucket = spent.figures
            if !spent.accepted, fire(.linkRate) { return result }
        }

        // 4 and 5. Near-copies.
        let candidates = similarityCandidates(scalars, bigrams, time: time)
        comparatorLoaded = false
        let repeated = scanOwn(candidates, scalars, key: key, exhaustive: explaining)
        result.figures.repeated = repeated
        if repeated.count >= config.repeatedMessagePriorCopies, fire(.repeatedMessage) { return result }
        if scalars.count >= config.crossUserMinLength {
            let cross = scanOthers(candidates, scalars, key: key, exhaustive: explaining)
            result.figures.crossUser = cross
            if cross.count >= config.crossUserOtherSenders, fire(.crossUserCopy) { return result }
        }

        // 6. Repeated characters.
        if scalars.count >= config.repeatedCharactersMinLength {
            if explaining {
                let maximum = Autocorrelation.maximum(scalars)
                result.figures.autocorrelation = AutocorrelationFigures(value: maximum.value, shift: maximum.shift, length: scalars.count)
                if maximum.value >= config.autocorrelationThreshold { _ = fire(.repeatedCharacters) }
            } else if let hit = firstRepeatingShift(scalars, distinctBigrams: bigrams.count) {
                result.figures.autocorrelation = AutocorrelationFigures(value: hit.value, shift: hit.shift, length: scalars.count)
                _ = fire(.repeatedCharacters)
            }
        }
        return result
    }

    private mutating func storeText(_ text: String, _ key: String, _ id: String, _ time: Double) {
        let scalars = TextNormalizer.normalize(text)
        storeScalars(scalars, TextStore.bigrams(of: scalars), key, id, time)
    }

    /// Stores a judged text. A text so long that no message passing the character rule could be its
    /// near-copy (`threshold·n > character capacity`, while a judged message has `m ≤ capacity`) keeps
    /// its slot and length but not its scalars: a 64 KB spam text then costs a few bytes, and the
    /// ring evicts exactly as the reference does.
    private mutating func storeScalars(
        _ scalars: [UInt32], _ bigrams: [(gram: UInt64, count: Int32)], _ key: String, _ id: String, _ time: Double
    ) {
        let unreachable = Double(scalars.count) * config.nearCopyThreshold > scales.characters.capacityTokens
        store.insert(
            senderKey: key, messageID: id, time: time, length: scalars.count, scalars: unreachable ? [] : scalars,
            bigrams: unreachable ? [] : bigrams)
    }

    /// ``Autocorrelation/firstReaching(_:threshold:distinctBigrams:)`` with the mismatch allowances looked up (memoised).
    private mutating func firstRepeatingShift(_ scalars: [UInt32], distinctBigrams: Int) -> (value: Double, shift: Int)? {
        let threshold = config.autocorrelationThreshold
        guard scalars.count <= Limits.allowanceMemoLength else {
            return Autocorrelation.firstReaching(scalars, threshold: threshold, distinctBigrams: distinctBigrams)
        }
        while autocorrelationAllowances.count < scalars.count {
            let total = autocorrelationAllowances.count
            autocorrelationAllowances.append(Int32(Autocorrelation.allowedMismatches(total: total, threshold: threshold)))
        }
        return Autocorrelation.firstReaching(scalars, allowances: autocorrelationAllowances, distinctBigrams: distinctBigrams)
    }

    // MARK: Similarity scans

    /// The fewest bigrams a near-copy of a text of length `m` must share with it, over every stored
    /// length `n` that can still reach the threshold: `min_n (3k − m − n − 1)` with `k = ⌈threshold·max(m, n)⌉`.
    /// At most 0 means some near-copy may share no bigram: then every stored text is a candidate.
    private mutating func requiredSharedBigrams(_ m: Int) -> Int {
        let threshold = config.nearCopyThreshold
        let upper = Int(Double(m) / threshold) + 2
        memoiseMinimumAlignments(upTo: upper)
        if m < Limits.fullScanMemoLength, fullScanMemo[m] != Int32.min { return Int(fullScanMemo[m]) }
        var result = Int.max
        for n in 0...upper {
            let maxLength = max(m, n)
            let k = minimumAlignment(maxLength)
            guard k <= min(m, n) || maxLength == 0 else { continue }
            result = min(result, 3 * k - m - n - 1)
        }
        if result == Int.max { result = 0 }
        if m < Limits.fullScanMemoLength { fullScanMemo[m] = Int32(clamping: result) }
        return result
    }

    /// Stored slots in the window that pass the length and bigram bounds, newest first.
    ///
    /// The length bound `k(max(m, n)) ≤ min(m, n)` (`k` = ``minimumAlignment(_:)``) holds exactly for `n` in
    /// one range: for `n ≤ m` it reads `k(m) ≤ n`; for `n > m` it reads `k(n) ≤ m`, and `k` never decreases
    /// (`k(M)` is the least `k` with `k / M ≥ θ`, and a rounded quotient never grows with its divisor), so
    /// it holds up to the largest `n` with `m / n ≥ θ` and for no `n` beyond.
    private mutating func similarityCandidates(_ scalars: [UInt32], _ bigrams: [(gram: UInt64, count: Int32)], time: Double) -> [Int] {
        let m = scalars.count
        let threshold = config.nearCopyThreshold
        let window = config.repeatWindowSeconds
        var out: [Int] = []
        let required = requiredSharedBigrams(m)
        // The largest n with m / n ≥ θ: near m / θ, then exact by stepping (the test is monotone in n).
        var longest = max(m, Int(Double(m) / threshold))
        while longest > m, !Similarity.reaches(m, of: longest, threshold: threshold) { longest -= 1 }
        while Similarity.reaches(m, of: longest + 1, threshold: threshold) { longest += 1 }
        let band = minimumAlignment(m)...longest
        if required <= 0 {
            store.forEachInWindow(around: time, window: window, lengths: band) { out.append($0) }
            return out
        }
        let table = minimumAlignments
        store.forEachSharingBigrams(
            bigrams, total: max(m - 1, 0), required: required, around: time, window: window, lengths: band,
            requirement: { n in
                let maxLength = max(m, n)
                let k = maxLength < table.count
                    ? Int(table[maxLength]) : Similarity.minimumAlignment(maxLength: maxLength, threshold: threshold)
                return 3 * k - m - n - 1
            }
        ) { slot in
            out.append(slot)
        }
        return out
    }

    /// Similarity of the loaded candidate to a stored text, skipping the alignment when the bound rules it out.
    private mutating func compare(_ b: [UInt32], _ a: [UInt32], alignments: inout Int, alignmentBudget: Int?) -> (Double, Bool)? {
        let maxLength = max(a.count, b.count)
        if maxLength == 0 { return (1, true) }
        if !comparatorLoaded {
            comparator.load(a)
            comparatorLoaded = true
        }
        // Bigram matches on the 3 best diagonals first (``Similarity/Comparator/diagonalBigramPeaks(against:)``):
        // a pair below `3k − m − n − 1` cannot align k scalars, and this costs a fraction of the scalar count.
        let requiredBigrams = 3 * minimumAlignment(maxLength) - a.count - b.count - 1
        if requiredBigrams > 0, comparator.bigramCheckPays(), comparator.diagonalBigramPeaks(against: b) < requiredBigrams {
            return (0, false)
        }
        // The 3 fullest diagonals in a tuple: no allocation unless the bound lets the alignment run.
        let top = comparator.topDiagonals(against: b)
        let sum = (top.filled > 0 ? top.1.c : 0) + (top.filled > 1 ? top.2.c : 0) + (top.filled > 2 ? top.3.c : 0)
        guard Similarity.reaches(sum, of: maxLength, threshold: config.nearCopyThreshold) else { return (0, false) }
        if let alignmentBudget, alignments >= alignmentBudget { return nil }
        alignments += 1
        let shifts = Array([top.1.d, top.2.d, top.3.d].prefix(top.filled))
        let align = comparator.align(against: b, shifts: shifts, required: minimumAlignment(maxLength))
        let near = Similarity.reaches(align, of: maxLength, threshold: config.nearCopyThreshold)
        return (Double(align) / Double(maxLength), near)
    }

    private mutating func scanOwn(_ slots: [Int], _ scalars: [UInt32], key: String, exhaustive: Bool) -> CopyFigures {
        var figures = CopyFigures(count: 0, bestSimilarity: 0, matchedMessageID: nil, comparisons: 0, alignments: 0, capped: false)
        for slot in slots {
            guard let entry = store.slots[slot], entry.senderKey == key else { continue }
            figures.comparisons += 1
            guard let (similarity, near) = compare(entry.scalars, scalars, alignments: &figures.alignments, alignmentBudget: nil),
                near
            else { continue }
            figures.count += 1
            if similarity > figures.bestSimilarity || figures.matchedMessageID == nil {
                figures.bestSimilarity = similarity
                figures.matchedMessageID = entry.messageID
            }
            if !exhaustive, figures.count >= config.repeatedMessagePriorCopies { break }
        }
        return figures
    }

    private mutating func scanOthers(_ slots: [Int], _ scalars: [UInt32], key: String, exhaustive: Bool) -> CopyFigures {
        var figures = CopyFigures(count: 0, bestSimilarity: 0, matchedMessageID: nil, comparisons: 0, alignments: 0, capped: false)
        var counted: Set<String> = []
        for slot in slots {
            guard let entry = store.slots[slot], entry.senderKey != key, !counted.contains(entry.senderKey) else { continue }
            if !exhaustive, figures.comparisons >= config.crossUserScanMaxComparisons {
                figures.capped = true
                break
            }
            figures.comparisons += 1
            guard
                let (similarity, near) = compare(
                    entry.scalars, scalars, alignments: &figures.alignments,
                    alignmentBudget: exhaustive ? nil : config.crossUserScanMaxAlignments)
            else {
                figures.capped = true
                break
            }
            guard near else { continue }
            counted.insert(entry.senderKey)
            figures.count = counted.count
            if similarity > figures.bestSimilarity || figures.matchedMessageID == nil {
                figures.bestSimilarity = similarity
                figures.matchedMessageID = entry.messageID
            }
            if !exhaustive, figures.count >= config.crossUserOtherSenders { break }
        }
        return figures
    }
}
