/// Inverted index bigram → the stored-text slots that contain it, in an open-addressing hash table.
///
/// Small stores (≤ 256 slots, the default 200 included): each bigram keeps one bitset of the slots per
/// occurrence level (bit `s` of level `t` set when slot `s` holds the bigram more than `t` times); a query
/// adds the first `count_q` levels of each of its bigrams into bit-sliced counters. Level 0 of every key
/// lives in one flat array indexed by table position (``rowWords`` words each), the higher levels in a
/// pool of blocks chained per key, so inserting, removing and querying touch no nested arrays.
///
/// Larger stores: each bigram keeps the slots that contain it at least once either as a bitset of `wordsPerLevel` words
/// (dense: when many slots hold it) or as a plain slot list (sparse), and, separately, the slots that
/// contain it more than once with their counts (`extras`). A query adds every bigram's bitset (or slot
/// list) into bit-sliced counters and, for a repeated query bigram, the extra occurrences
/// `min(count_q, count_s) − 1`, so the counters end as the exact multiset intersection
/// `Σ_g min(count_q(g), count_s(g))` for every slot at once (see ``TextStore/forEachSharingBigrams``).
///
/// Memory stays proportional to the postings, as a posting list would be. Large stores: a sparse list
/// holds at most `wordsPerLevel` slots (then it becomes a bitset), a bitset goes back to a list when fewer
/// than a quarter of `wordsPerLevel` slots remain, so a bitset never costs more than 4 words per slot it
/// holds; extras cost one word per (slot, count ≥ 2). Small stores: level 0 costs ``rowWords`` (4)
/// words per table position and the table has at most 8 positions per posting at the peak (it doubles
/// only while its live keys plus an inserted text's keys would fill more than a quarter of it, and each
/// of those is a posting; 512 positions for the default minimum), so at most 32 words per peak posting
/// plus 16 KB; a higher level costs one pool block of 4 words and exists only while some slot holds that
/// many occurrences, so ≤ 4 words per occurrence, and freed blocks are reused.
///
/// Swift's `Dictionary` hashes every `UInt64` key with SipHash; a multiplicative hash over a power-of-two
/// table is several times cheaper. Keys are never 0 (a bigram of two NULs cannot survive normalisation,
/// which drops controls), so 0 marks an empty slot; deleted keys become tombstones and the table is rebuilt
/// when live keys plus tombstones pass half its size. Size is bounded by the stored texts' distinct bigrams.
struct BigramIndex: Sendable {
    private static let empty: UInt64 = 0
    private static let tombstone: UInt64 = .max
    /// Up to this many words per bitset (256 slots, the default 200 included) every key is a stack of
    /// bitsets, one per occurrence level: a level costs at most 4 words and exists only while some slot
    /// holds that many occurrences, so still at most 4 words per occurrence, and repeated bigrams are
    /// counted word-wide too. Larger stores use lists, single bitsets and extras (see the type's comment).
    private static let levelledWords = 4
    /// Words per level bitset in the levelled form: always 4 (words past `wordsPerLevel` stay zero), so a
    /// row is one 4-word vector and the loops over it have a fixed length.
    static let rowWords = 4

    /// Words per bitset: one bit per stored-text slot.
    let wordsPerLevel: Int
    /// Whether this index uses the levelled form (decided by its size, fixed for its lifetime).
    let levelled: Bool
    private var keys: [UInt64]
    private var mask: Int
    private var live = 0
    private var dead = 0

    // Levelled form (small stores).
    /// Level 0 of the key at every table position: `wordsPerLevel` words from `position · wordsPerLevel`,
    /// all zero at empty positions and tombstones.
    private var firstLevel: [UInt64] = []
    /// The pool block holding level 1 of the key at every table position, or −1.
    private var upperHead: [Int32] = []
    /// Levels ≥ 1: blocks of `wordsPerLevel` words; `poolNext[b]` is the block of the next level (−1: none).
    /// A block is never all zero while in use; freed blocks are zeroed and chained from `poolFree`.
    private var pool: [UInt64] = []
    private var poolNext: [Int32] = []
    private var poolFree: Int32 = -1
    private var poolFreeCount = 0

