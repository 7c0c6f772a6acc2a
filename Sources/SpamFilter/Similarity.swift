/// The "3-peak cross-correlation" similarity of SPAM-FILTER.md §5, on normalised scalar arrays.
///
/// - `C(d) = #{ i : a[i] == b[i − d] }` for every shift `d` in `−(n−1) … (m−1)`.
/// - `D` = the 3 shifts with the largest `C(d)` (ties: smaller `|d|`, then smaller `d`).
/// - `align(a, b)` = the longest chain of matched pairs `(i, j)`, strictly increasing in both `i` and `j`,
///   whose diagonals `i − j` all lie in `D` (switching between the 3 diagonals as often as needed).
/// - `similarity = align / max(m, n)`, 1.0 for two empty strings.
///
/// `upperBound = (C(d1) + C(d2) + C(d3)) / max(m, n)` is never below the similarity: every matched pair of
/// the alignment sits on one of the 3 diagonals and each diagonal holds at most `C(d)` matches.
public enum Similarity {
    /// The chosen diagonals and their match counts.
    public struct Peaks: Sendable, Equatable {
        public var shifts: [Int]
        public var counts: [Int]
        public var sum: Int { counts.reduce(0, +) }
    }

    /// `similarity(a, b)` computed directly (allocates; the filter uses ``Comparator``).
    public static func similarity(_ a: [UInt32], _ b: [UInt32]) -> Double {
        var comparator = Comparator()
        comparator.load(a)
        return comparator.similarity(to: b)
    }

    /// `ub(a, b)`, the 3-fullest-diagonals bound.
    public static func upperBound(_ a: [UInt32], _ b: [UInt32]) -> Double {
        var comparator = Comparator()
        comparator.load(a)
        let maxLength = max(a.count, b.count)
        guard maxLength > 0 else { return 1 }
        return Double(comparator.peaks(against: b).sum) / Double(maxLength)
    }

    /// Whether `align` matches out of `maxLength` reach `threshold` (the one comparison every path uses).
    @inline(__always)
    public static func reaches(_ align: Int, of maxLength: Int, threshold: Double) -> Bool {
        maxLength == 0 ? true : Double(align) / Double(maxLength) >= threshold
    }

    /// The smallest `k` with `k / maxLength ≥ threshold` (0 for empty strings).
    public static func minimumAlignment(maxLength: Int, threshold: Double) -> Int {
        guard maxLength > 0 else { return 0 }
        var k = max(0, Int((threshold * Double(maxLength)).rounded(.down)) - 1)
        while k <= maxLength, !reaches(k, of: maxLength, threshold: threshold) { k += 1 }
        return k
    }

    /// Compares one text (the candidate, loaded once) against many stored texts, reusing its buffers.
    ///
    /// Loading builds an occurrence table of the candidate's scalars, so counting the diagonals
    /// against `b` costs `n + Σ_c count_a(c)·count_b(c)` instead of `m·n`.
    public struct Comparator: Sendable {
        private(set) var a: [UInt32] = []
        private var keys: [UInt32] = []
        private var starts: [Int32] = []
        private var counts: [Int32] = []
        private var positions: [Int32] = []
        private var mask = 0
        private var diagonals: [Int32] = []
        private var prefixBest: [Int32] = []
        /// Table slots holding the loaded text's scalars, and each position's slot (reused between loads).
        private var occupied: [Int32] = []
        private var slotOf: [Int32] = []
        /// The loaded text's bigrams for ``diagonalBigramPeaks(against:)``, each with the block of its start
        /// positions in `pairPositions` (built on first use per load; `pairOccupied` lists the cells in use).
        private var pairKeys: [UInt64] = []
        private var pairStarts: [Int32] = []
        private var pairCounts: [Int32] = []
        private var pairPositions: [Int32] = []
        private var pairOccupied: [Int32] = []
        private var occupiedPairs = 0
        private var pairSlotOf: [Int32] = []
        private var pairMask = 0
        private var pairsBuilt = false
        private var scalarsBuilt = false
        /// Per-diagonal bigram matches, all zero between calls (only the touched entries are cleared).
        private var bigramDiagonals: [Int32] = []
        private var touched: [Int32] = []

        public init() {}

        private static let empty: UInt32 = .max

        /// Takes `text` as the candidate. Its tables are built on first use: most candidates meet no stored
        /// text whose bigram check (``diagonalBigramPeaks(against:)``) lets the scalar count run.
        public mutating func load(_ text: [UInt32]) {
            a = text
            scalarsBuilt = false
            pairsBuilt = false
        }

