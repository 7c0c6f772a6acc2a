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
struct TextStore {
    struct Entry {
        var sequence: UInt64
        var senderKey: String
        var messageID: String
        var time: Double
        var scalars: [UInt32]
        /// Distinct bigrams with their counts, sorted by bigram.
        var bigrams: [(gram: UInt64, count: Int32)]
    }

    struct Posting {
        var slot: Int32
        var count: Int32
    }

    let capacity: Int
    private(set) var slots: [Entry?]
    private var next = 0
    private var sequence: UInt64 = 0
    private var index: [UInt64: [Posting]] = [:]
    /// Shared-bigram accumulator per slot, and the slots touched by the current query.
    private var accumulator: [Int32]
    private var touched: [Int32] = []

    init(capacity: Int) {
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
        accumulator = Array(repeating: 0, count: capacity)
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
    mutating func insert(senderKey: String, messageID: String, time: Double, scalars: [UInt32], bigrams: [(gram: UInt64, count: Int32)]) {
        let slot = next
        next = (next + 1) % capacity
        if let old = slots[slot] { unindex(old, slot: slot) }
        sequence += 1
        let entry = Entry(sequence: sequence, senderKey: senderKey, messageID: messageID, time: time, scalars: scalars, bigrams: bigrams)
        for (gram, count) in bigrams {
            index[gram, default: []].append(Posting(slot: Int32(slot), count: count))
        }
        slots[slot] = entry
    }

    private mutating func unindex(_ entry: Entry, slot: Int) {
        for (gram, _) in entry.bigrams {
            guard var list = index[gram] else { continue }
            if let position = list.firstIndex(where: { $0.slot == Int32(slot) }) {
                list.swapAt(position, list.count - 1)
                list.removeLast()
            }
            index[gram] = list.isEmpty ? nil : list
        }
    }

    /// Shared-bigram counts (multiset intersection) of `bigrams` with every stored text sharing one;
    /// calls `body(slot, shared)` for each, newest-first order is up to the caller.
    mutating func forEachSharingBigram(_ bigrams: [(gram: UInt64, count: Int32)], _ body: (Int, Int) -> Void) {
        for (gram, count) in bigrams {
            guard let list = index[gram] else { continue }
            for posting in list {
                let slot = Int(posting.slot)
                if accumulator[slot] == 0 { touched.append(posting.slot) }
                accumulator[slot] += min(count, posting.count)
            }
        }
        for slot in touched {
            body(Int(slot), Int(accumulator[Int(slot)]))
            accumulator[Int(slot)] = 0
        }
        touched.removeAll(keepingCapacity: true)
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
        index = [:]
        next = 0
    }

    /// Index size, for stats and the memory bound.
    var indexedGrams: Int { index.count }
}
