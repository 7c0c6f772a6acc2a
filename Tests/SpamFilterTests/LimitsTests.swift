import BotSupport
import Testing
@testable import SpamFilter

@Suite("Spam filter limits at n and n+1")
struct LimitsTests {
    /// The index holds exactly the model's keys, each with the model's slots and occurrence counts
    /// (key 5000 is never inserted).
    static func expect(_ index: BigramIndex, equals model: [UInt64: [Int: Int]], slotCount: Int) {
        #expect(index.count == model.count)
        for (key, slots) in model {
            guard let position = index.position(of: key) else {
                Issue.record("key \(key) missing")
                continue
            }
            #expect(index.slots(at: position) == slots.keys.sorted())
            for probe in 0..<slotCount { #expect(index.occurrences(at: position, slot: probe) == slots[probe] ?? 0) }
        }
        #expect(index.position(of: 5000) == nil)
    }

    @Test(arguments: [
        ("max_tracked_senders", "1000000", true), ("max_tracked_senders", "1000001", false),
        ("max_tracked_senders", "4", true), ("max_tracked_senders", "3", false),
        ("repeat_window_seconds", "86400", true), ("repeat_window_seconds", "86400.5", false),
        ("timestamp_clamp_seconds", "86400", true), ("timestamp_clamp_seconds", "86401", false),
        ("stored_texts", "10000", true), ("stored_texts", "10001", false),
        ("cross_user_scan_max_comparisons", "10000", true), ("cross_user_scan_max_comparisons", "10001", false),
        // Buckets: up to a million tokens, in thousandths (exact integer arithmetic, `BucketScale`).
        ("message_bucket", #"{"capacity": 1000000}"#, true), ("message_bucket", #"{"capacity": 1000000.001}"#, false),
        ("message_bucket", #"{"capacity": 2.5}"#, true), ("message_bucket", #"{"capacity": 2.0005}"#, false),
        ("link_bucket", #"{"refill_tokens": 0.001}"#, true), ("link_bucket", #"{"refill_tokens": 0.0009}"#, false),
        ("link_bucket", #"{"refill_tokens": 0.1}"#, true), ("link_bucket", #"{"refill_tokens": 1000001}"#, false),
        ("character_bucket", #"{"refill_seconds": 86399.999}"#, true), ("character_bucket", #"{"refill_seconds": 0.0015}"#, false),
    ])
    func configLimits(field: String, value: String, accepted: Bool) throws {
        let json = try JSONParser().parse(#"{"\#(field)": \#(value)}"#)
        if accepted {
            #expect(throws: Never.self) { try SpamFilterConfig(json: json) }
        } else {
            #expect(throws: SpamConfigError.self) { try SpamFilterConfig(json: json) }
        }
    }

    /// The open-addressing bigram index behaves like a dictionary of (slot → occurrences) maps through
    /// growth, tombstones, rebuilds, level growth and shrinking, over more than one bitset word of slots.
    /// 700 slots (11 words) let keys switch between slot lists and bitsets both ways.
    @Test(arguments: [130, 700])
    func bigramIndexMatchesADictionaryModel(slotCount: Int) {
        var rng = SeededRandom(seed: 7)
        var index = BigramIndex(slots: slotCount, minimumCapacity: 4)
        var model: [UInt64: [Int: Int]] = [:]
        for step in 0..<20_000 {
            let key = 1 + rng.next() % (slotCount == 700 ? 40 : 700)
            let slot = Int(rng.next() % UInt64(slotCount))
            if rng.next() % 3 == 0 {
                index.remove(slot: slot, for: key)
                model[key]?[slot] = nil
                if model[key]?.isEmpty == true { model[key] = nil }
            } else if model[key]?[slot] == nil {
                let count = rng.next() % 5 == 0 ? Int(2 + rng.next() % 3) : 1
                index.insert(slot: slot, count: Int32(count), for: key)
                model[key, default: [:]][slot] = count
            }
            if step % 1000 == 0 || step == 19_999 { Self.expect(index, equals: model, slotCount: slotCount) }
        }
    }

    /// Whole texts inserted and removed in one call each (what the store does) keep the index equal to
    /// a dictionary model through growth, tombstones, rebuilds and pool reuse, for every index form:
    /// 1-word to 4-word levelled rows (1, 64, 130, 200, 256 slots) and lists above 256.
    @Test(arguments: [1, 64, 130, 200, 256, 700])
    func bigramIndexBatchesMatchADictionaryModel(slotCount: Int) {
        var rng = SeededRandom(seed: 13)
        var index = BigramIndex(slots: slotCount, minimumCapacity: 4)
        var texts: [[(gram: UInt64, count: Int32)]?] = Array(repeating: nil, count: slotCount)
        var model: [UInt64: [Int: Int]] = [:]
        for step in 0..<6_000 {
            let slot = Int(rng.next() % UInt64(slotCount))
            if let text = texts[slot] {
                text.withUnsafeBufferPointer { index.remove(slot: slot, bigrams: $0) }
                for (gram, _) in text {
                    model[gram]?[slot] = nil
                    if model[gram]?.isEmpty == true { model[gram] = nil }
                }
                texts[slot] = nil
            } else {
                // Distinct keys from a small universe (long posting lists), some repeated up to 6 times.
                let universe = UInt64(step % 2 == 0 ? 60 : 900)
                var grams: [UInt64: Int32] = [:]
                for _ in 0..<Int(rng.next() % 30) {
                    grams[1 + rng.next() % universe] = rng.next() % 4 == 0 ? Int32(2 + rng.next() % 5) : 1
                }
                let text = grams.map { (gram: $0.key, count: $0.value) }
                text.withUnsafeBufferPointer { index.insert(slot: slot, bigrams: $0) }
                for (gram, count) in text { model[gram, default: [:]][slot] = Int(count) }
                texts[slot] = text
            }
            if step % 500 == 0 || step == 5_999 { Self.expect(index, equals: model, slotCount: slotCount) }
        }
    }

    /// The filter's admission (window and length band, requirement by length) selects exactly what the
    /// general `admit` closure selects, newest first, whether the stored times' extremes let it test the
    /// band on the bit-sliced lengths or not (times beyond the window, NaN, lengths at and above the
    /// saturated 2¹⁶ − 1), and `forEachInWindow` lists exactly the admitted slots.
    @Test func windowAndBandAdmissionEqualsTheClosure() {
        var rng = SeededRandom(seed: 17)
        for capacity in [1, 3, 64, 65, 200, 256, 700] {
            var store = TextStore(capacity: capacity)
            var clock = 0.0
            for step in 0..<400 {
                let alphabet = UInt64(2 + step % 5)
                let scalars = (0..<Int(rng.next() % 30)).map { _ in UInt32(0x61 + rng.next() % alphabet) }
                let query = TextStore.bigrams(of: scalars)
                clock += Double(rng.next() % 4)
                let time = clock - Double(rng.next() % 3)
                let window = [3.0, 20, 1e9][Int(rng.next() % 3)]
                let low = Int(rng.next() % 40)
                let high = rng.next() % 10 == 0 ? TextStore.lengthCeiling + Int(rng.next() % 3) - 1 : low + Int(rng.next() % 40)
                let band = low...high
                let required = Int(rng.next() % 8)
                let requirement = { (n: Int) in required + n % 3 }
                var got: [Int] = []
                store.forEachSharingBigrams(
                    query, total: max(scalars.count - 1, 0), required: required, around: time, window: window, lengths: band,
                    requirement: requirement
                ) { got.append($0) }
                var expected: [Int] = []
                store.forEachSharingBigrams(
                    query, total: max(scalars.count - 1, 0), required: required,
                    admit: { t, n in abs(t - time) < window && band.contains(n) ? requirement(n) : nil }
                ) { expected.append($0) }
                #expect(got == expected, "capacity \(capacity) step \(step)")
                var inWindow: [Int] = []
                store.forEachInWindow(around: time, window: window, lengths: band) { inWindow.append($0) }
                let admitted = store.slotsNewestFirst().filter { slot in
                    guard let entry = store.slots[slot] else { return false }
                    return abs(entry.time - time) < window && band.contains(entry.length)
                }
                #expect(inWindow == admitted, "capacity \(capacity) step \(step)")
                // Stored: usually the text's own length, sometimes one near or past the saturation; NaN now and
                // then in the small rings (which soon evict it).
                let length = rng.next() % 12 == 0 ? TextStore.lengthCeiling + Int(rng.next() % 5) - 2 : scalars.count
                let stored = capacity <= 65 && rng.next() % 25 == 0 ? Double.nan : clock + Double(rng.next() % 5) - 2
                store.insert(
                    senderKey: "s", messageID: "m\(step)", time: stored, length: length, scalars: scalars, bigrams: query)
            }
        }
    }

    /// The bit-sliced shared-bigram scan returns exactly the slots whose multiset bigram intersection
    /// (merged from the sorted lists) reaches the per-slot requirement, newest first, through evictions,
    /// for every index form: 1-, 2-, 3- and 4-word levelled bitsets (200 is the default store) and lists above 256.
    @Test func sharedBigramScanEqualsTheMergedIntersection() {
        var rng = SeededRandom(seed: 11)
        for capacity in [1, 3, 64, 65, 130, 700, 200, 256] {
            var store = TextStore(capacity: capacity)
            for step in 0..<300 {
                let alphabet = UInt64(2 + step % 6)
                let scalars = (0..<Int(rng.next() % 40)).map { _ in UInt32(0x61 + rng.next() % alphabet) }
                let query = TextStore.bigrams(of: scalars)
                let total = max(scalars.count - 1, 0)
                let requirement = Int(rng.next() % 12)
                let times = Double(step)
                var got: [Int] = []
                let floor = max(0, requirement - Int(rng.next() % 3))
                store.forEachSharingBigrams(
                    query, total: total, required: floor,
                    admit: { time, length in (length + Int(time)) % 5 == 0 ? nil : requirement + length % 3 }
                ) { got.append($0) }
                let expected = store.slotsNewestFirst().filter { slot in
                    guard let entry = store.slots[slot], (entry.length + Int(entry.time)) % 5 != 0 else { return false }
                    return TextStore.shared(query.sorted { $0.gram < $1.gram }, entry.bigrams.sorted { $0.gram < $1.gram })
                        >= requirement + entry.length % 3
                }
                #expect(got == expected, "capacity \(capacity) step \(step)")
                store.insert(
                    senderKey: "s", messageID: "m\(step)", time: times, length: scalars.count, scalars: scalars, bigrams: query)
            }
        }
    }

    /// The bigram counter equals counting every adjacent pair, whatever the alphabet (one cell per gram).
    @Test func bigramsCountEveryAdjacentPair() {
        var rng = SeededRandom(seed: 5)
        for _ in 0..<500 {
            let alphabet = UInt64(1 + rng.next() % 40)
            let scalars = (0..<Int(rng.next() % 200)).map { _ in UInt32(rng.next() % alphabet) &* 0x10001 }
            var model: [UInt64: Int32] = [:]
            for i in 0..<max(scalars.count - 1, 0) { model[UInt64(scalars[i]) << 32 | UInt64(scalars[i + 1]), default: 0] += 1 }
            let grams = TextStore.bigrams(of: scalars)
            #expect(grams.count == model.count)
            #expect(Dictionary(uniqueKeysWithValues: grams.map { ($0.gram, $0.count) }) == model)
        }
    }

    @Test func textStoreEvictsItsOldestTextAtCapacity() {
        var store = TextStore(capacity: 3)
        for i in 0..<4 {
            let scalars = Array("text \(i)".unicodeScalars.map(\.value))
            store.insert(
                senderKey: "s", messageID: "m\(i)", time: 0, length: scalars.count, scalars: scalars,
                bigrams: TextStore.bigrams(of: scalars))
            #expect(store.count == min(i + 1, 3))
        }
        let ids = store.slotsNewestFirst().compactMap { store.slots[$0]?.messageID }
        #expect(ids == ["m3", "m2", "m1"])
    }
}