        /// The occurrence table of the loaded text's scalars.
        private mutating func buildScalars() {
            scalarsBuilt = true
            let text = a
            var size = 16
            while size < text.count * 2 { size <<= 1 }
            // The table only grows: a smaller text reuses it (and still probes with the table's own mask).
            if keys.count < size {
                keys = [UInt32](repeating: Self.empty, count: size)
                starts = [Int32](repeating: 0, count: size)
                counts = [Int32](repeating: 0, count: size)
                occupied.removeAll(keepingCapacity: true)
            } else {
                size = keys.count
                // Only the previous text's slots are in use: clear those, not the whole table.
                for k in occupied {
                    keys[Int(k)] = Self.empty
                    counts[Int(k)] = 0
                }
                occupied.removeAll(keepingCapacity: true)
            }
            mask = size - 1
            if slotOf.count < text.count { slotOf = [Int32](repeating: 0, count: text.count) }
            for (i, c) in text.enumerated() {
                var slot = Self.home(c, mask: mask)
                while keys[slot] != Self.empty && keys[slot] != c { slot = (slot + 1) & mask }
                if keys[slot] == Self.empty {
                    keys[slot] = c
                    occupied.append(Int32(slot))
                }
                counts[slot] += 1
                slotOf[i] = Int32(slot)
            }
            // Each scalar's positions form one block of `positions`, ascending (block order is immaterial).
            var running: Int32 = 0
            for k in occupied {
                starts[Int(k)] = running
                running += counts[Int(k)]
                counts[Int(k)] = 0
            }
            if positions.count < text.count { positions = [Int32](repeating: 0, count: text.count) }
            for i in 0..<text.count {
                let slot = Int(slotOf[i])
                positions[Int(starts[slot] + counts[slot])] = Int32(i)
                counts[slot] += 1
            }
        }

        private static let emptyPair: UInt64 = .max

