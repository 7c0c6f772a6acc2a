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
    /// Bitset of the slots holding a text (the scans read it instead of the optional entries).
    private var occupied: [UInt64]
    /// Stored lengths bit-sliced: bit `s` of plane `p` (`lengthPlanes[p · words + s / 64]`) is bit `p`
    /// of slot `s`'s length, saturated at `lengthCeiling`, so a length band is tested for all slots in a
    /// few word operations per plane.
    private var lengthPlanes: [UInt64]
    /// Lengths of 2¹⁶ − 1 and more are stored as this (a band reaching it is tested slot by slot):
    /// 16 planes cover every text the character rule lets through at any configurable capacity.
    static let lengthCeiling = (1 << 16) - 1
    private static let lengthBits = 16
    /// Slots whose times form the running minimum (`earliest`) and maximum (`latest`) of the texts
    /// stored after them, oldest first: the ring evicts its oldest text first, so each front is the
    /// extreme of the stored times (sliding-window extremes, amortised O(1) per insert).
    private var earliest: SlotQueue
    private var latest: SlotQueue
    /// Stored texts whose time is NaN (unordered, so outside both queues; then no bound holds).
    private var unorderedTimes = 0
    /// Bit-sliced shared-bigram counters of the current query, all zero between queries (reused).
    private var scratchCounters: [UInt64] = []
    /// Slots admitted in the current query (bitset) and their requirements (reused, cleared after).
    private var scratchAdmitted: [UInt64] = []
    private var scratchRequirements: [Int] = []
    /// Addresses of the level rows the current query adds (reused; see ``BigramIndex/addLevels``).
    private var scratchRows: [Int] = []

    init(capacity: Int) {
        self.capacity = capacity
        slots = Array(repeating: nil, count: capacity)
        index = BigramIndex(slots: capacity, minimumCapacity: 256)
        times = Array(repeating: 0, count: capacity)
        lengths = Array(repeating: 0, count: capacity)
        occupied = Array(repeating: 0, count: (capacity + 63) / 64)
        lengthPlanes = Array(repeating: 0, count: Self.lengthBits * ((capacity + 63) / 64))
        earliest = SlotQueue(capacity: capacity)
        latest = SlotQueue(capacity: capacity)
    }

    /// A queue of slot numbers, each at most once, in a ring of `capacity` entries.
    struct SlotQueue: Sendable {
        private var items: [Int32]
        private var head = 0
        private(set) var count = 0

        init(capacity: Int) { items = Array(repeating: 0, count: max(capacity, 1)) }

        var front: Int { Int(items[head]) }
        var back: Int { Int(items[(head + count - 1) % items.count]) }
        mutating func popFront() {
            head = head + 1 == items.count ? 0 : head + 1
            count -= 1
        }
        mutating func popBack() { count -= 1 }
        mutating func pushBack(_ slot: Int) {
            items[(head + count) % items.count] = Int32(slot)
            count += 1
        }
        mutating func removeAll() {
            head = 0
            count = 0
        }
    }

    var count: Int { occupied.reduce(0) { $0 + $1.nonzeroBitCount } }

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

    /// Adds an entry, evicting the oldest when full. `length` is a count (≥ 0).
    mutating func insert(
        senderKey: String, messageID: String, time: Double, length: Int, scalars: [UInt32], bigrams: [(gram: UInt64, count: Int32)]
    ) {
        precondition(length >= 0, "a length is a count")
        let slot = next
        next = (next + 1) % capacity
        // Moved out, not copied: no retain of its strings and arrays.
        if let old = slots[slot].take() {
            unindex(old, slot: slot)
            // The oldest text goes: it is at the front of a queue or in neither.
            if earliest.count > 0, earliest.front == slot { earliest.popFront() }
            if latest.count > 0, latest.front == slot { latest.popFront() }
            if times[slot].isNaN { unorderedTimes -= 1 }
        }
        sequence += 1
        let entry = Entry(
            sequence: sequence, senderKey: senderKey, messageID: messageID, time: time, length: length, scalars: scalars,
            bigrams: bigrams)
        bigrams.withUnsafeBufferPointer { index.insert(slot: slot, bigrams: $0) }
        slots[slot] = entry
        times[slot] = time
        lengths[slot] = length
        let word = slot >> 6
        let bit = UInt64(1) << UInt64(slot & 63)
        occupied[word] |= bit
        let saturated = min(length, Self.lengthCeiling)
        let words = occupied.count
        for plane in 0..<Self.lengthBits {
            if (saturated >> plane) & 1 != 0 {
                lengthPlanes[plane * words + word] |= bit
            } else {
                lengthPlanes[plane * words + word] &= ~bit
            }
        }
        if time.isNaN {
            unorderedTimes += 1
        } else {
            while earliest.count > 0, times[earliest.back] >= time { earliest.popBack() }
            earliest.pushBack(slot)
            while latest.count > 0, times[latest.back] <= time { latest.popBack() }
            latest.pushBack(slot)
        }
    }

    private mutating func unindex(_ entry: Entry, slot: Int) {
        entry.bigrams.withUnsafeBufferPointer { index.remove(slot: slot, bigrams: $0) }
    }

    /// Calls `body(slot)`, newest text first, for every stored text that passes `admit` and shares at
    /// least as many bigrams with the candidate as `admit` requires for it (exact multiset intersection,
    /// `Σ_g min(count_candidate(g), count_stored(g))`). `required` is the smallest requirement `admit`
    /// can return. The general form (tests); the filter uses the window and length-band form below.
    mutating func forEachSharingBigrams(
        _ bigrams: [(gram: UInt64, count: Int32)], total: Int, required: Int,
        admit: (_ time: Double, _ length: Int) -> Int?, _ body: (_ slot: Int) -> Void
    ) {
        prepareScratch()
        var requirements = scratchRequirements
        scratchRequirements = []
        if requirements.count < capacity { requirements = Array(repeating: 0, count: capacity) }
        var any = false
        for slot in 0..<capacity where (occupied[slot >> 6] >> UInt64(slot & 63)) & 1 != 0 {
            guard let requirement = admit(times[slot], lengths[slot]) else { continue }
            requirements[slot] = requirement
            scratchAdmitted[slot >> 6] |= UInt64(1) << UInt64(slot & 63)
            any = true
        }
        if any {
            requirements.withUnsafeBufferPointer { requirements in
                countShared(bigrams, total: total, required: required, requirement: { requirements[$0] }, body)
            }
        }
        scratchRequirements = requirements
    }

    /// ``forEachSharingBigrams(_:total:required:admit:_:)`` for the filter's admission: a stored text
    /// is admitted when `|time_s − time| < window` and its length lies in `lengths`, and then needs
    /// `requirement(length)` shared bigrams; `required` ≤ every such requirement. The requirement is
    /// computed only for the slots whose count already reaches `required` (the same set, fewer calls).
    @inline(__always)
    mutating func forEachSharingBigrams(
        _ bigrams: [(gram: UInt64, count: Int32)], total: Int, required: Int, around time: Double, window: Double,
        lengths band: ClosedRange<Int>, requirement: (_ length: Int) -> Int, _ body: (_ slot: Int) -> Void
    ) {
        prepareScratch()
        guard admitInWindow(around: time, window: window, lengths: band) else { return }
        let lengths = self.lengths
        lengths.withUnsafeBufferPointer { lengths in
            countShared(bigrams, total: total, required: required, requirement: { requirement(lengths[$0]) }, body)
        }
    }

    /// Calls `body(slot)`, newest text first, for every stored text within `window` of `time` whose
    /// length lies in `lengths` (the candidates when no shared-bigram bound applies).
    mutating func forEachInWindow(
        around time: Double, window: Double, lengths band: ClosedRange<Int>, _ body: (_ slot: Int) -> Void
    ) {
        prepareScratch()
        guard admitInWindow(around: time, window: window, lengths: band) else { return }
        var admitted = scratchAdmitted
        scratchAdmitted = []
        admitted.withUnsafeMutableBufferPointer { admitted in
            forEachNewestFirst(admitted) { slot, _, _ in body(slot) }
            for i in 0..<admitted.count { admitted[i] = 0 }
        }
        scratchAdmitted = admitted
    }

    /// Sizes the reused scratch buffers for this store (they are all zero between queries).
    @inline(__always)
    private mutating func prepareScratch() {
        let words = index.wordsPerLevel
        if scratchAdmitted.count < words { scratchAdmitted = Array(repeating: 0, count: words) }
    }

    /// Sets in `scratchAdmitted` the occupied slots within `window` of `time` with a length in `band`;
    /// whether any is.
    ///
    /// When the stored times' extremes are both within the window, every stored time is: the rounded
    /// difference `t − time` never decreases with `t`, and `time − t` is its exact negation, so
    /// `|t − time| < window` for the extremes bounds it for every `t` between them. Then the band is
    /// tested on the bit-sliced lengths (when it ends below the saturated length), otherwise slot by slot.
    @inline(__always)
    private mutating func admitInWindow(around time: Double, window: Double, lengths band: ClosedRange<Int>) -> Bool {
        let low = band.lowerBound
        let high = band.upperBound
        var any: UInt64 = 0
        let words = index.wordsPerLevel
        let allInWindow =
            unorderedTimes == 0 && earliest.count > 0 && abs(times[earliest.front] - time) < window
            && abs(times[latest.front] - time) < window
        if allInWindow, high < Self.lengthCeiling {
            let low = max(low, 0)
            guard low <= high else { return false }
            // Planes at and above `top` hold no bit of `high` (nor of `low` ≤ `high`): any set there is too long.
            let top = Int.bitWidth - high.leadingZeroBitCount
            occupied.withUnsafeBufferPointer { occupied in
                lengthPlanes.withUnsafeBufferPointer { planes in
                    scratchAdmitted.withUnsafeMutableBufferPointer { admitted in
                        for word in 0..<words {
                            var tooLong: UInt64 = 0
                            for plane in top..<Self.lengthBits { tooLong |= planes[plane * words + word] }
                            // length ≥ low and length ≤ high, from the top plane down (greater, equal).
                            var aboveLow = tooLong
                            var equalLow = ~tooLong
                            var aboveHigh = tooLong
                            var equalHigh = ~tooLong
                            var plane = top - 1
                            while plane >= 0 {
                                let c = planes[plane * words + word]
                                if (low >> plane) & 1 == 1 {
                                    equalLow &= c
                                } else {
                                    aboveLow |= equalLow & c
                                    equalLow &= ~c
                                }
                                if (high >> plane) & 1 == 1 {
                                    equalHigh &= c
                                } else {
                                    aboveHigh |= equalHigh & c
                                    equalHigh &= ~c
                                }
                                plane -= 1
                            }
                            let passed = occupied[word] & (aboveLow | equalLow) & ~aboveHigh
                            admitted[word] = passed
                            any |= passed
                        }
                    }
                }
            }
            return any != 0
        }
        let span = UInt(bitPattern: high &- low)
        occupied.withUnsafeBufferPointer { occupied in
            times.withUnsafeBufferPointer { times in
                lengths.withUnsafeBufferPointer { lengths in
                    scratchAdmitted.withUnsafeMutableBufferPointer { admitted in
                        for word in 0..<words {
                            var bits = occupied[word]
                            var passed: UInt64 = 0
                            while bits != 0 {
                                let bit = bits.trailingZeroBitCount
                                bits &= bits &- 1
                                let slot = word << 6 | bit
                                if abs(times[slot] - time) < window, UInt(bitPattern: lengths[slot] &- low) <= span {
                                    passed |= UInt64(1) << UInt64(bit)
                                }
                            }
                            admitted[word] = passed
                            any |= passed
                        }
                    }
                }
            }
        }
        return any != 0
    }

    /// Visits the set bits of `mask` newest slot first: the ring's slots below `next` downwards, then
    /// those from `next` up, downwards. `body` gets the slot, its word and its bit.
    @inline(__always)
    private func forEachNewestFirst(_ mask: UnsafeMutableBufferPointer<UInt64>, _ body: (_ slot: Int, _ word: Int, _ bit: Int) -> Void) {
        for (low, high) in [(0, next), (next, capacity)] where low < high {
            var word = (high - 1) >> 6
            while word >= low >> 6 {
                var bits = mask[word]
                let base = word << 6
                if base + 64 > high { bits &= (UInt64(1) << UInt64(high - base)) &- 1 }
                if base < low { bits &= ~((UInt64(1) << UInt64(low - base)) &- 1) }
                while bits != 0 {
                    let bit = 63 - bits.leadingZeroBitCount
                    bits &= ~(UInt64(1) << UInt64(bit))
                    body(base + bit, word, bit)
                }
                word -= 1
            }
        }
    }

    /// The intersection with every admitted slot (the bits of `scratchAdmitted`) at once, then `body`
    /// for those reaching `requirement(slot)`, newest first; leaves the scratch buffers zeroed.
    ///
    /// Small stores (levelled index): the level bitsets the candidate's bigrams add are summed as
    /// 4-word rows with carry-save adders (``BigramIndex/addLevels``), a few vector operations per row
    /// instead of a carry rippling through the planes word by word. Every slot is counted; non-admitted
    /// slots are masked out at the end. Large stores: each candidate bigram adds its slot bitset (or short slot
    /// list) and, when repeated, its extra occurrences (``BigramIndex``), masked by the admitted slots
    /// first so the others add no carries. Either way the counters are bit-sliced, one bit plane per
    /// counter bit, wide enough for every count (a count never exceeds the rows added, nor the
    /// candidate's bigram occurrences, `total` for the filter), so they never overflow.
    ///
    /// `required` is the smallest requirement: a bit-sliced comparison of all counters with it picks
    /// the slots worth reading a count for.
    @inline(__always)
    private mutating func countShared(
        _ bigrams: [(gram: UInt64, count: Int32)], total: Int, required: Int, requirement: (_ slot: Int) -> Int,
        _ body: (_ slot: Int) -> Void
    ) {
        let words = index.wordsPerLevel
        // Plane p of the counters holds word w at p · stride + w: 4 words per plane for the levelled
        // index (its rows are 4-word vectors; words past `words` stay zero), `words` otherwise.
        let stride = index.levelled ? BigramIndex.rowWords : words
        // The candidate's bigram occurrences (`total` for the filter): no count can exceed them, so the
        // counters get that many bits whatever `total` says, and the level rows fit in that many entries.
        var occurrences = 0
        for (_, count) in bigrams { occurrences += Int(count) }
        var planes = max(1, Int.bitWidth - max(total, occurrences, 1).leadingZeroBitCount)
        // Taken out (and put back after), so mutating them copies nothing.
        var counters = scratchCounters
        var admitted = scratchAdmitted
        var rows = scratchRows
        scratchCounters = []
        scratchAdmitted = []
        scratchRows = []
        defer {
            scratchCounters = counters
            scratchAdmitted = admitted
            scratchRows = rows
        }
        if index.levelled, rows.count < occurrences { rows = Array(repeating: 0, count: occurrences) }
        if counters.count < planes * stride { counters = Array(repeating: 0, count: planes * stride) }
        counters.withUnsafeMutableBufferPointer { counters in
            admitted.withUnsafeMutableBufferPointer { admitted in
                if index.levelled {
                    let n = rows.withUnsafeMutableBufferPointer { rows in
                        bigrams.withUnsafeBufferPointer { bigrams in
                            index.addLevels(bigrams, into: counters.baseAddress!, rows: rows.baseAddress!)
                        }
                    }
                    // A count never exceeds the rows added: fewer planes when some bigrams are absent.
                    planes = max(1, Int.bitWidth - max(n, 1).leadingZeroBitCount)
                } else {
                    countListed(bigrams, counters: counters, admitted: admitted)
                }
                // admitted ∧ (counter ≥ required), from the top plane down; none when `required` needs more
                // bits than the counters have (a count never exceeds the rows added).
                let required = max(required, 0)
                let reachable = required < (1 << planes)
                for word in 0..<words {
                    var greater: UInt64 = 0
                    var equal: UInt64 = ~0
                    for plane in Swift.stride(from: planes - 1, through: 0, by: -1) {
                        let c = counters[plane * stride + word]
                        if (required >> plane) & 1 == 1 {
                            equal &= c
                        } else {
                            greater |= equal & c
                            equal &= ~c
                        }
                    }
                    admitted[word] &= reachable ? (greater | equal) : 0
                }
                forEachNewestFirst(admitted) { slot, word, bit in
                    var shared = 0
                    for plane in 0..<planes { shared |= Int((counters[plane * stride + word] >> UInt64(bit)) & 1) << plane }
                    if shared >= requirement(slot) { body(slot) }
                }
                for i in 0..<(planes * stride) { counters[i] = 0 }
                for i in 0..<words { admitted[i] = 0 }
            }
        }
    }

    /// Large stores: adds every candidate bigram's postings, masked by the admitted slots, into the counters.
    @inline(__always)
    private func countListed(
        _ bigrams: [(gram: UInt64, count: Int32)], counters: UnsafeMutableBufferPointer<UInt64>,
        admitted: UnsafeMutableBufferPointer<UInt64>
    ) {
        let words = index.wordsPerLevel
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
                    for word in 0..<words {
                        var carry = firsts[word] & admitted[word]
                        var plane = 0
                        while carry != 0 {
                            let c = counters[plane * words + word]
                            counters[plane * words + word] = c ^ carry
                            carry &= c
                            plane += 1
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
        for i in occupied.indices { occupied[i] = 0 }
        earliest.removeAll()
        latest.removeAll()
        unorderedTimes = 0
        index.removeAll()
        next = 0
    }

    /// Index size, for stats and the memory bound.
    var indexedGrams: Int { index.count }
}
