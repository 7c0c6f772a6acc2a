/// Inverted index bigram → the stored-text slots that contain it, as slot bitsets per occurrence level,
/// in an open-addressing hash table.
///
/// For each bigram the index keeps `levels` bitsets of `wordsPerLevel` words each: bit `s` of level `t`
/// (0-based) is set when the text in slot `s` contains the bigram more than `t` times. So the multiset
/// intersection of a query with every stored text, `Σ_g min(count_q(g), count_s(g))`, is the per-slot
/// sum of the first `count_q(g)` levels of every query bigram: a handful of word-wide additions into
/// bit-sliced counters instead of one step per posting (see ``TextStore/forEachSharingBigrams``).
///
/// Swift's `Dictionary` hashes every `UInt64` key with SipHash; a multiplicative hash over a power-of-two
/// table is several times cheaper. Keys are never 0 (a bigram of two NULs cannot survive normalisation,
/// which drops controls), so 0 marks an empty slot; deleted keys become tombstones and the table is rebuilt
/// when live keys plus tombstones pass half its size. Size is bounded by the stored texts' distinct bigrams.
struct BigramIndex: Sendable {
    private static let empty: UInt64 = 0
    private static let tombstone: UInt64 = .max

    /// Words per bitset: one bit per stored-text slot.
    let wordsPerLevel: Int
    private var keys: [UInt64]
    /// Level bitsets of each key, concatenated (`levels × wordsPerLevel` words).
    private var lists: [[UInt64]]
    private var mask: Int
    private var live = 0
    private var dead = 0

    init(slots: Int, minimumCapacity: Int = 256) {
        wordsPerLevel = max(1, (slots + 63) / 64)
        var size = 16
        while size < minimumCapacity * 2 { size <<= 1 }
        keys = Array(repeating: Self.empty, count: size)
        lists = Array(repeating: [], count: size)
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
        let list = lists[position]
        let word = slot >> 6
        let bit = UInt64(1) << UInt64(slot & 63)
        var level = 0
        while (level + 1) * wordsPerLevel <= list.count, list[level * wordsPerLevel + word] & bit != 0 { level += 1 }
        return level
    }

    /// Slots containing the bigram at `position` at least once, ascending.
    func slots(at position: Int) -> [Int] {
        let list = lists[position]
        var out: [Int] = []
        for word in 0..<min(wordsPerLevel, list.count) {
            var bits = list[word]
            while bits != 0 {
                out.append(word * 64 + bits.trailingZeroBitCount)
                bits &= bits - 1
            }
        }
        return out
    }

    /// Reads the level bitsets at `position` (`levels × wordsPerLevel` words) without copying them.
    @inline(__always)
    func withLevels<R>(at position: Int, _ body: (UnsafeBufferPointer<UInt64>) -> R) -> R {
        lists[position].withUnsafeBufferPointer(body)
    }

    /// Records that the text in `slot` contains `key` `count` (≥ 1) times.
    mutating func insert(slot: Int, count: Int32, for key: UInt64) {
        let word = slot >> 6
        let bit = UInt64(1) << UInt64(slot & 63)
        let position: Int
        if let i = self.position(of: key) {
            position = i
        } else {
            if (live + dead + 1) * 2 > keys.count { rebuild(size: live * 4 > keys.count ? keys.count * 2 : keys.count) }
            var i = home(key)
            while keys[i] != Self.empty && keys[i] != Self.tombstone { i = (i + 1) & mask }
            if keys[i] == Self.tombstone { dead -= 1 }
            keys[i] = key
            lists[i] = []
            live += 1
            position = i
        }
        let needed = Int(count) * wordsPerLevel
        if lists[position].count < needed {
            lists[position].append(contentsOf: repeatElement(0, count: needed - lists[position].count))
        }
        for level in 0..<Int(count) { lists[position][level * wordsPerLevel + word] |= bit }
    }

    /// Removes `slot` from `key`'s bitsets (no-op when absent); the key goes when no slot holds it.
    mutating func remove(slot: Int, for key: UInt64) {
        guard let i = position(of: key) else { return }
        let words = wordsPerLevel
        let word = slot >> 6
        let clear = ~(UInt64(1) << UInt64(slot & 63))
        // Drop trailing empty levels, so a key's size follows the texts still holding it.
        let kept: Int = lists[i].withUnsafeMutableBufferPointer { list in
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
            lists[i] = []
            live -= 1
            dead += 1
        } else if kept * words < lists[i].count {
            lists[i].removeLast(lists[i].count - kept * words)
        }
    }

    private mutating func rebuild(size: Int) {
        let oldKeys = keys
        let oldLists = lists
        keys = Array(repeating: Self.empty, count: size)
        lists = Array(repeating: [], count: size)
        mask = size - 1
        live = 0
        dead = 0
        for (k, list) in zip(oldKeys, oldLists) where k != Self.empty && k != Self.tombstone {
            var i = home(k)
            while keys[i] != Self.empty { i = (i + 1) & mask }
            keys[i] = k
            lists[i] = list
            live += 1
        }
    }

    mutating func removeAll() {
        self = BigramIndex(slots: wordsPerLevel * 64)
    }
}
