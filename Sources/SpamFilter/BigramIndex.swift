/// Inverted index bigram → the stored-text slots that contain it, in an open-addressing hash table.
///
/// Small stores (≤ 256 slots, the default 200 included): each bigram keeps one bitset of the slots per
/// occurrence level (bit `s` of level `t` set when slot `s` holds the bigram more than `t` times); a query
/// adds the first `count_q` levels of each of its bigrams into bit-sliced counters.
///
/// Larger stores: each bigram keeps the slots that contain it at least once either as a bitset of `wordsPerLevel` words
/// (dense: when many slots hold it) or as a plain slot list (sparse), and, separately, the slots that
/// contain it more than once with their counts (`extras`). A query adds every bigram's bitset (or slot
/// list) into bit-sliced counters and, for a repeated query bigram, the extra occurrences
/// `min(count_q, count_s) − 1`, so the counters end as the exact multiset intersection
/// `Σ_g min(count_q(g), count_s(g))` for every slot at once (see ``TextStore/forEachSharingBigrams``).
///
/// Memory stays proportional to the postings, as a posting list would be: a sparse list holds at most
/// `wordsPerLevel` slots (then it becomes a bitset), a bitset goes back to a list when fewer than a
/// quarter of `wordsPerLevel` slots remain, so a bitset never costs more than 4 words per slot it holds;
/// extras cost one word per (slot, count ≥ 2).
///
/// Swift's `Dictionary` hashes every `UInt64` key with SipHash; a multiplicative hash over a power-of-two
/// table is several times cheaper. Keys are never 0 (a bigram of two NULs cannot survive normalisation,
/// which drops controls), so 0 marks an empty slot; deleted keys become tombstones and the table is rebuilt
/// when live keys plus tombstones pass half its size. Size is bounded by the stored texts' distinct bigrams.
struct BigramIndex: Sendable {
    private static let empty: UInt64 = 0
    /// Up to this many words per bitset (256 slots, the default 200 included) every key is a stack of
    /// bitsets, one per occurrence level: a level costs at most 4 words and exists only while some slot
    /// holds that many occurrences, so still at most 4 words per occurrence, and repeated bigrams are
    /// counted word-wide too. Larger stores use lists, single bitsets and extras (see the type's comment).
    private static let levelledWords = 4
    /// Whether this index uses the levelled form (decided by its size, fixed for its lifetime).
    private var levelled: Bool { wordsPerLevel <= Self.levelledWords }
    private static let tombstone: UInt64 = .max

    /// Words per bitset: one bit per stored-text slot.
    let wordsPerLevel: Int
    private var keys: [UInt64]
    /// Slots holding each key at least once: a bitset (`isDense`) or a list of slot numbers.
    private var firsts: [[UInt64]]
    private var isDense: [Bool]
    /// `slot << 32 | count` for each slot holding the key more than once.
    private var extras: [[UInt64]]
    private var mask: Int
    private var live = 0
    private var dead = 0

    init(slots: Int, minimumCapacity: Int = 256) {
        wordsPerLevel = max(1, (slots + 63) / 64)
        var size = 16
        while size < minimumCapacity * 2 { size <<= 1 }
        keys = Array(repeating: Self.empty, count: size)
        firsts = Array(repeating: [], count: size)
        isDense = Array(repeating: false, count: size)
        extras = Array(repeating: [], count: size)
        mask = size - 1
    }

    var count: Int { live }

    @inline(__always)
    private func home(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
    }

    /// Table position of `key`, or nil.
    @inline(__always)
    func position(of key: UInt64) -> Int? {
        var i = home(key)
        while true {
            let k = keys[i]
            if k == key { return i }
            if k == Self.empty { return nil }
            i = (i + 1) & mask
        }
    }

    /// How many times the text in `slot` contains the bigram at `position` (0 when absent).
    func occurrences(at position: Int, slot: Int) -> Int {
        guard holds(position, slot) else { return 0 }
        if levelled {
            let list = firsts[position]
            let bit = UInt64(1) << UInt64(slot & 63)
            var level = 1
            while (level + 1) * wordsPerLevel <= list.count, list[level * wordsPerLevel + (slot >> 6)] & bit != 0 { level += 1 }
            return level
        }
        for e in extras[position] where Int(e >> 32) == slot { return Int(e & 0xFFFF_FFFF) }
        return 1
    }

    private func holds(_ position: Int, _ slot: Int) -> Bool {
        if isDense[position] { return (firsts[position][slot >> 6] >> UInt64(slot & 63)) & 1 != 0 }
        return firsts[position].contains(UInt64(slot))
    }

    /// Slots containing the bigram at `position` at least once, ascending.
    func slots(at position: Int) -> [Int] {
        guard isDense[position] else { return firsts[position].map { Int($0) }.sorted() }
        var out: [Int] = []
        for (word, value) in firsts[position].prefix(wordsPerLevel).enumerated() {
            var bits = value
            while bits != 0 {
                out.append(word * 64 + bits.trailingZeroBitCount)
                bits &= bits - 1
            }
        }
        return out
    }

