import BotSupport
import Testing
import SpamFilter
import SpamFilterReference

@Suite("Spam filter similarity (3-peak cross-correlation)")
struct SimilarityTests {
    @Test func identicalAndEmpty() {
        #expect(Similarity.similarity([], []) == 1.0)
        #expect(Similarity.similarity(scalars("abc"), []) == 0.0)
        #expect(Similarity.similarity(scalars("hello world"), scalars("hello world")) == 1.0)
    }

    @Test func toleratesInsertionsAndDeletions() {
        // One insertion and one deletion: 3 diagonals cover it.
        let a = scalars("free tokens at the main stage now")
        let b = scalars("free tokens XX at the main stage")
        #expect(Similarity.similarity(a, b) == ReferenceSpamFilter.similarity(a, b))
        #expect(Similarity.similarity(a, b) >= 0.8)
    }

    @Test func thresholdBoundaryIsInclusive() {
        // 20 distinct scalars; 4 substitutions → 16/20 = 0.80 exactly, 5 → 0.75.
        let base = (0..<20).map { UInt32(0x4E00 + $0) }
        var four = base
        for i in [2, 7, 12, 17] { four[i] = UInt32(0x3040 + i) }
        var five = four
        five[19] = 0x30FF
        #expect(Similarity.similarity(base, four) == 0.8)
        #expect(Similarity.similarity(base, five) == 0.75)
    }

    /// Why the index is on bigrams: this pair is 6/7 similar and shares no trigram.
    @Test func nearCopyWithoutSharedTrigramExists() {
        let a = scalars("abxcdef")
        let b = scalars("abcdyef")
        #expect(Similarity.similarity(a, b) == 6.0 / 7.0)
        let trigrams = { (s: [UInt32]) in Set((0..<(s.count - 2)).map { [s[$0], s[$0 + 1], s[$0 + 2]] }) }
        #expect(trigrams(a).isDisjoint(with: trigrams(b)))
    }

    @Test(arguments: Array(2...26))
    func upperBoundNeverUndercountsAndFastPathMatchesDefinition(alphabet: Int) {
        var rng = SeededRandom(seed: UInt64(alphabet) * 7919)
        var comparator = Similarity.Comparator()
        for _ in 0..<300 {
            let m = Int(rng.next() % 40)
            var a = (0..<m).map { _ in UInt32(0x61 + rng.next() % UInt64(alphabet)) }
            var b: [UInt32]
            if rng.next() % 2 == 0, !a.isEmpty {
                // A mutated copy: the interesting region near the threshold.
                b = a
                for _ in 0..<(rng.next() % 6) {
                    let position = Int(rng.next() % UInt64(max(b.count, 1)))
                    switch rng.next() % 3 {
                    case 0 where !b.isEmpty: b.remove(at: min(position, b.count - 1))
                    case 1: b.insert(UInt32(0x61 + rng.next() % UInt64(alphabet)), at: min(position, b.count))
                    default: if !b.isEmpty { b[min(position, b.count - 1)] = UInt32(0x61 + rng.next() % UInt64(alphabet)) }
                    }
                }
            } else {
                b = (0..<Int(rng.next() % 40)).map { _ in UInt32(0x61 + rng.next() % UInt64(alphabet)) }
            }
            if rng.next() % 5 == 0 { swap(&a, &b) }
            let exact = ReferenceSpamFilter.similarity(a, b)
            comparator.load(a)
            let fast = comparator.similarity(to: b)
            #expect(fast == exact, "\(a) \(b)")
            let bound = Similarity.upperBound(a, b)
            #expect(bound >= exact, "bound \(bound) < similarity \(exact) for \(a) \(b)")
            let peaks = comparator.peaks(against: b)
            #expect(peaks.shifts == ReferenceSpamFilter.peaks(a, b).map(\.d))
            // The early stop: exact when the alignment reaches `required`, below `required` otherwise.
            let align = ReferenceSpamFilter.align(a, b)
            for required in [align - 1, align, align + 1, Int(rng.next() % 41)] where required > 0 {
                let stopped = comparator.align(against: b, shifts: peaks.shifts, required: required)
                #expect(align >= required ? stopped == align : stopped < required, "required \(required): \(stopped) vs \(align)")
            }
        }
    }

