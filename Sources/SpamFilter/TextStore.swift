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
        /// Distinct bigrams with their counts, in order of first occurrence.
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
    /// Bit-sliced shared-bigram counters of the current query, all zero between queries (reused).
    private var scratchCounters: [UInt64] = []
    /// Slots that passed `admit` in the current query (bitset) and their requirements (reused, cleared after).
    private var scratchAdmitted: [UInt64] = []
    private var scratchRequirements: [Int] = []

    init(capacity: Int) {
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
        index = BigramIndex(slots: capacity, minimumCapacity: 256)
        times = Array(repeating: 0, count: capacity)
        lengths = Array(repeating: 0, count: capacity)
    }

    var count: Int { slots.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }

    /// Distinct bigrams of `s` with counts, in order of first occurrence (nothing downstream needs them
    /// sorted: the index and the scan are order-free). Counted through a small open-addressing table.
    static func bigrams(of s: [UInt32]) -> [(gram: UInt64, count: Int32)] {
        guard s.count >= 2 else { return [] }
        let n = s.count - 1
        var size = 16
        while size < n * 2 { size <<= 1 }
        let mask = size - 1
        // Table cell → index into the result (−1: empty), so no gram value needs to mark an empty cell. The
        // table is scratch (on the stack when small) and the result is written in place: at most `n` grams.
        return withUnsafeTemporaryAllocation(of: Int32.self, capacity: size) { cells in
            cells.initialize(repeating: -1)
            // Filled in place then cut to length (cheaper than the unspecialised `init(unsafeUninitializedCapacity:)`).
            var result = [(gram: UInt64, count: Int32)](repeating: (0, 0), count: n)
            let distinct = result.withUnsafeMutableBufferPointer { out -> Int in
                s.withUnsafeBufferPointer { s -> Int in
                    var found = 0
                    for i in 0..<n {
                        let gram = UInt64(s[i]) << 32 | UInt64(s[i + 1])
                        var cell = Int(truncatingIfNeeded: (gram &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
                        while true {
                            let at = Int(cells[cell])
                            if at < 0 {
                                cells[cell] = Int32(found)
                                out[found] = (gram, 1)
                                found += 1
                                break
                            }
                            if out[at].gram == gram {
                                out[at].count += 1
                                break
                            }
                            cell = (cell + 1) & mask
                        }
                    }
                    return found
                }
            }
            result.removeLast(n - distinct)
            return result
        }
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
            index.insert(slot: slot, count: count, for: gram)
        }
        slots[slot] = entry
        times[slot] = time
        lengths[slot] = length
    }

    private mutating func unindex(_ entry: Entry, slot: Int) {
        for (gram, _) in entry.bigrams { index.remove(slot: slot, for: gram) }
    }

    /// Calls `body(slot)`, newest text first, for every stored text that passes `admit` and shares at
    /// least as many bigrams with the candidate as `admit` requires for it (exact multiset intersection,
    /// `Σ_g min(count_candidate(g), count_stored(g))`).
    ///
    /// The intersection with every slot at once: each candidate bigram adds its slot bitset (or short
    /// slot list) and, when repeated, its extra occurrences (``BigramIndex``) into bit-sliced counters,
    /// one bit plane per counter bit, so a common bigram costs a few word operations per 64 slots however
    /// many texts hold it. The counters are wide enough for `total` (the candidate's bigram occurrences),
    /// so they never overflow.
    ///
    /// `required` is the smallest requirement `admit` can return: a bit-sliced comparison of all counters
    /// with it picks the slots worth reading a count for.
    @inline(__always)
    mutating func forEachSharingBigrams(
        _ bigrams: [(gram: UInt64, count: Int32)], total: Int, required: Int,
        admit: (_ time: Double, _ length: Int) -> Int?, _ body: (_ slot: Int) -> Void
    ) {
        let words = index.wordsPerLevel
        let planes = max(1, Int.bitWidth - max(total, 1).leadingZeroBitCount)
        var counters = scratchCounters
        var admitted = scratchAdmitted
        var requirements = scratchRequirements
        defer {
            scratchCounters = counters
            scratchAdmitted = admitted
            scratchRequirements = requirements
        }
        if counters.count < planes * words { counters = Array(repeating: 0, count: planes * words) }
        if admitted.count < words { admitted = Array(repeating: 0, count: words) }
        if requirements.count < capacity { requirements = Array(repeating: 0, count: capacity) }
        // Window and length first: only admitted slots are counted, so the others add no carries.
        var any = false
        for slot in 0..<capacity where slots[slot] != nil {
            guard let requirement = admit(times[slot], lengths[slot]) else { continue }
            requirements[slot] = requirement
            admitted[slot >> 6] |= UInt64(1) << UInt64(slot & 63)
            any = true
        }
        guard any else { return }
        counters.withUnsafeMutableBufferPointer { counters in
            admitted.withUnsafeMutableBufferPointer { admitted in
                /// Adds `value` (≥ 1) to the counter of the one slot `bit` in `word`.
                @inline(__always)
                func addValue(_ value: Int, word: Int, bit: UInt64) {
                    var rest = value
                    var start = 0
                    while rest != 0 {
                        if rest & 1 != 0 {
                            var carry = bit
                            var plane = start
                            while carry != 0 {
                                let c = counters[plane * words + word]
                                counters[plane * words + word] = c ^ carry
                                carry &= c
                                plane += 1
                            }
                        }
                        rest >>= 1
                        start += 1
                    }
                }
                for (gram, count) in bigrams {
                    guard let position = index.position(of: gram) else { continue }
                    index.withPostings(at: position) { dense, firsts, extras in
                        if dense {
                            // One bitset per occurrence level (one level only in large stores: see extras).
                            for level in 0..<min(Int(count), firsts.count / words) {
                                for word in 0..<words {
                                    var carry = firsts[level * words + word] & admitted[word]
                                    var plane = 0
                                    while carry != 0 {
                                        let c = counters[plane * words + word]
                                        counters[plane * words + word] = c ^ carry
                                        carry &= c
                                        plane += 1
                                    }
                                }
                            }
                        } else {
                            for slot in firsts {
                                let word = Int(slot >> 6)
                                let bit = (admitted[word] >> (slot & 63)) & 1
                                if bit != 0 { addValue(1, word: word, bit: UInt64(1) << (slot & 63)) }
                            }
                        }
                        guard count > 1 else { return }
                        for extra in extras {
                            let slot = Int(extra >> 32)
                            let word = slot >> 6
                            let bit = UInt64(1) << UInt64(slot & 63)
                            guard admitted[word] & bit != 0 else { continue }
                            // Occurrences beyond the first, both sides: min(count_q, count_s) − 1.
                            addValue(min(Int(count), Int(extra & 0xFFFF_FFFF)) - 1, word: word, bit: bit)
                        }
                    }
                }
                // admitted ∧ (counter ≥ required), from the top plane down; none when `required` needs more
                // bits than the counters have (a count never exceeds `total`).
                let required = max(required, 0)
                let reachable = required < (1 << planes)
                for word in 0..<words {
                    var greater: UInt64 = 0
                    var equal: UInt64 = ~0
                    for plane in stride(from: planes - 1, through: 0, by: -1) {
                        let c = counters[plane * words + word]
                        if (required >> plane) & 1 == 1 {
                            equal &= c
                        } else {
                            greater |= equal & c
                            equal &= ~c
                        }
                    }
                    admitted[word] &= reachable ? (greater | equal) : 0
                }
                // Newest first: the ring's slots below `next` downwards, then those from `next` up, downwards;
                // only the set bits of the mask are visited.
                for (low, high) in [(0, next), (next, capacity)] where low < high {
                    var word = (high - 1) >> 6
                    while word >= low >> 6 {
                        var bits = admitted[word]
                        let base = word << 6
                        if base + 64 > high { bits &= (UInt64(1) << UInt64(high - base)) &- 1 }
                        if base < low { bits &= ~((UInt64(1) << UInt64(low - base)) &- 1) }
                        while bits != 0 {
                            let bit = 63 - bits.leadingZeroBitCount
                            bits &= ~(UInt64(1) << UInt64(bit))
                            let slot = base + bit
                            var shared = 0
                            for plane in 0..<planes { shared |= Int((counters[plane * words + word] >> UInt64(bit)) & 1) << plane }
                            if shared >= requirements[slot] { body(slot) }
                        }
                        word -= 1
                    }
                }
                for i in 0..<(planes * words) { counters[i] = 0 }
                for i in 0..<words { admitted[i] = 0 }
            }
        }
    }

    /// Multiset intersection size of two bigram lists sorted by bigram (a check for tests).
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
