/// Inverted index bigram → postings (stored-text slot, occurrences), as an open-addressing hash table.
///
/// Swift's `Dictionary` hashes every `UInt64` key with SipHash; a judgment touches ~3 lookups per
/// bigram (query, insert, evict), so a multiplicative hash over a power-of-two table is several times
/// cheaper. Keys are never 0 (a bigram of two NULs cannot survive normalisation, which drops controls),
/// so 0 marks an empty slot; deleted keys become tombstones and the table is rebuilt when live keys
/// plus tombstones pass half its size. Size is bounded by the stored texts' distinct bigrams.
struct BigramIndex: Sendable {
    struct Posting: Sendable {
        var slot: Int32
        var count: Int32
    }

    private static let empty: UInt64 = 0
    private static let tombstone: UInt64 = .max

    private var keys: [UInt64]
    private var lists: [[Posting]]
    private var mask: Int
    private var live = 0
    private var dead = 0

    init(minimumCapacity: Int = 256) {
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

    /// The postings at a position returned by ``position(of:)``.
    @inline(__always)
    func postings(at position: Int) -> [Posting] { lists[position] }

    @inline(__always)
    func postingCount(at position: Int) -> Int { lists[position].count }

    /// Reads the postings at `position` without copying the list.
    @inline(__always)
    func withPostings<R>(at position: Int, _ body: (UnsafeBufferPointer<Posting>) -> R) -> R {
        lists[position].withUnsafeBufferPointer(body)
    }

    mutating func append(_ posting: Posting, for key: UInt64) {
        if let i = position(of: key) {
            lists[i].append(posting)
            return
        }
        if (live + dead + 1) * 2 > keys.count { rebuild(size: live * 4 > keys.count ? keys.count * 2 : keys.count) }
        var i = home(key)
        while keys[i] != Self.empty && keys[i] != Self.tombstone { i = (i + 1) & mask }
        if keys[i] == Self.tombstone { dead -= 1 }
        keys[i] = key
        lists[i] = [posting]
        live += 1
    }

    /// Removes `slot`'s posting under `key` (no-op when absent).
    mutating func remove(slot: Int32, for key: UInt64) {
        guard let i = position(of: key) else { return }
        // Lists stay in insertion order and the store evicts its oldest text, so the posting is
        // almost always first: found at once, removed with one short memmove.
        if let p = lists[i].firstIndex(where: { $0.slot == slot }) { lists[i].remove(at: p) }
        if lists[i].isEmpty {
            keys[i] = Self.tombstone
            lists[i] = []
            live -= 1
            dead += 1
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
        self = BigramIndex()
    }
}
