/// The most recent judged texts (a ring of `capacity` slots) with an inverted bigram index.
///
/// Why bigrams and not trigrams: the pre-filter must never change a verdict (§5), and a trigram filter
/// can. An alignment may switch between its 3 diagonals as often as it likes, so a pair with
/// similarity ≥ 0.80 can share no trigram at all (`"abxcdef"` / `"abcdyef"`: similarity 6/7, runs of
/// two). Bigrams are safe with a counting bound: if `align ≥ k`, the alignment's matched pairs form at
/// most `(m − k) + (n − k) + 1` runs of consecutive pairs on one diagonal, each run of length L gives
/// L − 1 shared positional bigrams, so the bigram multisets of the two texts share at least
/// `3k − m − n − 1` bigrams. A stored text whose shared-bigram count is below that for
/// `k = ⌈threshold·max(m, n)⌉` cannot be a near-copy and is skipped.
struct TextStore: Sendable {
    struct Entry: Sendable {
        var sequence: UInt64
        var senderKey: String
        var messageID: String
        var time: Double
        /// Normalised length (kept even when the scalars are not, see `AdmissionPolicy.storeScalars`).
        var length: Int
        var scalars: [UInt32]
        /// Distinct bigrams with their counts, sorted by bigram.
        var bigrams: [(gram: UInt64, count: Int32)]
    }

    let capacity: Int
    private(set) var slots: [Entry?]
    private var next = 0
    private var sequence: UInt64 = 0
    private var index: BigramIndex
    /// Per-slot copies of the fields the scan reads first, so rejecting a slot touches no strings.
    private var times: [Double]
    private var lengths: [Int]
    private var sequences: [UInt64]
    /// Per-slot shared-bigram requirement during a query (``unseen`` / ``rejected`` markers otherwise).
    private var needed: [Int32]
    /// Reused per query (no allocation per judgment).
    private var scratchLists: [(count: Int32, length: Int, position: Int)] = []
    private var scratchAdmitted: [Int32] = []
    /// Shared-bigram accumulator per slot, and the slots touched by the current query.
    private var accumulator: [Int32]
    private var touched: [Int32] = []

    init(capacity: Int) {
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
        accumulator = Array(repeating: 0, count: capacity)
        index = BigramIndex(minimumCapacity: 256)
        times = Array(repeating: 0, count: capacity)
        lengths = Array(repeating: 0, count: capacity)
        sequences = Array(repeating: 0, count: capacity)
        needed = Array(repeating: Int32.min, count: capacity)
    }

    var count: Int { slots.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }

    /// Distinct bigrams of `s` with counts, sorted.
    static func bigrams(of s: [UInt32]) -> [(gram: UInt64, count: Int32)] {
        guard s.count >= 2 else { return [] }
        var grams = [UInt64]()
        grams.reserveCapacity(s.count - 1)
        for i in 0..<(s.count - 1) { grams.append(UInt64(s[i]) << 32 | UInt64(s[i + 1])) }
        grams.sort()
        var out: [(gram: UInt64, count: Int32)] = []
        out.reserveCapacity(grams.count)
        for g in grams {
            if let last = out.last, last.gram == g {
                out[out.count - 1].count += 1
            } else {
                out.append((g, 1))
            }
        }
        return out
    }

    /// Adds an entry, evicting the oldest when full.
    mutating func insert(
        senderKey: String, messageID: String, time: Double, length: Int, scalars: [UInt32], bigrams: [(gram: UInt64, count: Int32)]
    ) {
        let slot = next
        next = (next + 1) % capacity
        if let old = slots[slot] { unindex(old, slot: slot) }
        sequence += 1
        let entry = Entry(
            sequence: sequence, senderKey: senderKey, messageID: messageID, time: time, length: length, scalars: scalars,
            bigrams: bigrams)
        for (gram, count) in bigrams {
            index.append(BigramIndex.Posting(slot: Int32(slot), count: count), for: gram)
        }
        slots[slot] = entry
        times[slot] = time
        lengths[slot] = length
        sequences[slot] = sequence
    }

    private mutating func unindex(_ entry: Entry, slot: Int) {
        for (gram, _) in entry.bigrams { index.remove(slot: Int32(slot), for: gram) }
    }