    /// The bigram pre-check: `diagonalBigramPeaks` is the sum of the 3 largest per-diagonal bigram match
    /// counts (checked against the definition), and never below `3·align − m − n − 1`, so rejecting a pair
    /// under `3k − m − n − 1` never drops a near-copy. Small alphabets and edited copies make alignments
    /// that switch diagonals; one comparator is reused across loads so a stale bigram table would show.
    @Test(arguments: Array(2...12))
    func diagonalBigramPeaksMatchTheDefinitionAndBoundTheAlignment(alphabet: Int) {
        var rng = SeededRandom(seed: UInt64(alphabet) * 104_729)
        var comparator = Similarity.Comparator()
        var tight = 0
        for round in 0..<400 {
            let letters = (0..<alphabet).map { UInt32(round % 3 == 0 ? 0x4E00 + $0 : 0x61 + $0) }
            let m = Int(rng.next() % UInt64(round % 4 == 0 ? 90 : 30))
            let a = (0..<m).map { _ in letters[Int(rng.next() % UInt64(alphabet))] }
            var b = a
            if rng.next() % 3 == 0 || b.isEmpty {
                b = (0..<Int(rng.next() % 40)).map { _ in letters[Int(rng.next() % UInt64(alphabet))] }
            } else {
                for _ in 0..<(rng.next() % 8) {
                    let position = Int(rng.next() % UInt64(max(b.count, 1)))
                    switch rng.next() % 3 {
                    case 0 where !b.isEmpty: b.remove(at: min(position, b.count - 1))
                    case 1: b.insert(letters[Int(rng.next() % UInt64(alphabet))], at: min(position, b.count))
                    default: if !b.isEmpty { b[min(position, b.count - 1)] = letters[Int(rng.next() % UInt64(alphabet))] }
                    }
                }
            }
            comparator.load(a)
            let peaks = comparator.diagonalBigramPeaks(against: b)
            // The definition, directly: B(d) for every shift, the 3 largest summed.
            var perShift: [Int] = []
            if a.count >= 2, b.count >= 2 {
                for d in -(b.count - 2)...(a.count - 2) {
                    var matches = 0
                    for i in 0..<(a.count - 1) where i - d >= 0 && i - d < b.count - 1 {
                        if a[i] == b[i - d], a[i + 1] == b[i - d + 1] { matches += 1 }
                    }
                    perShift.append(matches)
                }
            }
            #expect(peaks == perShift.sorted(by: >).prefix(3).reduce(0, +), "\(a) \(b)")
            let align = ReferenceSpamFilter.align(a, b)
            #expect(peaks >= 3 * align - a.count - b.count - 1, "peaks \(peaks) align \(align) for \(a) \(b)")
            if align > 0, peaks == 3 * align - a.count - b.count - 1 { tight += 1 }
        }
        // The bound is attained on some pairs (it is not trivially loose).
        if alphabet <= 4 { #expect(tight > 0) }
    }

    /// The bigram check is skipped for texts that repeat a few bigrams (where it rules out little), and
    /// used for chat; a reload re-decides.
    @Test func bigramCheckIsUsedForChatAndSkippedForTinyAlphabets() {
        var comparator = Similarity.Comparator()
        comparator.load(scalars(String(repeating: "ab", count: 20)))
        #expect(comparator.bigramCheckPays() == false)
        comparator.load(scalars("see you at the main stage after the fireworks"))
        #expect(comparator.bigramCheckPays() == true)
        comparator.load(scalars("abababab"))  // 7 bigrams, 2 distinct: 2 · 4 ≥ 7
        #expect(comparator.bigramCheckPays() == true)
        comparator.load(scalars("ababababa"))  // 8 bigrams, 2 distinct
        #expect(comparator.bigramCheckPays() == true)
        comparator.load(scalars("abababababa"))  // 10 bigrams, 2 distinct
        #expect(comparator.bigramCheckPays() == false)
    }

    /// The comparator's occurrence table agrees with the reference on texts mixing ASCII and non-ASCII
    /// scalars (the 0x7F/0x80 boundary, NUL, astral scalars); one comparator is reloaded with texts of
    /// growing and shrinking length, so a stale table entry of an earlier load would show.
    @Test func comparatorMatchesTheReferenceOnMixedScalarsAcrossReloads() {
        var rng = SeededRandom(seed: 4242)
        let pool: [UInt32] = [0x00, 0x20, 0x61, 0x62, 0x63, 0x7E, 0x7F, 0x80, 0xFF, 0x100, 0x4E00, 0x4E01, 0x1F600, 0x10FFFF]
        var comparator = Similarity.Comparator()
        for round in 0..<600 {
            let alphabet = 2 + round % (pool.count - 1)
            let offset = Int(rng.next() % UInt64(pool.count - alphabet + 1))
            let letters = Array(pool[offset..<(offset + alphabet)])
            let m = Int(rng.next() % UInt64(round % 3 == 0 ? 70 : 25))
            let a = (0..<m).map { _ in letters[Int(rng.next() % UInt64(letters.count))] }
            var b = a
            if rng.next() % 2 == 0 || b.isEmpty {
                b = (0..<Int(rng.next() % 50)).map { _ in letters[Int(rng.next() % UInt64(letters.count))] }
            } else {
                for _ in 0..<(rng.next() % 5) {
                    b[Int(rng.next() % UInt64(b.count))] = pool[Int(rng.next() % UInt64(pool.count))]
                }
            }
            comparator.load(a)
            #expect(comparator.similarity(to: b) == ReferenceSpamFilter.similarity(a, b), "\(a) \(b)")
            #expect(comparator.peaks(against: b).shifts == ReferenceSpamFilter.peaks(a, b).map(\.d), "\(a) \(b)")
        }
    }
}