        /// Groups the loaded text's bigram start positions by bigram (`a[i] << 32 | a[i+1]`), in the layout of
        /// the scalar table: an open-addressing table of bigrams, each with one block of `pairPositions`.
        private mutating func buildPairs() {
            pairsBuilt = true
            let pairs = a.count - 1
            guard pairs > 0 else { return }
            // Only the previous text's cells are in use: clear those, not the whole table.
            for k in 0..<occupiedPairs {
                pairKeys[Int(pairOccupied[k])] = Self.emptyPair
                pairCounts[Int(pairOccupied[k])] = 0
            }
            occupiedPairs = 0
            var size = 16
            while size < pairs * 2 { size <<= 1 }
            if pairKeys.count < size {
                pairKeys = [UInt64](repeating: Self.emptyPair, count: size)
                pairStarts = [Int32](repeating: 0, count: size)
                pairCounts = [Int32](repeating: 0, count: size)
            }
            if pairSlotOf.count < pairs { pairSlotOf = [Int32](repeating: 0, count: pairs) }
            if pairPositions.count < pairs { pairPositions = [Int32](repeating: 0, count: pairs) }
            if pairOccupied.count < pairs { pairOccupied = [Int32](repeating: 0, count: pairs) }
            let mask = pairKeys.count - 1
            pairMask = mask
            var used = 0
            a.withUnsafeBufferPointer { text in
                pairKeys.withUnsafeMutableBufferPointer { keys in
                    pairStarts.withUnsafeMutableBufferPointer { starts in
                        pairCounts.withUnsafeMutableBufferPointer { counts in
                            pairPositions.withUnsafeMutableBufferPointer { positions in
                                pairOccupied.withUnsafeMutableBufferPointer { occupied in
                                    pairSlotOf.withUnsafeMutableBufferPointer { slotOf in
                                        for i in 0..<pairs {
                                            let key = UInt64(text[i]) << 32 | UInt64(text[i + 1])
                                            var slot = Self.pairHash(key) & mask
                                            while true {
                                                let k = keys[slot]
                                                if k == key { break }
                                                if k == Self.emptyPair {
                                                    keys[slot] = key
                                                    occupied[used] = Int32(slot)
                                                    used += 1
                                                    break
                                                }
                                                slot = (slot + 1) & mask
                                            }
                                            counts[slot] += 1
                                            slotOf[i] = Int32(slot)
                                        }
                                        var running: Int32 = 0
                                        for k in 0..<used {
                                            let slot = Int(occupied[k])
                                            starts[slot] = running
                                            running += counts[slot]
                                            counts[slot] = 0
                                        }
                                        for i in 0..<pairs {
                                            let slot = Int(slotOf[i])
                                            positions[Int(starts[slot] + counts[slot])] = Int32(i)
                                            counts[slot] += 1
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            occupiedPairs = used
        }

        /// Whether ``diagonalBigramPeaks(against:)`` is worth running before the scalar count: not when the
        /// loaded text repeats its bigrams more than 4 times on average (`"abababab…"`, a tiny alphabet), where
        /// counting bigram matches costs about as much as counting scalar matches and rules out little.
        public mutating func bigramCheckPays() -> Bool {
            if !pairsBuilt { buildPairs() }
            return occupiedPairs * Self.maximumBigramRepetition >= a.count - 1
        }

        /// See ``bigramCheckPays()``: measured on random two-letter junk, the check cost 30 % more instructions.
        static let maximumBigramRepetition = 4

        @inline(__always)
        private static func pairHash(_ key: UInt64) -> Int { Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) }

        /// The sum of the 3 largest `B(d) = #{ i : a[i] a[i+1] == b[i−d] b[i−d+1] }` (bigram matches on one
        /// diagonal) of the loaded text `a` against `b`.
        ///
        /// A cheap necessary condition for `align(a, b) ≥ k`: the alignment's matched pairs form at most
        /// `(m − k) + (n − k) + 1` runs of consecutive pairs, each run of length L on one diagonal of `D` gives
        /// L − 1 bigram matches on that diagonal, so `Σ_{d ∈ D} B(d) ≥ 3k − m − n − 1`, and the 3 largest
        /// `B(d)` sum to at least that. Costs one lookup per bigram of `b` plus `Σ_g count_a(g)·count_b(g)` over
        /// shared bigrams `g`, far fewer than the scalar matches ``topDiagonals(against:)`` counts.
        public mutating func diagonalBigramPeaks(against b: [UInt32]) -> Int {
            let m = a.count
            let n = b.count
            guard m >= 2, n >= 2 else { return 0 }
            if !pairsBuilt { buildPairs() }
            let width = m + n - 3
            if bigramDiagonals.count < width {
                bigramDiagonals = [Int32](repeating: 0, count: max(width, bigramDiagonals.count * 2))
                touched = [Int32](repeating: 0, count: bigramDiagonals.count)
            }
            let mask = pairMask
            var t0: Int32 = 0
            var t1: Int32 = 0
            var t2: Int32 = 0
            b.withUnsafeBufferPointer { b in
                pairKeys.withUnsafeBufferPointer { keys in
                    pairStarts.withUnsafeBufferPointer { starts in
                        pairCounts.withUnsafeBufferPointer { counts in
                            pairPositions.withUnsafeBufferPointer { positions in
                                touched.withUnsafeMutableBufferPointer { touched in
                                    bigramDiagonals.withUnsafeMutableBufferPointer { diag in
                                        var used = 0
                                        for j in 0..<(n - 1) {
                                            let key = UInt64(b[j]) << 32 | UInt64(b[j + 1])
                                            var slot = Self.pairHash(key) & mask
                                            while true {
                                                let k = keys[slot]
                                                if k == key { break }
                                                if k == Self.emptyPair { slot = -1; break }
                                                slot = (slot + 1) & mask
                                            }
                                            guard slot >= 0 else { continue }
                                            let base = n - 2 - j
                                            let start = Int(starts[slot])
                                            for p in start..<(start + Int(counts[slot])) {
                                                let index = Int(positions[p]) + base
                                                let value = diag[index] &+ 1
                                                diag[index] = value
                                                if value == 1 {
                                                    touched[used] = Int32(index)
                                                    used += 1
                                                }
                                            }
                                        }
                                        // The 3 largest, and the touched diagonals back to zero for the next call.
                                        for t in 0..<used {
                                            let index = Int(touched[t])
                                            let value = diag[index]
                                            diag[index] = 0
                                            guard value > t2 else { continue }
                                            if value > t0 {
                                                (t0, t1, t2) = (value, t0, t1)
                                            } else if value > t1 {
                                                (t1, t2) = (value, t1)
                                            } else {
                                                t2 = value
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            return Int(t0) + Int(t1) + Int(t2)
        }

        /// Where `c`'s probe path starts in a scalar table of `mask + 1` slots.
        @inline(__always)
        private static func home(_ c: UInt32, mask: Int) -> Int { Int((c &* 0x9E37_79B1) >> 7) & mask }

        /// Slot of `c` in the scalar table `keys`, or -1 when the loaded text does not contain it.
        @inline(__always)
        private static func find(_ c: UInt32, in keys: UnsafeBufferPointer<UInt32>, mask: Int) -> Int {
            var slot = home(c, mask: mask)
            while true {
                let k = keys[slot]
                if k == c { return slot }
                if k == empty { return -1 }
                slot = (slot + 1) & mask
            }
        }

        /// The 3 fullest diagonals of the loaded text against `b`.
        public mutating func peaks(against b: [UInt32]) -> Peaks {
            let top = topDiagonals(against: b)
            let shifts = [top.1.d, top.2.d, top.3.d]
            let counts = [top.1.c, top.2.c, top.3.c]
            return Peaks(shifts: Array(shifts.prefix(top.filled)), counts: Array(counts.prefix(top.filled)))
        }

        /// The 3 fullest diagonals, best first, in a fixed tuple (`filled` of them are set: fewer only when
        /// `m + n − 1 < 3`, none when a text is empty). Ordered by ``better(_:than:)``.
        mutating func topDiagonals(
            against b: [UInt32]
        ) -> (filled: Int, (d: Int, c: Int), (d: Int, c: Int), (d: Int, c: Int)) {
            let m = a.count
            let n = b.count
            var t0 = (d: 0, c: 0)
            var t1 = (d: 0, c: 0)
            var t2 = (d: 0, c: 0)
            var filled = 0
            guard m > 0, n > 0 else { return (0, t0, t1, t2) }
            if !scalarsBuilt { buildScalars() }
            let width = m + n - 1
            if diagonals.count < width { diagonals = [Int32](repeating: 0, count: max(width, diagonals.count * 2)) }
            keys.withUnsafeBufferPointer { keys in
                starts.withUnsafeBufferPointer { starts in
                    counts.withUnsafeBufferPointer { counts in
                        positions.withUnsafeBufferPointer { positions in
                            diagonals.withUnsafeMutableBufferPointer { diag in
                                for idx in 0..<width { diag[idx] = 0 }
                                b.withUnsafeBufferPointer { b in
                                    for j in 0..<n {
                                        let found = Self.find(b[j], in: keys, mask: mask)
                                        guard found >= 0 else { continue }
                                        let base = n - 1 - j
                                        let start = Int(starts[found])
                                        for p in start..<(start + Int(counts[found])) {
                                            diag[Int(positions[p]) + base] &+= 1
                                        }
                                    }
                                }
                                for idx in 0..<width {
                                    let c = Int(diag[idx])
                                    // Most diagonals are below the third best: rejected without the tie-breaks.
                                    if filled == 3, c < t2.c { continue }
                                    let x = (d: idx - (n - 1), c: c)
                                    if filled == 3, !Self.better(x, than: t2) { continue }
                                    if filled == 0 {
                                        t0 = x
                                    } else if Self.better(x, than: t0) {
                                        t2 = t1
                                        t1 = t0
                                        t0 = x
                                    } else if filled == 1 || Self.better(x, than: t1) {
                                        t2 = t1
                                        t1 = x
                                    } else {
                                        t2 = x
                                    }
                                    filled = min(filled + 1, 3)
                                }
                            }
                        }
                    }
                }
            }
            return (filled, t0, t1, t2)
        }

        /// The order of the peaks: more matches first, then smaller |d|, then smaller d.
        @inline(__always)
        static func better(_ x: (d: Int, c: Int), than y: (d: Int, c: Int)) -> Bool {
            if x.c != y.c { return x.c > y.c }
            if abs(x.d) != abs(y.d) { return abs(x.d) < abs(y.d) }
            return x.d < y.d
        }

        /// `align(a, b)` restricted to the given diagonals: O(3·3·m).
        ///
        /// With `required > 0` it may stop early and return some value below `required` once the chain cannot
        /// reach it: a chain gains at most one pair per row, so after row `i` it can end no longer than the
        /// longest so far plus the `m − 1 − i` rows left. A pair that reaches `required` never stops early and
        /// gets its exact alignment.
        public mutating func align(against b: [UInt32], shifts: [Int], required: Int = 0) -> Int {
            let m = a.count
            let n = b.count
            let t = shifts.count
            guard m > 0, n > 0, t > 0 else { return 0 }
            if prefixBest.count < t * m { prefixBest = [Int32](repeating: 0, count: 3 * m) }
            var best = 0
            a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    prefixBest.withUnsafeMutableBufferPointer { pm in
                        // pm[k * m + i] = longest chain ending on diagonal k at a row ≤ i.
                        for i in 0..<m {
                            var longest: Int32 = 0
                            for k in 0..<t {
                                let j = i - shifts[k]
                                var f: Int32 = 0
                                if j >= 0, j < n, a[i] == b[j] {
                                    var previous: Int32 = 0
                                    for q in 0..<t {
                                        // Chain predecessors (i', j') on diagonal q need i' < i and j' < j.
                                        let bound = min(i - 1, i - shifts[k] + shifts[q] - 1)
                                        if bound >= 0 { previous = max(previous, pm[q * m + bound]) }
                                    }
                                    f = previous + 1
                                }
                                let carried = i > 0 ? pm[k * m + i - 1] : 0
                                let value = max(carried, f)
                                pm[k * m + i] = value
                                longest = max(longest, value)
                            }
                            best = Int(longest)
                            if best + (m - 1 - i) < required { return }
                        }
                    }
                }
            }
            return best
        }

        /// Full similarity of the loaded text to `b`.
        public mutating func similarity(to b: [UInt32]) -> Double {
            let maxLength = max(a.count, b.count)
            guard maxLength > 0 else { return 1 }
            let peaks = peaks(against: b)
            return Double(align(against: b, shifts: peaks.shifts)) / Double(maxLength)
        }
    }
}