    /// Calls `body(slot, sequence)` for every stored text that passes `admit` and shares at least as
    /// many bigrams with the candidate as `admit` requires for it (exact multiset intersection).
    ///
    /// `required` is the smallest requirement `admit` can return. Prefix filtering: a text sharing
    /// ≥ `required` of the candidate's `total` bigram occurrences must share at least one of any subset
    /// of the candidate's bigrams whose occurrences add up to `total − required + 1`. So only the
    /// posting lists of the rarest bigrams can admit a stored text (checked once with `admit`: window,
    /// length); the remaining, common bigrams' lists only add to the counts of texts already admitted.
    mutating func forEachSharingBigrams(
        _ bigrams: [(gram: UInt64, count: Int32)], total: Int, required: Int,
        admit: (_ time: Double, _ length: Int) -> Int?, _ body: (_ slot: Int, _ sequence: UInt64) -> Void
    ) {
        guard required >= 1 else { return }
        var lists = scratchLists
        lists.removeAll(keepingCapacity: true)
        var admitted = scratchAdmitted
        admitted.removeAll(keepingCapacity: true)
        defer {
            scratchLists = lists
            scratchAdmitted = admitted
        }
        var mass = 0
        for (gram, count) in bigrams {
            if let position = index.position(of: gram) {
                lists.append((count, index.postingCount(at: position), position))
            } else {
                mass += Int(count)  // occurrences no stored text shares: in the prefix for free
            }
        }
        lists.sort { $0.length < $1.length }
        let prefixMass = total - required + 1
        accumulator.withUnsafeMutableBufferPointer { shared in
            needed.withUnsafeMutableBufferPointer { needed in
                // Phase 1: the rarest lists admit texts (and count toward them).
                var next = 0
                while next < lists.count, mass < prefixMass {
                    let (count, _, position) = lists[next]
                    next += 1
                    mass += Int(count)
                    index.withPostings(at: position) { postings in
                        for posting in postings {
                            let slot = Int(posting.slot)
                            if needed[slot] == Self.unseen {
                                touched.append(posting.slot)
                                if let requirement = admit(times[slot], lengths[slot]) {
                                    needed[slot] = Int32(clamping: requirement)
                                    admitted.append(posting.slot)
                                } else {
                                    needed[slot] = Self.rejected
                                    continue
                                }
                            }
                            if needed[slot] != Self.rejected { shared[slot] += min(count, posting.count) }
                        }
                    }
                }
                // Phase 2: complete the counts of the admitted texts, by walking the remaining (common)
                // lists or, when few texts were admitted, by merging their bigram lists directly.
                if !admitted.isEmpty {
                    let remaining = lists[next...].reduce(0) { $0 + $1.length }
                    if admitted.count * 2 * bigrams.count < remaining {
                        for slot in admitted {
                            shared[Int(slot)] = Int32(clamping: Self.shared(bigrams, slots[Int(slot)]?.bigrams ?? []))
                        }
                    } else {
                        for (count, _, position) in lists[next...] {
                            index.withPostings(at: position) { postings in
                                for posting in postings where needed[Int(posting.slot)] > Self.rejected {
                                    shared[Int(posting.slot)] += min(count, posting.count)
                                }
                            }
                        }
                    }
                    for slot in admitted where shared[Int(slot)] >= needed[Int(slot)] {
                        body(Int(slot), sequences[Int(slot)])
                    }
                }
                for slot in touched {
                    needed[Int(slot)] = Self.unseen
                    shared[Int(slot)] = 0
                }
            }
        }
        touched.removeAll(keepingCapacity: true)
    }

    private static let unseen = Int32.min
    private static let rejected = Int32.min + 1

    /// Multiset intersection size of two sorted bigram lists.
    static func shared(_ a: [(gram: UInt64, count: Int32)], _ b: [(gram: UInt64, count: Int32)]) -> Int {
        a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in shared(a, b) } }
    }

    private static func shared(
        _ a: UnsafeBufferPointer<(gram: UInt64, count: Int32)>, _ b: UnsafeBufferPointer<(gram: UInt64, count: Int32)>
    ) -> Int {
        var i = 0
        var j = 0
        var total = 0
        while i < a.count, j < b.count {
            let x = a[i].gram
            let y = b[j].gram
            if x == y {
                total += Int(min(a[i].count, b[j].count))
                i += 1
                j += 1
            } else if x < y {
                i += 1
            } else {
                j += 1
            }
        }
        return total
    }

    /// Slots from newest to oldest.
    func slotsNewestFirst() -> [Int] {
        var out: [Int] = []
        out.reserveCapacity(capacity)
        var slot = next
        for _ in 0..<capacity {
            slot = (slot - 1 + capacity) % capacity
            if slots[slot] != nil { out.append(slot) }
        }
        return out
    }

    mutating func removeAll() {
        slots = Array(repeating: nil, count: capacity)
        index.removeAll()
        next = 0
    }

    /// Index size, for stats and the memory bound.
    var indexedGrams: Int { index.count }
}