    // List form (large stores).
    /// Slots holding each key at least once: a bitset (`isDense`) or a list of slot numbers.
    private var firsts: [[UInt64]] = []
    private var isDense: [Bool] = []
    /// `slot << 32 | count` for each slot holding the key more than once.
    private var extras: [[UInt64]] = []

    init(slots: Int, minimumCapacity: Int = 256) {
        wordsPerLevel = max(1, (slots + 63) / 64)
        levelled = wordsPerLevel <= Self.levelledWords
        var size = 16
        while size < minimumCapacity * 2 { size <<= 1 }
        keys = Array(repeating: Self.empty, count: size)
        mask = size - 1
        allocatePostings(size)
    }

    /// Empty postings for a table of `size` positions.
    private mutating func allocatePostings(_ size: Int) {
        if levelled {
            firstLevel = Array(repeating: 0, count: size * Self.rowWords)
            upperHead = Array(repeating: -1, count: size)
        } else {
            firsts = Array(repeating: [], count: size)
            isDense = Array(repeating: false, count: size)
            extras = Array(repeating: [], count: size)
        }
    }

    var count: Int { live }

    /// Where `key`'s probe path starts in a table of `mask + 1` positions.
    @inline(__always)
    private static func home(_ key: UInt64, mask: Int) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
    }

    @inline(__always)
    private func home(_ key: UInt64) -> Int { Self.home(key, mask: mask) }

    /// Position of `key` in `keys` (a table of `mask + 1` positions), or −1: the probe every lookup uses.
    @inline(__always)
    private static func find(_ key: UInt64, in keys: UnsafeBufferPointer<UInt64>, mask: Int) -> Int {
        var i = home(key, mask: mask)
        while true {
            let k = keys[i]
            if k == key { return i }
            if k == empty { return -1 }
            i = (i + 1) & mask
        }
    }

    /// The levelled form's arrays as mutable buffers, for a whole-text pass (room is made first, so none of
    /// them grows inside).
    @inline(__always)
    private mutating func withLevelledStorage<R>(
        _ body: (
            _ keys: UnsafeMutableBufferPointer<UInt64>, _ first: UnsafeMutableBufferPointer<UInt64>,
            _ head: UnsafeMutableBufferPointer<Int32>, _ pool: UnsafeMutableBufferPointer<UInt64>,
            _ next: UnsafeMutableBufferPointer<Int32>
        ) -> R
    ) -> R {
        keys.withUnsafeMutableBufferPointer { keys in
            firstLevel.withUnsafeMutableBufferPointer { first in
                upperHead.withUnsafeMutableBufferPointer { head in
                    pool.withUnsafeMutableBufferPointer { pool in
                        poolNext.withUnsafeMutableBufferPointer { next in body(keys, first, head, pool, next) }
                    }
                }
            }
        }
    }

    /// Table position of `key`, or nil.
    @inline(__always)
    func position(of key: UInt64) -> Int? {
        let i = keys.withUnsafeBufferPointer { Self.find(key, in: $0, mask: mask) }
        return i >= 0 ? i : nil
    }

    /// How many times the text in `slot` contains the bigram at `position` (0 when absent).
    func occurrences(at position: Int, slot: Int) -> Int {
        if levelled {
            let word = slot >> 6
            let bit = UInt64(1) << UInt64(slot & 63)
            guard firstLevel[position * Self.rowWords + word] & bit != 0 else { return 0 }
            var level = 1
            var block = upperHead[position]
            while block >= 0, pool[Int(block) * Self.rowWords + word] & bit != 0 {
                level += 1
                block = poolNext[Int(block)]
            }
            return level
        }
        guard holds(position, slot) else { return 0 }
        for e in extras[position] where Int(e >> 32) == slot { return Int(e & 0xFFFF_FFFF) }
        return 1
    }

    private func holds(_ position: Int, _ slot: Int) -> Bool {
        if isDense[position] { return (firsts[position][slot >> 6] >> UInt64(slot & 63)) & 1 != 0 }
        return firsts[position].contains(UInt64(slot))
    }

    /// Slots containing the bigram at `position` at least once, ascending.
    func slots(at position: Int) -> [Int] {
        let bitset: ArraySlice<UInt64>
        if levelled {
            bitset = firstLevel[position * Self.rowWords..<position * Self.rowWords + wordsPerLevel]
        } else {
            guard isDense[position] else { return firsts[position].map { Int($0) }.sorted() }
            bitset = firsts[position].prefix(wordsPerLevel)
        }
        var out: [Int] = []
        for (word, value) in bitset.enumerated() {
            var bits = value
            while bits != 0 {
                out.append(word * 64 + bits.trailingZeroBitCount)
                bits &= bits - 1
            }
        }
        return out
    }

    /// Levelled form: adds, for each of `bigrams` held here, its levels `0 ..< min(count, levels held)`
    /// into bit-sliced counters (plane `p` in `counters[4p ..< 4p + 4]`, all zero on entry) and returns
    /// how many level rows it added; no count exceeds that. `rows` is scratch for at least `Σ count`
    /// row addresses (the rows never exceed it).
    ///
    /// The rows are summed as 4-word vectors with carry-save adders (Harley–Seal): 7 adders fold 8 rows
    /// into the 1s, 2s and 4s planes, kept in registers, and one carry into the 8s plane, rippling up
    /// only while it carries; the last rows ripple in one by one. Exact: each adder keeps
    /// `a + b + c = low + 2·high` bitwise, so the planes always hold the sum of the rows so far.
    func addLevels(
        _ bigrams: UnsafeBufferPointer<(gram: UInt64, count: Int32)>, into counters: UnsafeMutablePointer<UInt64>,
        rows: UnsafeMutablePointer<Int>
    ) -> Int {
        typealias Row = SIMD4<UInt64>
        let mask = self.mask
        var n = 0
        keys.withUnsafeBufferPointer { keys in
            firstLevel.withUnsafeBufferPointer { first in
                upperHead.withUnsafeBufferPointer { upperHead in
                    pool.withUnsafeBufferPointer { pool in
                        poolNext.withUnsafeBufferPointer { poolNext in
                            guard let firstBase = first.baseAddress else { return }
                            for (gram, count) in bigrams {
                                let i = Self.find(gram, in: keys, mask: mask)
                                guard i >= 0 else { continue }
                                rows[n] = Int(bitPattern: firstBase + i * Self.rowWords)
                                n += 1
                                var block = Int(upperHead[i])
                                var level = 1
                                while level < Int(count), block >= 0, let poolBase = pool.baseAddress {
                                    rows[n] = Int(bitPattern: poolBase + block * Self.rowWords)
                                    n += 1
                                    level += 1
                                    block = Int(poolNext[block])
                                }
                            }
                        }
                    }
                    @inline(__always)
                    func row(_ r: Int) -> Row { UnsafeRawPointer(bitPattern: rows[r]).unsafelyUnwrapped.loadUnaligned(as: Row.self) }
                    @inline(__always)
                    func add(_ a: Row, _ b: Row, _ c: Row) -> (low: Row, high: Row) {
                        let u = a ^ b
                        return (u ^ c, (a & b) | (u & c))
                    }
                    /// Adds `carry` into the planes from `plane` up.
                    @inline(__always)
                    func ripple(_ carry: Row, from plane: Int) {
                        var carry = carry
                        var plane = plane
                        while carry[0] | carry[1] | carry[2] | carry[3] != 0 {
                            let at = UnsafeMutableRawPointer(counters + plane * Self.rowWords)
                            let value = at.loadUnaligned(as: Row.self)
                            at.storeBytes(of: value ^ carry, as: Row.self)
                            carry &= value
                            plane += 1
                        }
                    }
                    var ones = Row()
                    var twos = Row()
                    var fours = Row()
                    var r = 0
                    while r + 8 <= n {
                        let a = add(ones, row(r), row(r + 1))
                        let b = add(a.low, row(r + 2), row(r + 3))
                        let twosA = add(twos, a.high, b.high)
                        let c = add(b.low, row(r + 4), row(r + 5))
                        let d = add(c.low, row(r + 6), row(r + 7))
                        let twosB = add(twosA.low, c.high, d.high)
                        let foursA = add(fours, twosA.high, twosB.high)
                        ones = d.low
                        twos = twosB.low
                        fours = foursA.low
                        ripple(foursA.high, from: 3)
                        r += 8
                    }
                    if n >= 8 {
                        // Planes 0 ... 2 were untouched (zero) so far; 8 rows or more mean at least 4 planes.
                        UnsafeMutableRawPointer(counters).storeBytes(of: ones, as: Row.self)
                        UnsafeMutableRawPointer(counters + Self.rowWords).storeBytes(of: twos, as: Row.self)
                        UnsafeMutableRawPointer(counters + 2 * Self.rowWords).storeBytes(of: fours, as: Row.self)
                    }
                    while r < n {
                        ripple(row(r), from: 0)
                        r += 1
                    }
                }
            }
        }
        return n
    }

    /// List form: reads what the bigram at `position` holds: whether `firsts` is a bitset, the bitset or
    /// slot list, and the extras (`slot << 32 | count`, counts ≥ 2), without copying.
    @inline(__always)
    func withPostings<R>(
        at position: Int, _ body: (_ dense: Bool, _ firsts: UnsafeBufferPointer<UInt64>, _ extras: UnsafeBufferPointer<UInt64>) -> R
    ) -> R {
        firsts[position].withUnsafeBufferPointer { f in extras[position].withUnsafeBufferPointer { e in body(isDense[position], f, e) } }
    }

    /// Records that the text in `slot` contains `key` `count` (≥ 1) times. A slot is inserted once per key.
    /// (The levelled form has one implementation: the whole-text pass, here over one bigram.)
    mutating func insert(slot: Int, count: Int32, for key: UInt64) {
        if levelled {
            [(gram: key, count: count)].withUnsafeBufferPointer { insert(slot: slot, bigrams: $0) }
            return
        }
        let i: Int
        if let found = position(of: key) {
            i = found
        } else {
            if (live + dead + 1) * 2 > keys.count { rebuild(size: live * 4 > keys.count ? keys.count * 2 : keys.count) }
            var p = home(key)
            while keys[p] != Self.empty && keys[p] != Self.tombstone { p = (p + 1) & mask }
            if keys[p] == Self.tombstone { dead -= 1 }
            keys[p] = key
            isDense[p] = false
            firsts[p] = []
            extras[p] = []
            live += 1
            i = p
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

    /// Records that the text in `slot` holds each of `bigrams` `count` times (distinct bigrams; a slot is
    /// inserted once per key). Levelled form: the table and the pool get room for the whole text first
    /// (a rebuild when the text's keys, all new at worst, could pass half the table, doubling while they
    /// would fill more than a quarter of it; free blocks for every level above 0), so one pass over
    /// unchecked buffers does the rest and no position moves meanwhile.
    mutating func insert(slot: Int, bigrams: UnsafeBufferPointer<(gram: UInt64, count: Int32)>) {
        guard levelled else {
            for (gram, count) in bigrams { insert(slot: slot, count: count, for: gram) }
            return
        }
        if (live + dead + bigrams.count) * 2 > keys.count {
            var size = keys.count
            while (live + bigrams.count) * 4 > size { size <<= 1 }
            rebuild(size: size)
        }
        var upper = 0
        for (_, count) in bigrams { upper += Int(count) - 1 }
        while poolFreeCount < upper {
            let block = Int32(poolNext.count)
            pool.append(contentsOf: repeatElement(0, count: Self.rowWords))
            poolNext.append(poolFree)
            poolFree = block
            poolFreeCount += 1
        }
        let words = Self.rowWords
        let mask = self.mask
        let word = slot >> 6
        let bit = UInt64(1) << UInt64(slot & 63)
        var live = self.live
        var dead = self.dead
        var free = poolFree
        var taken = 0
        withLevelledStorage { keys, first, head, pool, next in
            /// Unlinks the first free pool block (room was made above).
            func takeFree() -> Int {
                let block = Int(free)
                free = next[block]
                next[block] = -1
                taken += 1
                return block
            }
            for (gram, count) in bigrams {
                // The key's position, else the first tombstone or empty position on its probe path.
                var i = Self.home(gram, mask: mask)
                var reuse = -1
                while true {
                    let k = keys[i]
                    if k == gram { break }
                    if k == Self.empty {
                        if reuse >= 0 {
                            i = reuse
                            dead -= 1
                        }
                        keys[i] = gram
                        live += 1
                        break
                    }
                    if k == Self.tombstone, reuse < 0 { reuse = i }
                    i = (i + 1) & mask
                }
                first[i * words + word] |= bit
                guard count > 1 else { continue }
                // Levels 1 ..< count: follow the key's blocks, taking free ones where they end.
                var block = Int(head[i])
                if block < 0 {
                    block = takeFree()
                    head[i] = Int32(block)
                }
                pool[block * words + word] |= bit
                for _ in 2..<Int(count) {
                    var following = Int(next[block])
                    if following < 0 {
                        following = takeFree()
                        next[block] = Int32(following)
                    }
                    block = following
                    pool[block * words + word] |= bit
                }
            }
        }
        self.live = live
        self.dead = dead
        poolFree = free
        poolFreeCount -= taken
    }

    /// Removes `slot` from `key` (no-op when absent); the key goes when no slot holds it.
    /// (Levelled form: the whole-text pass over this one bigram, with the count the slot holds it.)
    mutating func remove(slot: Int, for key: UInt64) {
        guard let i = position(of: key) else { return }
        if levelled {
            let count = occurrences(at: i, slot: slot)
            guard count > 0 else { return }
            [(gram: key, count: Int32(count))].withUnsafeBufferPointer { remove(slot: slot, bigrams: $0) }
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

    /// Removes `slot` from each of `bigrams`, whose counts must be those it was inserted with. Levelled
    /// form: only the levels below the slot's count hold it, and levels are nested (a slot in level `t`
    /// is in level `t − 1`), so the first of them left empty and every level above it are empty: those
    /// blocks go back to the pool, and a key goes with its last slot. One pass over unchecked buffers.
    mutating func remove(slot: Int, bigrams: UnsafeBufferPointer<(gram: UInt64, count: Int32)>) {
        guard levelled else {
            for (gram, _) in bigrams { remove(slot: slot, for: gram) }
            return
        }
        let words = Self.rowWords
        let mask = self.mask
        let word = slot >> 6
        let clear = ~(UInt64(1) << UInt64(slot & 63))
        var live = self.live
        var dead = self.dead
        var free = poolFree
        var freed = 0
        withLevelledStorage { keys, first, head, pool, next in
            for (gram, count) in bigrams {
                let i = Self.find(gram, in: UnsafeBufferPointer(keys), mask: mask)
                guard i >= 0 else { continue }
                if count > 1 {
                    var previous = -1
                    var block = Int(head[i])
                    var level = 1
                    while level < Int(count), block >= 0 {
                        let base = block * words
                        pool[base + word] &= clear
                        var any: UInt64 = 0
                        for w in 0..<words { any |= pool[base + w] }
                        if any == 0 {
                            if previous < 0 { head[i] = -1 } else { next[previous] = -1 }
                            while block >= 0 {
                                let following = Int(next[block])
                                for w in 0..<words { pool[block * words + w] = 0 }
                                next[block] = free
                                free = Int32(block)
                                freed += 1
                                block = following
                            }
                            break
                        }
                        previous = block
                        block = Int(next[block])
                        level += 1
                    }
                }
                let base = i * words
                first[base + word] &= clear
                var any: UInt64 = 0
                for w in 0..<words { any |= first[base + w] }
                if any == 0 {
                    keys[i] = Self.tombstone
                    live -= 1
                    dead += 1
                }
            }
        }
        self.live = live
        self.dead = dead
        poolFree = free
        poolFreeCount += freed
    }

    private mutating func rebuild(size: Int) {
        let oldKeys = keys
        let oldFirstLevel = firstLevel
        let oldUpperHead = upperHead
        let oldFirsts = firsts
        let oldDense = isDense
        let oldExtras = extras
        let words = Self.rowWords
        keys = Array(repeating: Self.empty, count: size)
        mask = size - 1
        allocatePostings(size)
        live = 0
        dead = 0
        for (p, k) in oldKeys.enumerated() where k != Self.empty && k != Self.tombstone {
            var i = home(k)
            while keys[i] != Self.empty { i = (i + 1) & mask }
            keys[i] = k
            if levelled {
                for w in 0..<words { firstLevel[i * words + w] = oldFirstLevel[p * words + w] }
                upperHead[i] = oldUpperHead[p]
            } else {
                firsts[i] = oldFirsts[p]
                isDense[i] = oldDense[p]
                extras[i] = oldExtras[p]
            }
            live += 1
        }
    }

    mutating func removeAll() {
        self = BigramIndex(slots: wordsPerLevel * 64)
    }
}