    /// Reads what the bigram at `position` holds: whether `firsts` is a bitset, the bitset or slot list,
    /// and the extras (`slot << 32 | count`, counts ≥ 2), without copying.
    @inline(__always)
    func withPostings<R>(
        at position: Int, _ body: (_ dense: Bool, _ firsts: UnsafeBufferPointer<UInt64>, _ extras: UnsafeBufferPointer<UInt64>) -> R
    ) -> R {
        firsts[position].withUnsafeBufferPointer { f in extras[position].withUnsafeBufferPointer { e in body(isDense[position], f, e) } }
    }

    /// Records that the text in `slot` contains `key` `count` (≥ 1) times. A slot is inserted once per key.
    mutating func insert(slot: Int, count: Int32, for key: UInt64) {
        let i: Int
        if let found = position(of: key) {
            i = found
        } else {
            if (live + dead + 1) * 2 > keys.count { rebuild(size: live * 4 > keys.count ? keys.count * 2 : keys.count) }
            var p = home(key)
            while keys[p] != Self.empty && keys[p] != Self.tombstone { p = (p + 1) & mask }
            if keys[p] == Self.tombstone { dead -= 1 }
            keys[p] = key
            isDense[p] = levelled
            firsts[p] = []
            extras[p] = []
            live += 1
            i = p
        }
        if levelled {
            // Small bitsets: one per occurrence level, so repeated bigrams are counted word-wide too.
            let needed = Int(count) * wordsPerLevel
            if firsts[i].count < needed { firsts[i].append(contentsOf: repeatElement(0, count: needed - firsts[i].count)) }
            for level in 0..<Int(count) { firsts[i][level * wordsPerLevel + (slot >> 6)] |= UInt64(1) << UInt64(slot & 63) }
            return
        }
        if isDense[i] {
            firsts[i][slot >> 6] |= UInt64(1) << UInt64(slot & 63)
        } else if firsts[i].count < wordsPerLevel {
            firsts[i].append(UInt64(slot))
        } else {
            // The list would outgrow one bitset: switch to the bitset.
            var bits = [UInt64](repeating: 0, count: wordsPerLevel)
            for s in firsts[i] + [UInt64(slot)] { bits[Int(s) >> 6] |= UInt64(1) << (s & 63) }
            firsts[i] = bits
            isDense[i] = true
        }
        if count > 1 { extras[i].append(UInt64(slot) << 32 | UInt64(count)) }
    }

    /// Removes `slot` from `key` (no-op when absent); the key goes when no slot holds it.
    mutating func remove(slot: Int, for key: UInt64) {
        guard let i = position(of: key) else { return }
        if levelled {
            removeLevelled(slot: slot, at: i)
            return
        }
        if let e = extras[i].firstIndex(where: { Int($0 >> 32) == slot }) {
            extras[i].swapAt(e, extras[i].count - 1)
            extras[i].removeLast()
        }
        var remaining: Int
        if isDense[i] {
            firsts[i][slot >> 6] &= ~(UInt64(1) << UInt64(slot & 63))
            remaining = 0
            for word in firsts[i] { remaining += word.nonzeroBitCount }
            if remaining * 4 < wordsPerLevel {
                // Few slots left: back to a list, so the bitset never costs more than 4 words per slot.
                firsts[i] = slots(at: i).map { UInt64($0) }
                isDense[i] = false
            }
        } else {
            if let p = firsts[i].firstIndex(of: UInt64(slot)) {
                firsts[i].swapAt(p, firsts[i].count - 1)
                firsts[i].removeLast()
            }
            remaining = firsts[i].count
        }
        if remaining == 0 {
            keys[i] = Self.tombstone
            firsts[i] = []
            isDense[i] = false
            extras[i] = []
            live -= 1
            dead += 1
        }
    }

    /// Clears `slot` from every level and drops trailing empty levels (the key goes with its last slot).
    private mutating func removeLevelled(slot: Int, at i: Int) {
        let words = wordsPerLevel
        let word = slot >> 6
        let clear = ~(UInt64(1) << UInt64(slot & 63))
        let kept: Int = firsts[i].withUnsafeMutableBufferPointer { list in
            let levels = list.count / words
            for level in 0..<levels { list[level * words + word] &= clear }
            var kept = levels
            while kept > 0 {
                var any: UInt64 = 0
                for w in 0..<words { any |= list[(kept - 1) * words + w] }
                if any != 0 { break }
                kept -= 1
            }
            return kept
        }
        if kept == 0 {
            keys[i] = Self.tombstone
            firsts[i] = []
            live -= 1
            dead += 1
        } else if kept * words < firsts[i].count {
            firsts[i].removeLast(firsts[i].count - kept * words)
        }
    }

    private mutating func rebuild(size: Int) {
        let oldKeys = keys
        let oldFirsts = firsts
        let oldDense = isDense
        let oldExtras = extras
        keys = Array(repeating: Self.empty, count: size)
        firsts = Array(repeating: [], count: size)
        isDense = Array(repeating: false, count: size)
        extras = Array(repeating: [], count: size)
        mask = size - 1
        live = 0
        dead = 0
        for (p, k) in oldKeys.enumerated() where k != Self.empty && k != Self.tombstone {
            var i = home(k)
            while keys[i] != Self.empty { i = (i + 1) & mask }
            keys[i] = k
            firsts[i] = oldFirsts[p]
            isDense[i] = oldDense[p]
            extras[i] = oldExtras[p]
            live += 1
        }
    }

    mutating func removeAll() {
        self = BigramIndex(slots: wordsPerLevel * 64)
    }
}
